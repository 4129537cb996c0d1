package sink_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
)

// drainEnv is a drain test's emulator client, source database, checkpoint
// store and the server's cluster time now (where the consumer starts).
func drainEnv(t *testing.T, name string) (*mongo.Client, *mongo.Database, *boltstore.Store, uint32, uint32) {
	t.Helper()
	client, _ := emutest.Client(t)
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	raw, err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	t0, i0, _ := raw.Lookup("operationTime").TimestampOK()
	return client, client.Database(name), store, t0, i0
}

// laterSink fails every event asking to be retried an hour later (a
// receiver answering 503 with a long Retry-After, or its library closing).
type laterSink struct{ writes atomic.Int64 }

func (s *laterSink) Connect(context.Context) error { return nil }
func (s *laterSink) Close(context.Context) error   { return nil }
func (s *laterSink) Write(ctx context.Context, batch []*ferry.Event) error {
	s.writes.Add(1)
	return sink.RetryAfter(errors.New("receiver answered 503: come back later"), time.Hour)
}

// TestRetryAfterWaitEndsWhenDraining: BatchHandler waits out a sink's
// Retry-After inside the call, but not once the consumer drains: the event
// is not retried then, so Run returns as the call ends, not after the wait
// (5 minutes here, MaxRetryWait; the drain and handler timeouts are an hour). Before, a
// SIGTERM hand-off waited out a closing receiver's Retry-After.
func TestRetryAfterWaitEndsWhenDraining(t *testing.T) {
	ctx := context.Background()
	client, db, store, t0, i0 := drainEnv(t, "ferry_sink_draining")
	s := &laterSink{}
	c, err := ferry.NewBatchConsumer(client, sink.BatchHandler(s),
		ferry.Stream("s"), ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store),
		ferry.StartAt(ferry.StartAtTime(bson.Timestamp{T: t0, I: i0})), ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.DrainTimeout(time.Hour), ferry.HandlerTimeout(time.Hour), ferry.OnPoison(ferry.PoisonStall))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() error {
		if s.writes.Load() == 0 {
			return errors.New("the sink was not called yet")
		}
		return nil
	})
	cancel() // the handler is waiting out the Retry-After
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the cancel: the drain waited out the sink's Retry-After")
	}
	if n := s.writes.Load(); n != 1 {
		t.Errorf("the sink was written %d times; want once (no retry while draining)", n)
	}
}

// orderedSink posts a batch one event after the other (EachInOrder), each
// post lasting until its consumer drains.
type orderedSink struct{ posts atomic.Int64 }

func (s *orderedSink) Connect(context.Context) error { return nil }
func (s *orderedSink) Close(context.Context) error   { return nil }
func (s *orderedSink) Write(ctx context.Context, batch []*ferry.Event) error {
	return sink.EachInOrder(ctx, batch, func(ctx context.Context, ev *ferry.Event) error {
		s.posts.Add(1)
		<-ferry.Draining(ctx) // a slow receiver, done once the drain began
		return nil
	}, nil)
}

// TestDrainStopsABatchAfterItsPostInFlight: a batch posted in order stops
// when its consumer starts draining: the post in flight finishes, the rest
// of the batch is left (ErrDraining, not attempted) for the next owner, so
// the drain waits for one request, not for the batch's. Before, the lane
// posted the whole batch (50 events here) until the drain timeout.
func TestDrainStopsABatchAfterItsPostInFlight(t *testing.T) {
	ctx := context.Background()
	client, db, store, t0, i0 := drainEnv(t, "ferry_sink_draining_batch")
	// One document's 50 changes: one lane, one batch once the first call ends.
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := db.Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: i}}}}); err != nil {
			t.Fatal(err)
		}
	}
	s := &orderedSink{}
	c, err := ferry.NewBatchConsumer(client, sink.BatchHandler(s),
		ferry.Stream("s"), ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store),
		ferry.StartAt(ferry.StartAtTime(bson.Timestamp{T: t0, I: i0})), ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.BatchSize(100), ferry.DrainTimeout(time.Hour), ferry.HandlerTimeout(time.Hour), ferry.OnPoison(ferry.PoisonStall))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	poll.Until(t, 20*time.Second, func() error {
		if s.posts.Load() == 0 {
			return errors.New("nothing posted yet")
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the cancel")
	}
	if n := s.posts.Load(); n != 1 {
		t.Errorf("%d posts; want only the one in flight at the cancel: the rest of its batch was posted during the drain", n)
	}
}
