package verify_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/verify"
)

// hangBound bounds a verification the tests expect to finish: a re-read
// that stops making progress (it once polled a closed cursor at 100% CPU)
// ends with the context's error, which fails the test, instead of hanging
// the test binary. It is a bound, not a measure: nothing waits for it.
const hangBound = 2 * time.Minute

// rawTime matches a cluster time printed raw (seconds.increment).
var rawTime = regexp.MustCompile(`\b1\d{9}\.\d+\b`)

// TestReadsOnAfterAnInvalidate: a window holding a drop of the watched
// collection — which invalidates the change stream, whose cursor the
// server then closes — is read on after the invalidate to its end. The
// re-read used to poll the closed cursor (TryNext returns false at once,
// without a getMore) at 100% CPU until its context ended, and said only
// "context deadline exceeded". The drop is an event (partition 0 counts
// it: the consumer hands it to the handler); the invalidate is not.
func TestReadsOnAfterAnInvalidate(t *testing.T) {
	e := newEnv(t)
	from := e.insert(e.orders, "a", 0, 100)
	dropped := e.write(func(ctx context.Context) error { return e.orders.Drop(ctx) })
	e.insert(e.orders, "b", 0, 100)
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	r, err := verify.Stream(ctx, e.config(from))
	if err != nil {
		t.Fatalf("verify a window holding a drop: %v", err)
	}
	// No checkpoints: every event is pending.
	if r.Events != 201 || r.Pending != 201 || r.Missing != 0 || !r.OK() {
		t.Fatalf("verify a window holding a drop: %v (failure %q), want 201 events (200 inserts and the drop), all pending", r, r.Failure)
	}
	if note := strings.Join(r.Notes, "\n"); !strings.Contains(note, "invalidated at "+verify.FormatTime(dropped)) {
		t.Errorf("the notes do not say where the stream was invalidated (%s):\n%s", verify.FormatTime(dropped), note)
	}

	// A pipeline that filters the invalidate out: the server closes the
	// cursor all the same, and verify cannot tell where the stream ended.
	// It says so, instead of polling the closed cursor.
	cfg := e.config(from)
	cfg.Options = append(cfg.Options, ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}))
	_, err = verify.Stream(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "without an invalidate event") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("verify with the invalidate filtered out: %v, want an error saying the server closed the stream", err)
	}
	if rawTime.MatchString(err.Error()) {
		t.Errorf("the error prints a raw cluster time: %v", err)
	}
}

// TestWindowFromTheOplogStart: a window that starts before the oplog,
// whose changes all happened in one second (the emulator's clock stands
// still), 500 of 1,000 of them still in the oplog. With FromOplogStart it
// starts at the oplog's oldest entry, increment included, and checks the
// 500; without it, it fails with ErrWindow naming that entry's time in
// RFC 3339. A start found to the second (the increment 0 of its second)
// reads nothing of that second: before the oplog, or after all of it.
func TestWindowFromTheOplogStart(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(500), emutest.FrozenClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)))
	e.insert(e.orders, "o", 0, 500)
	start := e.insert(e.orders, "o", 500, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	requested := bson.Timestamp{T: start.T - 3600}
	cfg := e.config(requested)
	cfg.FromOplogStart = true
	r, err := verify.Stream(ctx, cfg)
	if err != nil {
		t.Fatalf("verify from an hour before the oplog: %v", err)
	}
	if r.Events != 500 || r.Pending != 500 || r.From != start || r.Requested != requested || !r.OK() {
		t.Fatalf("verify from an hour before the oplog: %v from %s (failure %q), want the 500 events the oplog holds, from %s",
			r, verify.FormatTime(r.From), r.Failure, verify.FormatTime(start))
	}
	if w := r.Window(); !strings.Contains(w, verify.FormatTime(start)+" to ") || !strings.Contains(w, "oplog's start") {
		t.Errorf("the window line does not name the oplog's start %s: %s", verify.FormatTime(start), w)
	}
	if note := strings.Join(r.Notes, "\n"); !strings.Contains(note, "starts at the oplog's start, "+verify.FormatTime(start)) {
		t.Errorf("no note says the window starts at the oplog's start:\n%s", note)
	}

	cfg.FromOplogStart = false
	_, err = verify.Stream(ctx, cfg)
	if !errors.Is(err, verify.ErrWindow) || !strings.Contains(err.Error(), "the oplog starts at "+verify.FormatTime(start)) {
		t.Fatalf("verify from before the oplog, without FromOplogStart: %v, want ErrWindow naming %s", err, verify.FormatTime(start))
	}
	if rawTime.MatchString(err.Error()) {
		t.Errorf("the error prints a raw cluster time: %v", err)
	}
	// The start's second, from its increment 0: before the oplog too.
	cfg.From = bson.Timestamp{T: start.T}
	if _, err = verify.Stream(ctx, cfg); !errors.Is(err, verify.ErrWindow) {
		t.Fatalf("verify from the oplog's first second, increment 0: %v, want ErrWindow", err)
	}
	cfg.From = start
	if r, err := verify.Stream(ctx, cfg); err != nil || r.Events != 500 {
		t.Fatalf("verify from the oplog's start: %v, %v; want the 500 events", r, err)
	}
	// A window's end after the source's current time (its clock stands
	// still: no change will ever reach it) is the current time: the
	// re-read used to wait for it.
	cfg.To = bson.Timestamp{T: start.T + 3600}
	r, err = verify.Stream(ctx, cfg)
	if err != nil || r.Events != 500 || !r.To.Before(cfg.To) || !strings.Contains(strings.Join(r.Notes, "\n"), "is after the source's current time") {
		t.Fatalf("verify to an hour after the source's current time: %v to %s, %v; want the 500 events to the current time, and a note",
			r, verify.FormatTime(r.To), err)
	}
}

// TestNothingCheckedFails: a window that reads no change while the state
// store shows changes of the stream in it fails (Report.Failure, not OK),
// saying what it found: ledger entries applied in the window, a
// checkpoint at a change in it. A quiet window passes.
func TestNothingCheckedFails(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(50))
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	before := e.insert(e.orders, "quiet", 0, 1)
	e.insert(e.client.Database("shop").Collection("other"), "x", 0, 10)
	// Quiet: no change of the stream in the window (the window starts
	// after the one insert), nothing in the state store.
	r, err := verify.Stream(ctx, e.config(after(before)))
	if err != nil || r.Events != 0 || !r.OK() {
		t.Fatalf("verify a quiet window: %v (failure %q), %v; want 0 events and a pass", r, r.Failure, err)
	}

	// 20 changes applied (their ledger entries), then pushed out of the
	// oplog by 60 writes to another collection.
	from := e.insert(e.orders, "o", 0, 20)
	var ids []string
	var last bson.Raw
	rs, err := e.orders.Watch(ctx, []bson.D{}, options.ChangeStream().SetStartAtOperationTime(&from))
	if err != nil {
		t.Fatal(err)
	}
	for len(ids) < 20 && rs.Next(ctx) {
		ev, err := ferry.ParseEvent(rs.Current, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		ids, last = append(ids, ev.ID()), append(bson.Raw(nil), ev.Token...)
	}
	rs.Close(ctx)
	if len(ids) != 20 {
		t.Fatalf("read %d of the 20 changes", len(ids))
	}
	if err := e.ledger.RecordMany(ctx, "orders", ids, 0, 1); err != nil {
		t.Fatal(err)
	}
	e.insert(e.client.Database("shop").Collection("other"), "roll", 0, 60)
	cfg := e.config(from)
	cfg.FromOplogStart = true
	r, err = verify.Stream(ctx, cfg)
	if err != nil {
		t.Fatalf("verify a window whose changes the oplog lost: %v", err)
	}
	if r.Events != 0 || r.OK() || !strings.Contains(r.Failure, "20 ledger entries applied in it") ||
		!strings.Contains(r.Failure, "nothing was checked") || !strings.Contains(r.Failure, "no longer holds them") {
		t.Fatalf("verify a window whose changes the oplog lost: %v, failure %q; want 0 events and a failure naming the 20 ledger entries", r, r.Failure)
	}

	// Without the ledger entries, the checkpoint at the last change is the
	// evidence.
	for _, id := range ids {
		if err := e.ledger.Forget(ctx, "orders", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cps.Save(ctx, checkpoint.Checkpoint{Stream: "orders", Partition: 1, Token: last, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	r, err = verify.Stream(ctx, cfg)
	if err != nil || r.OK() || !strings.Contains(r.Failure, "checkpoint of partition 1 at a change in it") {
		t.Fatalf("verify with a checkpoint at a change in the window: %v, failure %q, %v", r, r.Failure, err)
	}
	if rawTime.MatchString(r.Failure) {
		t.Errorf("the failure prints a raw cluster time: %s", r.Failure)
	}
}

// after is the cluster time just after ts.
func after(ts bson.Timestamp) bson.Timestamp { return bson.Timestamp{T: ts.T, I: ts.I + 1} }
