package ferry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestLateNilAppliedOnce: a handler that finishes its durable effect after
// HandlerTimeout and returns nil has applied the event: it is called once,
// its effect happens once, the checkpoint moves past the event and nothing
// is dead-lettered. Before, the late nil counted as a failure: the effect
// was repeated on every retry and, the only event of a quiet stream
// looking like an outage, the event was never finished.
func TestLateNilAppliedOnce(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "Handler", true: "BatchHandler"}[batch], func(t *testing.T) {
			e := newEnv(t)
			at := clusterTime(t, e.client)
			var calls, effects atomic.Int64
			slow := func(ctx context.Context) error {
				calls.Add(1)
				<-ctx.Done() // the deadline passes while the effect is under way
				effects.Add(1)
				return nil // the effect is durable: success, late
			}
			opts := e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.HandlerTimeout(200*time.Millisecond))
			var c *ferry.Consumer
			var err error
			if batch {
				c, err = ferry.NewBatchConsumer(e.client, func(ctx context.Context, _ []*ferry.Event) error { return slow(ctx) }, opts...)
			} else {
				c, err = ferry.NewConsumer(e.client, func(ctx context.Context, _ *ferry.Event) error { return slow(ctx) }, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
			token := lastToken(t, e, at, 1)
			poll.Until(t, 20*time.Second, func() error {
				cp, err := e.store.Load(context.Background(), "s", 0)
				if err != nil || cp.Token == nil || cp.Token.Lookup("_data").StringValue() != token {
					return fmt.Errorf("the checkpoint is not past the event (%d calls, %d effects)", calls.Load(), effects.Load())
				}
				return nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run = %v", err)
			}
			done <- nil
			if n, m := calls.Load(), effects.Load(); n != 1 || m != 1 {
				t.Errorf("%d calls, %d effects for one event whose handler returned nil after its deadline; want 1 and 1", n, m)
			}
			if dl := deadLetters(t, e); len(dl) != 0 {
				t.Errorf("dead letters %v, want none", dl)
			}
		})
	}
}
