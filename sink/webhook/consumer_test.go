package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/sink"
)

// A real consumer reading a change stream from the emulator delivers through
// the webhook sink: a 500, a dropped connection and a 429 are retried, a 400
// is dead-lettered, every other change arrives in order per document with
// its id, epoch and a valid signature.
func TestConsumerDeliversThroughWebhook(t *testing.T) {
	client, _ := emutest.Client(t)
	ctx := context.Background()
	db := client.Database("ferry_sink_webhook_e2e")
	_ = db.Drop(ctx)
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	dlq := deadletter.NewMongo(client.Database("ferry_sink_webhook_e2e_state"), "dlq")

	// Start the stream at the server's current time, so the writes below
	// are seen however long Run takes to open it.
	raw, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	t0, i0, ok := raw.Lookup("operationTime").TimestampOK()
	if !ok {
		t.Fatalf("ping reply has no operationTime: %v", raw)
	}

	deadLettered := make(dlHook, 1)
	r := newReceiver(t)
	r.reject = func(body []byte) bool { return bytes.Contains(body, []byte(`"poison"`)) }
	r.then(status(500), drop(), status(429, "Retry-After", "0"))
	s := connected(t, r.newSink(t))

	c, err := ferry.NewConsumer(client, sink.Handler(s),
		ferry.Stream("orders"),
		ferry.WatchCollection(db.Name(), "orders"),
		ferry.Checkpoints(store),
		ferry.DeadLetters(dlq),
		ferry.Epoch(3),
		ferry.WithHooks(deadLettered),
		ferry.StartAt(ferry.StartAtTime(bson.Timestamp{T: t0, I: i0})),
		ferry.Concurrency(4),
		ferry.CommitEvery(1, 20*time.Millisecond),
		ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.Retry(5, time.Millisecond, 5*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()

	coll := db.Collection("orders")
	const keys, perKey = 4, 5
	want := 0
	for i := range perKey {
		for k := range keys {
			id := fmt.Sprintf("k%d", k)
			if i == 0 {
				_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "seq", Value: 0}})
			} else {
				_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "seq", Value: i}})
			}
			if err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "poison"}}); err != nil {
		t.Fatal(err)
	}

	deadline := time.After(20 * time.Second)
	for len(r.Received()) < want {
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("delivered %d of %d events in 20s", len(r.Received()), want)
		}
	}
	select {
	case <-deadLettered:
	case <-deadline:
		t.Fatalf("the rejected event was not dead-lettered")
	}
	entries, err := dlq.List(ctx, "orders", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Attempts != 1 || entries[0].Epoch != 3 {
		t.Errorf("dead letters = %+v, want the poison event after 1 attempt under epoch 3", entries)
	}

	got := r.Received()
	first := map[string]bool{}
	order := map[string][]int{}
	for _, d := range got {
		if d.Epoch != 3 || d.IdempotencyKey != d.EventID || len(d.EventID) != 64 {
			t.Errorf("delivery %+v lacks the event id or epoch", d)
		}
		if first[d.EventID] {
			continue // a duplicate after the dropped connection, same key
		}
		first[d.EventID] = true
		var ev struct {
			FullDocument struct {
				ID  string `bson:"_id"`
				Seq int    `bson:"seq"`
			} `bson:"fullDocument"`
		}
		if err := bson.UnmarshalExtJSON(d.Body, false, &ev); err != nil {
			t.Fatal(err)
		}
		order[ev.FullDocument.ID] = append(order[ev.FullDocument.ID], ev.FullDocument.Seq)
	}
	if len(first) != want {
		t.Errorf("%d distinct events delivered, want %d", len(first), want)
	}
	for k, seqs := range order {
		for i, s := range seqs {
			if s != i {
				t.Errorf("document %s: arrival order %v, want 0..%d", k, seqs, perKey-1)
				break
			}
		}
	}
}

// dlHook is signalled once an event was dead-lettered (the hook runs after
// the dead-letter store's Put).
type dlHook chan struct{}

func (h dlHook) OnEvent(info ferry.EventInfo) {
	if info.Result == ferry.ResultDeadLettered {
		select {
		case h <- struct{}{}:
		default:
		}
	}
}
