package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestOutageMidBatchDeadLettersNothing: a sink that goes down while lanes
// are posting their batches, one event after the other (a webhook
// receiver being redeployed): each lane's call reports the events it
// posted before the outage applied and the next one failed. Those
// successes came before the failure, so they are no evidence that the sink
// accepts events: the outage must not count the failures towards
// MaxAttempts, and nothing may be dead-lettered, however many lanes report
// such a call. Before, each such call counted its failure and added its
// successes as evidence against every other lane's failures: events were
// dead-lettered within a second of the outage (seen in a Cloud Run
// redeploy, cmd/ferry/lasthop).
func TestOutageMidBatchDeadLettersNothing(t *testing.T) {
	e := newEnv(t)
	const n, downAfter = 400, 60
	var mu sync.Mutex
	applied := map[int32]int{}
	down, upAgain := false, false
	failures := 0
	sinkErr := ferry.Transient(errors.New("dial tcp: connection refused")) // the receiver's, as package sink marks it
	h := func(ctx context.Context, batch []*ferry.Event) error {
		be := ferry.NewBatchError(len(batch))
		for i, ev := range batch {
			mu.Lock()
			if len(applied) >= downAfter && !upAgain {
				down = true
			}
			if down {
				failures++
				if failures >= 200 {
					down, upAgain = false, true // the receiver is back
				}
				mu.Unlock()
				be.Set(i, sinkErr)
				for j := i + 1; j < len(batch); j++ {
					be.Set(j, fmt.Errorf("%w: an earlier event of the batch failed", ferry.ErrNotAttempted))
				}
				return be.Err()
			}
			applied[ev.DocumentKey.Lookup("_id").Int32()]++
			mu.Unlock()
			// A request takes a moment, so the lanes' calls overlap.
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	at := insertNumbered(t, e.client, e.db.Collection("c"), n)
	_, r := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(8), ferry.BatchSize(20),
		ferry.Retry(2, time.Millisecond, 2*time.Millisecond))...)
	poll.Until(t, 60*time.Second, func() error {
		if entries, _ := e.dlq.List(context.Background(), "s", 1); len(entries) > 0 {
			t.Fatalf("an event was dead-lettered during an outage (%s after %d attempts): an outage is not poison", entries[0].Error, entries[0].Attempts)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(applied) < n {
			return fmt.Errorf("%d of %d documents applied (%d failed attempts, down %v)", len(applied), n, failures, down)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	entries, err := e.dlq.List(context.Background(), "s", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%d events dead-lettered during an outage (first: %s after %d attempts): an outage is not poison", len(entries), entries[0].Error, entries[0].Attempts)
	}
}
