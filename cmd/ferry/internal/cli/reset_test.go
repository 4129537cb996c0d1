package cli

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/mongotest"
)

// resetEnv is an emulator with a stream "orders" of two partitions whose
// checkpoints were saved at known cluster times.
type resetEnv struct {
	srv    *mongotest.Server
	client *mongo.Client
	cps    *mongostore.Store
	oldest time.Time // the oldest checkpoint's cluster time (whole seconds)
}

// newResetEnv saves the checkpoints of partition 0 at agoOldest before the
// server's clock and of partition 1 at 100 s before it.
func newResetEnv(t *testing.T, agoOldest time.Duration) *resetEnv {
	t.Helper()
	srv, client := emulator(t)
	cps, err := mongostore.New(client.Database("ferry_state"))
	if err != nil {
		t.Fatal(err)
	}
	now := srv.Now()
	env := &resetEnv{srv: srv, client: client, cps: cps, oldest: time.Unix(now.Add(-agoOldest).Unix(), 0).UTC()}
	for p, ago := range []time.Duration{agoOldest, 100 * time.Second} {
		ts := bson.Timestamp{T: uint32(now.Add(-ago).Unix()), I: 3}
		if _, err := cps.Save(context.Background(), checkpoint.Checkpoint{Stream: "orders", Partition: p, Epoch: 1,
			Token: hwmToken(t, ts), ClusterTime: ts}); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

func (e *resetEnv) config(t *testing.T, startAt string) string {
	return writeFile(t, `
state: {uri: "`+e.srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+e.srv.URI()+`", scope: {collection: shop.orders}, start_at: `+startAt+`}
    group: {partitions: 2}
    sink: {stdout: {}}
`)
}

func (e *resetEnv) checkpoints(t *testing.T) int {
	t.Helper()
	list, err := e.cps.List(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// goAPINames are library names an operator's message must not use.
var goAPINames = regexp.MustCompile(`StartAt\(|StartWithBackfill|StartNow|StartAtTime|ferry\.Start|HistoryLost[A-Z]`)

// TestResetStartAtNowRefusesWithoutYes: with start_at now, resetting skips
// every change made since the oldest checkpoint. ferry reset says how many
// seconds that is (the server's clock minus the oldest checkpoint's cluster
// time) and since when, names the YAML key and -yes, and deletes nothing;
// with -yes it deletes the checkpoints.
func TestResetStartAtNowRefusesWithoutYes(t *testing.T) {
	env := newResetEnv(t, 1234*time.Second)
	cfgPath := env.config(t, "now")
	code, out, errOut := runCLI("reset", "-c", cfgPath, "-stream", "orders")
	if code != 1 || out != "" {
		t.Fatalf("reset without -yes: exit %d, stdout %q, stderr %q; want 1 and nothing on stdout", code, out, errOut)
	}
	if n := env.checkpoints(t); n != 2 {
		t.Fatalf("reset without -yes deleted checkpoints: %d left, want 2", n)
	}
	m := regexp.MustCompile(`^ferry reset: stream orders: start_at is now: the changes of the last (\d+) s \(since (\S+)\) would be skipped ` +
		`and never delivered\. To deliver them, set source\.start_at to backfill or to a time at or before (\S+); ` +
		`to skip them, run again with -yes`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("reset without -yes says:\n%s", errOut)
	}
	secs, _ := strconv.Atoi(m[1])
	if secs < 1234 || secs > 1240 { // the seconds the test took, and the checkpoint's fraction of a second
		t.Errorf("reset says %d s would be skipped, want 1234 (+ the few seconds the test took)", secs)
	}
	since := env.oldest.Format(time.RFC3339)
	if m[2] != since || m[3] != since {
		t.Errorf("reset names %s and %s, want the oldest checkpoint's time %s", m[2], m[3], since)
	}
	if goAPINames.MatchString(errOut) {
		t.Errorf("reset names a Go API:\n%s", errOut)
	}

	// The server's clock, not the local one, decides.
	env.srv.AdvanceClock(time.Hour)
	_, _, errOut = runCLI("reset", "-c", cfgPath, "-stream", "orders")
	if m := regexp.MustCompile(`the last (\d+) s`).FindStringSubmatch(errOut); m == nil {
		t.Fatalf("reset without -yes says:\n%s", errOut)
	} else if n, _ := strconv.Atoi(m[1]); n < 3600+1234 || n > 3600+1240 {
		t.Errorf("after the server's clock moved an hour on, reset says %d s, want %d", n, 3600+1234)
	}

	code, out, errOut = runCLI("reset", "-c", cfgPath, "-stream", "orders", "-yes")
	if code != 0 || !strings.Contains(out, "stream orders: 2 checkpoint(s) deleted.") || !strings.Contains(out, "start_at: now") ||
		!strings.Contains(out, since) {
		t.Fatalf("reset -yes: exit %d: %s%s", code, out, errOut)
	}
	if n := env.checkpoints(t); n != 0 {
		t.Fatalf("reset -yes left %d checkpoints", n)
	}
	if code, out, errOut := runCLI("reset", "-c", cfgPath, "-stream", "orders"); code != 0 || !strings.Contains(out, "no checkpoints") {
		t.Errorf("reset of a stream without checkpoints: exit %d: %s%s", code, out, errOut)
	}
}

// TestResetOtherStartsNeedNoYes: with start_at backfill, or a time at or
// before the oldest checkpoint, nothing is skipped: ferry reset deletes
// without -yes and says what the stream does next. A time after the oldest
// checkpoint skips the changes in between and needs -yes.
func TestResetOtherStartsNeedNoYes(t *testing.T) {
	env := newResetEnv(t, 600*time.Second)
	code, out, errOut := runCLI("reset", "-c", env.config(t, "backfill"), "-stream", "orders")
	if code != 0 || !strings.Contains(out, "2 checkpoint(s) deleted") || !strings.Contains(out, "scans the source (start_at: backfill)") {
		t.Fatalf("reset with start_at backfill: exit %d: %s%s", code, out, errOut)
	}
	if n := env.checkpoints(t); n != 0 {
		t.Fatalf("%d checkpoints left", n)
	}

	env = newResetEnv(t, 600*time.Second)
	before := env.oldest.Add(-30 * time.Second).Format(time.RFC3339)
	code, out, errOut = runCLI("reset", "-c", env.config(t, before), "-stream", "orders")
	if code != 0 || !strings.Contains(out, "delivers the changes made from "+before+" on (source.start_at), 30 s before its oldest checkpoint") ||
		!strings.Contains(out, "on_history_lost: fail") {
		t.Fatalf("reset with start_at before the checkpoints: exit %d: %s%s", code, out, errOut)
	}
	if n := env.checkpoints(t); n != 0 {
		t.Fatalf("%d checkpoints left", n)
	}

	env = newResetEnv(t, 600*time.Second)
	after := env.oldest.Add(200 * time.Second).Format(time.RFC3339)
	cfgPath := env.config(t, after)
	code, _, errOut = runCLI("reset", "-c", cfgPath, "-stream", "orders")
	want := fmt.Sprintf("ferry reset: stream orders: start_at is %s, after its oldest checkpoint: the changes of the 200 s between %s and %s "+
		"would be skipped and never delivered. To deliver them, set source.start_at to backfill or to a time at or before %s",
		after, env.oldest.Format(time.RFC3339), after, env.oldest.Format(time.RFC3339))
	if code != 1 || !strings.Contains(errOut, want) || goAPINames.MatchString(errOut) {
		t.Fatalf("reset with start_at after the oldest checkpoint: exit %d:\n%s\nwant %s", code, errOut, want)
	}
	if n := env.checkpoints(t); n != 2 {
		t.Fatalf("reset without -yes deleted checkpoints: %d left, want 2", n)
	}
	if code, out, errOut := runCLI("reset", "-c", cfgPath, "-stream", "orders", "-yes"); code != 0 || !strings.Contains(out, "2 checkpoint(s) deleted") {
		t.Fatalf("reset -yes: exit %d: %s%s", code, out, errOut)
	}
}

// saveOld saves a checkpoint of stream "old" (partition 0) ago before the
// server's clock.
func (e *resetEnv) saveOld(t *testing.T, ago time.Duration) time.Time {
	t.Helper()
	at := e.srv.Now().Add(-ago)
	ts := bson.Timestamp{T: uint32(at.Unix()), I: 1}
	if _, err := e.cps.Save(context.Background(), checkpoint.Checkpoint{Stream: "old", Partition: 0, Epoch: 1,
		Token: hwmToken(t, ts), ClusterTime: ts}); err != nil {
		t.Fatal(err)
	}
	return time.Unix(at.Unix(), 0).UTC()
}

// TestResetCheckpointsOf: with start_at {checkpoints_of: old}, the next
// run starts at old's oldest checkpoint. At or before the stream's own
// oldest checkpoint, the changes since are delivered again: ferry reset
// deletes without -yes and says so (it used to say they are skipped). After
// it, the changes in between are skipped: it refuses without -yes, saying
// how many seconds. Without checkpoints of old, it says the next run stops.
func TestResetCheckpointsOf(t *testing.T) {
	const startAt = "{checkpoints_of: old}"
	env := newResetEnv(t, 600*time.Second)
	oldAt := env.saveOld(t, 900*time.Second)
	code, out, errOut := runCLI("reset", "-c", env.config(t, startAt), "-stream", "orders")
	want := fmt.Sprintf("starts where the checkpoints of stream old are (source.start_at: {checkpoints_of: old}), now at %s (#1), "+
		"300 s before its own oldest checkpoint (%s (#3)): the changes since are delivered again", oldAt.Format(time.RFC3339),
		env.oldest.Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "2 checkpoint(s) deleted") || !strings.Contains(out, want) || strings.Contains(out, "skipped") {
		t.Fatalf("reset with old's checkpoints before ours: exit %d:\n%s%s\nwant %s", code, out, errOut, want)
	}
	if n := env.checkpoints(t); n != 0 {
		t.Fatalf("%d checkpoints left", n)
	}

	env = newResetEnv(t, 600*time.Second)
	oldAt = env.saveOld(t, 300*time.Second)
	cfgPath := env.config(t, startAt)
	code, _, errOut = runCLI("reset", "-c", cfgPath, "-stream", "orders")
	want = fmt.Sprintf("ferry reset: stream orders: source.start_at: {checkpoints_of: old} starts at %s (#1), after its own "+
		"oldest checkpoint (%s (#3)): the changes of the 300 s in between would be skipped and never delivered.",
		oldAt.Format(time.RFC3339), env.oldest.Format(time.RFC3339))
	if code != 1 || !strings.Contains(errOut, want) || goAPINames.MatchString(errOut) {
		t.Fatalf("reset with old's checkpoints after ours: exit %d:\n%s\nwant %s", code, errOut, want)
	}
	if n := env.checkpoints(t); n != 2 {
		t.Fatalf("reset without -yes deleted checkpoints: %d left, want 2", n)
	}
	if code, out, errOut := runCLI("reset", "-c", cfgPath, "-stream", "orders", "-yes"); code != 0 ||
		!strings.Contains(out, "the 300 s of changes since its own oldest checkpoint") {
		t.Fatalf("reset -yes: exit %d: %s%s", code, out, errOut)
	}

	env = newResetEnv(t, 600*time.Second)
	code, out, errOut = runCLI("reset", "-c", env.config(t, startAt), "-stream", "orders")
	if code != 0 || !strings.Contains(out, "old has none that records a position: the run stops and says so") {
		t.Fatalf("reset with no checkpoints of old: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestResetStreamFlag: a missing or unknown -stream exits 2 naming the flag
// and the configured streams.
func TestResetStreamFlag(t *testing.T) {
	cfgPath := writeFile(t, `
state: {uri: "mongodb://127.0.0.1:9/?replicaSet=rs0"}
streams:
  - name: orders
    source: {uri: "mongodb://127.0.0.1:9/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink: {stdout: {}}
`)
	for _, args := range [][]string{{"reset", "-c", cfgPath}, {"reset", "-c", cfgPath, "-stream", "nope"}} {
		if code, _, errOut := runCLI(args...); code != 2 || !strings.Contains(errOut, "-stream") || !strings.Contains(errOut, "orders") {
			t.Errorf("ferry %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestOldestPosition: the resume position is the token's cluster time (the
// recorded ClusterTime when the token cannot be decoded); checkpoints
// without either do not count.
func TestOldestPosition(t *testing.T) {
	opaque, _ := bson.Marshal(bson.D{{Key: "_data", Value: "not hex"}})
	cp := func(ct uint32, tok bson.Raw) checkpoint.Checkpoint {
		return checkpoint.Checkpoint{ClusterTime: bson.Timestamp{T: ct}, Token: tok}
	}
	for _, tc := range []struct {
		name  string
		cps   []checkpoint.Checkpoint
		want  uint32
		known bool
	}{
		{"none", nil, 0, false},
		{"no position", []checkpoint.Checkpoint{cp(0, nil)}, 0, false},
		{"the token wins", []checkpoint.Checkpoint{cp(10, hwmToken(t, bson.Timestamp{T: 50}))}, 50, true},
		{"recorded time when the token is opaque", []checkpoint.Checkpoint{cp(40, opaque)}, 40, true},
		{"oldest", []checkpoint.Checkpoint{cp(0, hwmToken(t, bson.Timestamp{T: 70})), cp(30, opaque), cp(0, nil)}, 30, true},
	} {
		got, known := oldestPosition(tc.cps)
		if known != tc.known || got.T != tc.want {
			t.Errorf("%s: oldestPosition = %v, %v; want %d, %v", tc.name, got, known, tc.want, tc.known)
		}
	}
}
