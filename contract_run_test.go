package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestSecondConcurrentRunRefused: a second Run of one Consumer while the
// first runs fails at once with ErrAlreadyRunning (before, it was accepted
// and every event was delivered twice, both Runs writing the same
// checkpoint); the first goes on delivering each event once, and a Run
// after the first returned works.
func TestSecondConcurrentRunRefused(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int64
	h := func(ctx context.Context, ev *ferry.Event) error { calls.Add(1); return nil }
	c, err := ferry.NewConsumer(e.client, h, e.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	done1 := make(chan error, 1)
	go func() { done1 <- c.Run(ctx1) }()
	waitStarted(t, e.store)

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := make(chan error, 1)
	go func() { done2 <- c.Run(ctx2) }()
	select {
	case err := <-done2:
		if !errors.Is(err, ferry.ErrAlreadyRunning) {
			t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
		}
	case <-time.After(20 * time.Second):
		cancel2()
		t.Fatalf("second concurrent Run did not return: it was accepted (returned %v once cancelled)", <-done2)
	}
	if !c.Status().Running {
		t.Fatal("the refused Run changed the status of the running one: Running is false")
	}

	coll := e.db.Collection("c")
	for i := range 10 {
		insert(t, coll, bson.D{{Key: "_id", Value: i}})
	}
	poll.Until(t, 20*time.Second, func() error {
		if n := calls.Load(); n < 10 {
			return fmt.Errorf("%d handler calls, want 10", n)
		}
		return nil
	})
	cancel1()
	if err := <-done1; err != nil {
		t.Fatalf("first Run = %v", err)
	}
	if n := calls.Load(); n != 10 {
		t.Fatalf("%d handler calls for 10 inserts, want 10", n)
	}

	// A Run after the first returned works: it resumes from the checkpoint.
	ctx3, cancel3 := context.WithCancel(context.Background())
	done3 := make(chan error, 1)
	go func() { done3 <- c.Run(ctx3) }()
	insert(t, coll, bson.D{{Key: "_id", Value: 10}})
	poll.Until(t, 20*time.Second, func() error {
		if n := calls.Load(); n < 11 {
			return fmt.Errorf("%d handler calls, want 11 (the insert after the restart)", n)
		}
		return nil
	})
	cancel3()
	if err := <-done3; err != nil {
		t.Fatalf("Run after the first returned = %v", err)
	}
	if n := calls.Load(); n != 11 {
		t.Fatalf("%d handler calls, want 11", n)
	}
}
