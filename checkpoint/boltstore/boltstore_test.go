package boltstore_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/checkpoint/checkpointtest"
)

func open(t *testing.T) checkpoint.Store {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) { checkpointtest.Run(t, open) }

func TestSnapshotRequestsContract(t *testing.T) { checkpointtest.RunSnapshotRequests(t, open) }

func sample(stream string, partition int) checkpoint.Checkpoint {
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "8265A1B2C3000000012B042C0100296E5A1004"}})
	return checkpoint.Checkpoint{Stream: stream, Partition: partition, Token: tok, Epoch: 3}
}

func TestReopenKeepsCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := s.Save(t.Context(), sample("orders", 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(t.Context(), "orders", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != saved.Version || string(got.Token) != string(saved.Token) || !got.UpdatedAt.Equal(saved.UpdatedAt) {
		t.Fatalf("after reopening: %+v, want %+v", got, saved)
	}
}

func TestClockStampsUpdatedAt(t *testing.T) {
	now := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "ferry.db"), boltstore.Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Save(t.Context(), sample("orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2030, 5, 6, 6, 8, 9, 123000000, time.UTC) // milliseconds, UTC
	if !got.UpdatedAt.Equal(want) || got.UpdatedAt.Location() != time.UTC {
		t.Fatalf("UpdatedAt = %v, want %v", got.UpdatedAt, want)
	}
}

func TestSecondOpenFailsWithinTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// flock locks belong to open file descriptions, so a second open in this
	// process contends like another process would.
	start := time.Now()
	_, err = boltstore.Open(path, boltstore.LockTimeout(100*time.Millisecond))
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error does not name the file: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("second Open took %v", d)
	}
	// Once the first store is closed the file opens again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := boltstore.Open(path, boltstore.LockTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

const helperEnv = "BOLTSTORE_TEST_HOLD_FILE"

// TestHelperHoldFile is not a test: run by TestOpenLockedByOtherProcess in a
// child process, it opens the file, says "ready", and holds the file until
// its stdin closes.
func TestHelperHoldFile(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.Stdout.WriteString("ready\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

func TestOpenLockedByOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper process: %q, %v", line, err)
	}
	_, err = boltstore.Open(path, boltstore.LockTimeout(50*time.Millisecond))
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("Open of a file another process holds: err = %v, want ErrLocked", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for name, opts := range map[string][]boltstore.Option{
		"zero lock timeout":     {boltstore.LockTimeout(0)},
		"negative lock timeout": {boltstore.LockTimeout(-time.Second)},
		"nil clock":             {boltstore.Clock(nil)},
		"mode without owner rw": {boltstore.FileMode(0o400)},
		"nil option":            {nil},
	} {
		_, err := boltstore.Open(filepath.Join(dir, "x.db"), opts...)
		if !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := boltstore.Open(""); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("empty path: err = %v, want ErrInvalid", err)
	}
	// Validated once, every problem named; a later option overrides an
	// earlier one.
	_, err := boltstore.Open("", boltstore.LockTimeout(0), boltstore.LockTimeout(time.Second), boltstore.Clock(nil), boltstore.FileMode(0o400))
	if want := "checkpoint: invalid argument: path: empty path: name the store's file, such as ferry.db; " +
		"Clock: nil clock (leave the option out for time.Now); " +
		"FileMode: want permission bits including owner read and write (0600), got -r--------"; err == nil || err.Error() != want {
		t.Errorf("Open = %v, want %q", err, want)
	}
	if _, err := boltstore.Open(filepath.Join(dir, "missing-dir", "x.db")); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a bolt file ", 1024)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := boltstore.Open(junk); err == nil {
		s.Close()
		t.Error("Open of a file that is not a bbolt database succeeded")
	}
}
