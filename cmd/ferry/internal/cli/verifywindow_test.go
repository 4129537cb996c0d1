package cli

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/emutest"
)

// ordersStream is the stream the verify tests run: idempotent delivery
// (a ledger) to the stdout sink.
var ordersStream = streamSpec{name: "orders", mode: "idempotent", sink: "{stdout: {}}"}

// TestVerifyWindowReachingBeforeTheOplog, as the operator met it: 1,000
// changes delivered through a 500-entry oplog, half of them fallen off,
// then `ferry verify` with its default -since 1h, which reaches back
// before the oplog's start. It used to halve the window until the oplog
// held it — skipping up to half the history there, here every change,
// with a note that named a start the oplog did not have — or, failing,
// to quote raw timestamps. The window starts where the oplog starts, to
// the increment: the source's clock stands still, so the changes of each
// phase share one second, and 300 of the 500 held lie in the oplog's
// first second, which a start found to the second misses. verify checks
// all 500, names the start as `ferry position show` does, and a -from in
// that first second (its increment 0 is before the oplog) is refused,
// naming the start.
func TestVerifyWindowReachingBeforeTheOplog(t *testing.T) {
	e := newOpsEnv(t, emutest.OplogMaxEntries(500), emutest.FrozenClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)))
	cfg := e.config(ordersStream)
	m := startMember(t, cfg, "m0")
	e.waitStarted(m, 2)
	// Each phase is fewer writes than the oplog holds: the member's
	// streams never fall off it.
	e.insert(e.orders, "o", 0, 400)
	e.waitApplied(m, "orders", 400)
	e.src.AdvanceClock(time.Second)
	e.insert(e.orders, "o", 400, 500)
	start := e.insert(e.orders, "o", 500, 800) // o-500: the oldest entry left at the end
	e.waitApplied(m, "orders", 800)
	e.src.AdvanceClock(time.Second)
	e.insert(e.orders, "o", 800, 1000)
	e.waitApplied(m, "orders", 1000)
	m.stop(syscall.SIGTERM) // final checkpoints: nothing pending

	code, out, errOut := ferryProc(t, "position", "show", "-c", cfg)
	if code != 0 || !strings.Contains(out, "oplog window from "+timeText(start)) {
		t.Fatalf("position show: exit %d, want the oplog window from %s\n%s%s", code, timeText(start), out, errOut)
	}
	code, out, errOut = ferryProc(t, "verify", "-c", cfg, "-stream", "orders")
	t.Logf("ferry verify -stream orders (-since 1h):\n%s%s", out, errOut)
	if code != 0 || !strings.Contains(out, "verify: events=500 applied=500 dead-lettered=0 pending=0 missing=0\n") {
		t.Fatalf("verify: exit %d, want the 500 changes the oplog holds, all applied", code)
	}
	if !strings.Contains(out, "window: "+timeText(start)+" to ") || !strings.Contains(out, "(from the oplog's start)") ||
		!strings.Contains(out, "starts at the oplog's start, "+timeText(start)) {
		t.Fatalf("verify does not say the window starts at the oplog's start, %s", timeText(start))
	}
	if rawClusterTime.MatchString(out + errOut) {
		t.Fatalf("verify prints a raw cluster time")
	}

	firstSecond := time.Unix(int64(start.T), 0).UTC().Format(time.RFC3339)
	code, out, errOut = ferryProc(t, "verify", "-c", cfg, "-stream", "orders", "-from", firstSecond)
	if code != 1 || !strings.Contains(errOut, "the oplog starts at "+timeText(start)) || !strings.Contains(errOut, "-since") ||
		rawClusterTime.MatchString(out+errOut) {
		t.Fatalf("verify -from %s (before the oplog's oldest entry): exit %d, want 1 naming the start %s\n%s%s",
			firstSecond, code, timeText(start), out, errOut)
	}
}

// TestVerifyFailsWhenItChecksNothing, as the operator met it: a stream's
// 300 changes are applied, then the oplog rolls (writes to another
// collection) until it holds none of them. `ferry verify` over the last
// hour read no change and printed events=0 … missing=0, exit 0: it
// checked nothing and passed. The ledger shows 300 changes applied in the
// window: verify fails (exit 1) and a fail: line says why.
func TestVerifyFailsWhenItChecksNothing(t *testing.T) {
	// The clock runs: the ledger's appliedAt (the member's clock) and the
	// window's cluster times (the source's) are both the time of day.
	e := newOpsEnv(t, emutest.OplogMaxEntries(500))
	cfg := e.config(ordersStream)
	m := startMember(t, cfg, "m0")
	e.waitStarted(m, 2)
	e.insert(e.orders, "o", 0, 300)
	e.waitApplied(m, "orders", 300)
	m.stop(syscall.SIGTERM)
	docs := make([]any, 600)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := e.srcClient.Database("shop").Collection("other").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := ferryProc(t, "verify", "-c", cfg, "-stream", "orders")
	t.Logf("ferry verify -stream orders:\n%s%s", out, errOut)
	if code != 1 || !strings.Contains(out, "verify: events=0 ") || !strings.Contains(out, "\nfail: ") ||
		!strings.Contains(out, "300 ledger entries applied in it") || !strings.Contains(out, "nothing was checked") {
		t.Fatalf("verify of a window whose changes the oplog lost: exit %d, want 1 with a fail: line naming the 300 ledger entries", code)
	}
}

// TestVerifyReadsOnAfterADrop, as the operator met it: a window holding a
// drop of the stream's collection (the member, on_invalidate: restart,
// went on after it). verify used to spin at 100% CPU on the change stream
// the server closed after the invalidate, until interrupted, printing only
// "context canceled". It reads on after the invalidate: from the drop's
// second (-from), and from the oplog's start (-since 1h reaching back
// before it), every change is applied, and a note says where the stream
// was invalidated.
func TestVerifyReadsOnAfterADrop(t *testing.T) {
	e := newOpsEnv(t, emutest.OplogMaxEntries(250))
	cfg := e.config(streamSpec{name: "orders", mode: "idempotent", extra: "    on_invalidate: restart", sink: "{stdout: {}}"})
	m := startMember(t, cfg, "m0")
	e.waitStarted(m, 2)
	e.insert(e.orders, "a", 0, 200)
	e.waitApplied(m, "orders", 200)
	e.insert(e.orders, "a", 200, 300)
	e.waitApplied(m, "orders", 300)
	e.src.AdvanceClock(2 * time.Second) // the drop's second holds nothing before it
	dropped := e.write(func(ctx context.Context) error { return e.orders.Drop(ctx) })
	e.waitApplied(m, "orders", 301) // the drop event (partition 0 hands it to the sink)
	e.insert(e.orders, "b", 0, 100)
	e.waitApplied(m, "orders", 401)
	m.stop(syscall.SIGTERM)

	invalidated := "invalidated at " + timeText(dropped)
	from := time.Unix(int64(dropped.T), 0).UTC().Format(time.RFC3339)
	code, out, errOut := ferryProc(t, "verify", "-c", cfg, "-stream", "orders", "-from", from)
	if code != 0 || !strings.Contains(out, "verify: events=101 applied=101 dead-lettered=0 pending=0 missing=0\n") ||
		!strings.Contains(out, invalidated) {
		t.Fatalf("verify -from %s (the drop's second): exit %d, want the drop and the 100 inserts after it, applied, "+
			"and a note that the stream was %s\n%s%s", from, code, invalidated, out, errOut)
	}
	code, out, errOut = ferryProc(t, "verify", "-c", cfg, "-stream", "orders")
	t.Logf("ferry verify -stream orders (-since 1h):\n%s%s", out, errOut)
	if code != 0 || !strings.Contains(out, "(from the oplog's start)") || !strings.Contains(out, invalidated) ||
		!strings.Contains(out, " pending=0 missing=0\n") {
		t.Fatalf("verify from the oplog's start: exit %d, want every change applied and a note that the stream was %s", code, invalidated)
	}
	var events, applied int
	if _, err := fmtSscanSummary(out, &events, &applied); err != nil || events != applied || events < 101 {
		t.Fatalf("verify from the oplog's start: %d events, %d applied (%v); want them equal, and at least the 101 after the drop", events, applied, err)
	}
}
