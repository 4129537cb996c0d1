package boltstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
)

// TestDamagedFileIsAnError: a state file whose pages after the first 8 KiB
// were overwritten made bbolt panic ("invalid freelist page … page type
// is unknown": the process exited 2, 3 of 3 runs). Open, or the first read,
// now returns an error matching ErrCorrupt that names the file and the way
// out.
func TestDamagedFileIsAnError(t *testing.T) {
	for seed := range uint64(8) {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := boltstore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: strings.Repeat("82", 40)}})
		for p := range 200 {
			if _, err := s.Save(context.Background(), checkpoint.Checkpoint{Stream: "orders", Partition: p, Token: tok}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := 8 << 10; i < len(data); i++ {
			data[i] = byte(rng.UintN(256))
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err = boltstore.Open(path)
		if err == nil {
			// The damage may show only when pages are read.
			_, err = s.List(context.Background(), "orders")
			if err == nil {
				_, err = s.Save(context.Background(), checkpoint.Checkpoint{Stream: "orders", Partition: 500, Token: tok})
			}
			_ = s.Close()
		}
		if err == nil {
			continue // this damage happened to be readable
		}
		if errors.Is(err, boltstore.ErrCorrupt) && (!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "start_at")) {
			t.Fatalf("seed %d: %v: want the file named and the way out", seed, err)
		}
	}
}
