package cli

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestDLQReplayThenVerify, as the operator met it: a receiver rejects one
// change (422: dead-lettered at once) of two streams over shop.orders,
// "orders" (idempotent) and "audit" (at-least-once). Once the receiver is
// fixed, ferry dlq replay delivers it, and ferry verify reported it
// missing for ever: the replay wrote no ledger entry. It records the
// replayed event in the ledger as the idempotent delivery does: verify
// finds every change of orders applied. At-least-once keeps no ledger:
// nothing is recorded for audit, whose changes verify counts unverifiable,
// the replayed one too, none missing. A dead letter the ledger holds
// already (a replay stopped before it removed the entry) is not delivered
// again.
func TestDLQReplayThenVerify(t *testing.T) {
	e := newOpsEnv(t)
	rcv := newReceiver(t)
	rcv.setStatus(func(doc string) int {
		if doc == "o-3" {
			return 422
		}
		return 200
	})
	hook := fmt.Sprintf("{webhook: {url: %q, secret: %q}}", rcv.url(), procSecret)
	cfg := e.config(streamSpec{name: "orders", mode: "idempotent", sink: hook}, streamSpec{name: "audit", mode: "at-least-once", sink: hook})
	m := startMember(t, cfg, "m0")
	e.waitStarted(m, 4)
	e.insert(e.orders, "o", 0, 10)
	ctx := context.Background()
	dlq := deadletter.NewMongo(e.stateDB, "dlq")
	poll.Until(t, 60*time.Second, func() error {
		m.running()
		n, err := e.stateDB.Collection("dlq").CountDocuments(ctx, bson.D{})
		if err != nil || n != 2 {
			return fmt.Errorf("%d dead letters, want 2 (o-3 of both streams) (%v)", n, err)
		}
		return nil
	})
	e.waitApplied(m, "orders", 9)
	m.stop(syscall.SIGTERM) // drains: both streams' checkpoints past every change

	code, out, errOut := ferryProc(t, "verify", "-c", cfg, "-stream", "orders")
	if code != 0 || !strings.Contains(out, "verify: events=10 applied=9 dead-lettered=1 pending=0 missing=0\n") {
		t.Fatalf("verify before the replay: exit %d\n%s%s", code, out, errOut)
	}
	entries, err := dlq.List(ctx, "orders", 0)
	if err != nil || len(entries) != 1 {
		t.Fatalf("orders' dead letters: %d, %v; want 1", len(entries), err)
	}
	deadLetter := entries[0]

	rcv.setStatus(nil)
	code, out, errOut = ferryProc(t, "dlq", "replay", "-c", cfg)
	if code != 0 || !strings.Contains(errOut, "stream orders: replayed 1, still failing 0") ||
		!strings.Contains(errOut, "stream audit: replayed 1, still failing 0") {
		t.Fatalf("dlq replay: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = ferryProc(t, "verify", "-c", cfg, "-stream", "orders")
	t.Logf("ferry verify -stream orders after the replay:\n%s%s", out, errOut)
	if code != 0 || !strings.Contains(out, "verify: events=10 applied=10 dead-lettered=0 pending=0 missing=0\n") {
		t.Fatalf("verify after the replay: exit %d, want every change applied", code)
	}
	code, out, errOut = ferryProc(t, "verify", "-c", cfg, "-stream", "audit")
	if code != 0 || !strings.Contains(out, "verify: events=10 applied=0 dead-lettered=0 pending=0 missing=0 unverifiable=10\n") {
		t.Fatalf("verify of the at-least-once stream after the replay: exit %d, want 10 unverifiable, none missing\n%s%s", code, out, errOut)
	}
	if n, err := e.stateDB.Collection("ledger").CountDocuments(ctx, bson.D{{Key: "stream", Value: "audit"}}); err != nil || n != 0 {
		t.Fatalf("the at-least-once stream has %d ledger entries (%v), want none", n, err)
	}

	// The entry back, as if a replay had stopped after recording the
	// event and before removing the entry: it is removed, not delivered.
	rcv.mu.Lock()
	before := rcv.tries
	rcv.mu.Unlock()
	if err := dlq.Put(ctx, deadLetter); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = ferryProc(t, "dlq", "replay", "-c", cfg, "-stream", "orders")
	if code != 0 || !strings.Contains(errOut, "stream orders: replayed 1, still failing 0") || !strings.Contains(errOut, "the ledger holds it already") {
		t.Fatalf("dlq replay of an entry the ledger holds: exit %d\n%s%s", code, out, errOut)
	}
	if rcv.attempts() != before {
		t.Fatalf("the receiver got %d more requests, want none: the ledger holds the event", rcv.attempts()-before)
	}
	if left, err := dlq.List(ctx, "orders", 0); err != nil || len(left) != 0 {
		t.Fatalf("%d dead letters left (%v), want none", len(left), err)
	}
}

// TestDLQReplayTransactional: in transactional delivery a replay records
// the ledger entry and makes the sink's writes (the mongodb projection) in
// one transaction: the entry is there with the document, and a dead letter
// the ledger holds already makes no effect (the projection document,
// edited since, stays as it is).
func TestDLQReplayTransactional(t *testing.T) {
	e := newProjectionEnv(t, "", "")
	ctx := context.Background()
	state := e.client.Database("ferry_state")
	entry := changeEntry(t, "orders", changeEvent(t, e.client, "shop", "orders", bson.D{{Key: "_id", Value: "o-1"}, {Key: "v", Value: 1}}), "503", false)
	entry.Partition, entry.Epoch = 1, 3
	putEntries(t, state, entry)
	code, out, errOut := runCLI("dlq", "replay", "-c", e.cfgPath)
	if code != 0 || !strings.Contains(errOut, "stream orders: replayed 1, still failing 0") {
		t.Fatalf("dlq replay: exit %d\n%s%s", code, out, errOut)
	}
	var got struct {
		Partition int64 `bson:"partition"`
		Epoch     int64 `bson:"epoch"`
	}
	if err := state.Collection("ledger").FindOne(ctx, bson.D{{Key: "_id", Value: "orders/" + entry.EventID}}).Decode(&got); err != nil ||
		got.Partition != 1 || got.Epoch != 3 {
		t.Fatalf("the replayed event's ledger entry: %+v, %v; want partition 1, epoch 3", got, err)
	}
	if n, err := e.proj.CountDocuments(ctx, bson.D{{Key: "_id", Value: "o-1"}, {Key: "v", Value: 1}}); err != nil || n != 1 {
		t.Fatalf("the projection holds %d documents o-1 (%v), want 1", n, err)
	}
	if _, err := e.proj.UpdateOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: -1}}}}); err != nil {
		t.Fatal(err)
	}
	putEntries(t, state, entry)
	code, out, errOut = runCLI("dlq", "replay", "-c", e.cfgPath)
	if code != 0 || !strings.Contains(errOut, "the ledger holds it already") {
		t.Fatalf("dlq replay of an entry the ledger holds: exit %d\n%s%s", code, out, errOut)
	}
	if n, err := e.proj.CountDocuments(ctx, bson.D{{Key: "_id", Value: "o-1"}, {Key: "v", Value: -1}}); err != nil || n != 1 {
		t.Fatalf("the replay of an applied event wrote the projection again (%v)", err)
	}
}
