package ferry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
)

// TestStopDuringBackfill stops a consumer while its backfill scan has events
// in the lanes that cannot finish: the handler blocks until its context
// ends, so the drain deadline abandons them. Run returns (the scan lets go
// of the abandoned events instead of waiting for them forever), the
// checkpoint still says needs-backfill, and the next run repeats the scan
// and completes it.
func TestStopDuringBackfill(t *testing.T) {
	e := newEnv(t)
	src := e.db.Collection("c")
	for i := range 40 {
		insert(t, src, bson.D{{Key: "_id", Value: i}})
	}
	blocked := make(chan struct{}, 64)
	stuck := func(ctx context.Context, ev *ferry.Event) error {
		if ev.Backfill {
			blocked <- struct{}{}
			<-ctx.Done() // a sink that never answers
			return ctx.Err()
		}
		return nil
	}
	r := start(t, e.client, stuck, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.Concurrency(2),
		ferry.DrainTimeout(100*time.Millisecond))...)
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("no backfill event reached the handler")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop(t) }()
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after a stop during the backfill: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after a stop during the backfill: the scan waits for abandoned events")
	}
	cps, err := e.store.List(context.Background(), "s")
	if err != nil || len(cps) != 1 || cps[0].State != checkpoint.StateNeedsBackfill {
		t.Fatalf("checkpoint after the interrupted backfill = %+v (%v), want needs-backfill", cps, err)
	}
	// The next run repeats the scan and completes it.
	applied := make(chan struct{}, 64)
	r = start(t, e.client, func(_ context.Context, ev *ferry.Event) error {
		if ev.Backfill {
			applied <- struct{}{}
		}
		return nil
	}, e.opts(ferry.StartAt(ferry.StartWithBackfill()))...)
	for i := range 40 {
		select {
		case <-applied:
		case <-time.After(20 * time.Second):
			t.Fatalf("the repeated backfill applied %d of 40 documents", i)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cps, err := e.store.List(context.Background(), "s")
		if err == nil && len(cps) == 1 && cps[0].State == checkpoint.StateRunning && cps[0].Token != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint after the repeated backfill = %+v (%v), want running with a token", cps, err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
