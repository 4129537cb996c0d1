package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestHandlerBugInQuietPartitionDeadLettered: a Go handler that fails on
// one document, the only event of a quiet partition, with an error of its
// own (a bug, a value it cannot use) or a panic, has the event
// dead-lettered after MaxAttempts attempts, and the consumer never reports
// waiting-for-sink: a Go handler is not a sink. Before, with nothing else
// succeeding around it, the failure looked like a sink outage: no attempt
// counted and the event was retried forever, never dead-lettered.
func TestHandlerBugInQuietPartitionDeadLettered(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			at := clusterTime(t, e.client)
			var calls atomic.Int64
			h := func(ctx context.Context, ev *ferry.Event) error {
				calls.Add(1)
				if how == "panic" {
					var m map[string]int
					m["amount"]++ // a bug: assignment to a nil map
				}
				return errors.New("decode order: field amount: not a number")
			}
			states := &stateLog{}
			// Retry's defaults but for the backoff (1-5 ms instead of
			// 100 ms-30 s): MaxAttempts 3.
			r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.WithHooks(states))...)
			insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}, {Key: "amount", Value: "ten"}})
			poll.Until(t, 20*time.Second, func() error {
				if dl := deadLetters(t, e); len(dl) != 1 {
					return fmt.Errorf("%d dead letters after %d calls, want the event dead-lettered (state %q)", len(dl), calls.Load(), states.last())
				}
				return nil
			})
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v", err)
			}
			entries, err := e.dlq.List(context.Background(), "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			if en := entries[0]; en.Attempts != 3 || calls.Load() != 3 {
				t.Errorf("dead-lettered after %d attempts (%d calls), want 3 (MaxAttempts)", en.Attempts, calls.Load())
			}
			want := map[string]string{"error": "field amount", "panic": "handler panicked"}[how]
			if !strings.Contains(entries[0].Error, want) {
				t.Errorf("dead letter's error %q, want it to say %q", entries[0].Error, want)
			}
			if states.has(ferry.StateWaitingForSink) {
				t.Error("the consumer reported waiting-for-sink for a handler's own failure")
			}
		})
	}
}

// TestTransientHandlerFailureWaits: a Go handler that marks its failure
// Transient (its database or service is unavailable) gets the sink
// treatment: the one event of a quiet partition is not dead-lettered
// however often it fails, the consumer waits for the sink, and the event
// is applied once the handler succeeds.
func TestTransientHandlerFailureWaits(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	var down atomic.Bool
	down.Store(true)
	var calls, applied atomic.Int64
	h := func(ctx context.Context, ev *ferry.Event) error {
		calls.Add(1)
		if down.Load() {
			return ferry.Transient(errors.New("orders service: 503 Service Unavailable"))
		}
		applied.Add(1)
		return nil
	}
	states := &stateLog{}
	r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.WithHooks(states))...)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	poll.Until(t, 20*time.Second, func() error {
		if n := calls.Load(); n < 20 || states.last() != ferry.StateWaitingForSink {
			return fmt.Errorf("%d calls, state %q; want > 20 calls and waiting-for-sink", n, states.last())
		}
		return nil
	})
	if dl := deadLetters(t, e); len(dl) != 0 {
		t.Fatalf("dead letters %v during the outage, want none", dl)
	}
	down.Store(false)
	poll.Until(t, 20*time.Second, func() error {
		if applied.Load() != 1 || states.last() != ferry.StateRunning {
			return fmt.Errorf("applied %d, state %q; want 1 and running", applied.Load(), states.last())
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}
