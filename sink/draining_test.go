package sink_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
)

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
	client, _ := emutest.Client(t)
	ctx := context.Background()
	db := client.Database("ferry_sink_draining")
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	raw, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	t0, i0, _ := raw.Lookup("operationTime").TimestampOK()
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
