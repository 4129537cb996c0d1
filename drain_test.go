package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestDrainDoesNotRetryFailures: once Run's context is cancelled, an event
// whose delivery fails is not retried again but left for the next owner
// (the checkpoint stays before it), so a drain during a sink outage ends
// when the calls in flight end, not at DrainTimeout (an hour here: before,
// Run retried the failing events until then). A document's later events
// are left too, so none is applied before its earlier one.
func TestDrainDoesNotRetryFailures(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	var calls atomic.Int64
	var mu sync.Mutex
	applied := map[int32][]int32{}
	h := func(ctx context.Context, ev *ferry.Event) error {
		calls.Add(1)
		id := ev.DocumentKey.Lookup("_id").Int32()
		if id == 1 {
			return errors.New("the sink is down for this document")
		}
		mu.Lock()
		applied[id] = append(applied[id], ev.FullDocument.Lookup("v").Int32())
		mu.Unlock()
		return nil
	}
	r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.DrainTimeout(time.Hour),
		ferry.Retry(1000, time.Millisecond, 5*time.Millisecond))...)
	coll := e.db.Collection("c")
	insert(t, coll, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 0}})
	poll.Until(t, 20*time.Second, func() error {
		if n := calls.Load(); n < 5 {
			return fmt.Errorf("%d handler calls, want the failing event retried a few times", n)
		}
		return nil
	})
	// A later change of the failing document, queued behind it.
	if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	before := calls.Load()
	mu.Lock()
	defer mu.Unlock()
	if len(applied[1]) != 0 {
		t.Errorf("document 1's later change was applied (%v) while its first was left for the next owner", applied[1])
	}
	if calls.Load() != before {
		t.Errorf("handler called after Run returned")
	}
}

// TestDrainStartsNothingNew: once Run's context is cancelled, only the
// handler calls already in flight finish; the events queued behind them
// are not started but left for the next owner, so a hand-off takes as
// long as the slowest call in flight, not as long as the queue (or the
// drain timeout, an hour here). Before, the lanes went on through their
// queues until the drain timeout.
func TestDrainStartsNothingNew(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	const lanes, docs = 4, 60
	var started atomic.Int64
	h := func(ctx context.Context, ev *ferry.Event) error {
		started.Add(1)
		<-ferry.Draining(ctx) // a slow receiver, done once the drain began
		return nil
	}
	r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.DrainTimeout(time.Hour), ferry.Concurrency(lanes))...)
	for i := range docs {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: i}})
	}
	// Every lane busy with one call; the rest queued behind them.
	poll.Until(t, 20*time.Second, func() error {
		if n := started.Load(); n != lanes {
			return fmt.Errorf("%d calls in flight, want one per lane (%d)", n, lanes)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := started.Load(); n != lanes {
		t.Errorf("%d handler calls in all; want only the %d in flight at the cancel: the drain started queued events", n, lanes)
	}
}

// TestRunReturnsWhileHandlerIgnoresContext: a handler that ignores its
// context no longer holds Run: once DrainTimeout has passed and the calls
// cut off have had their grace, Run returns while the call still runs,
// logging the stream, the partition and the event it leaves. The event is
// not checkpointed: the next Run delivers it again. Before, Run waited for
// the call as long as it ran (it returned only once the handler did).
func TestRunReturnsWhileHandlerIgnoresContext(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	var logs lockedBuffer
	entered, release := make(chan string, 1), make(chan struct{})
	var returned atomic.Bool
	var calls atomic.Int64
	h := func(ctx context.Context, ev *ferry.Event) error {
		if calls.Add(1) == 1 {
			entered <- ev.ID()
			<-release // ignores ctx: the drain's cancellation does not stop it
			returned.Store(true)
		}
		return nil
	}
	c, err := ferry.NewConsumer(e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.DrainTimeout(200*time.Millisecond),
		ferry.Logger(slog.New(slog.NewTextHandler(&logs, nil))))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	id := <-entered
	stopAt := time.Now()
	cancel()
	var took time.Duration
	select {
	case err := <-done:
		took = time.Since(stopAt)
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatalf("Run did not return while the handler ignored its context (returned %v once the handler did)", <-done)
	}
	t.Logf("Run returned %v after cancel with DrainTimeout 200ms (margin %v), the handler still blocked", took, ferry.DrainMargin)
	if returned.Load() {
		t.Fatal("the handler returned before Run did: the test proves nothing")
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "ignored") {
			line = l
		}
	}
	t.Logf("log: %s", line)
	for _, want := range []string{"stream=s", "partition=0", "event=" + id[:16]} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %s", line, want)
		}
	}
	cp, err := e.store.Load(context.Background(), "s", 0)
	if err == nil && cp.Token != nil && cp.Token.Lookup("_data").StringValue() == lastToken(t, e, at, 1) {
		t.Error("the event left in its handler was checkpointed")
	}

	// The call returns later (nil: it applied the event). It was left:
	// the next Run delivers the event again.
	close(release)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- c.Run(ctx2) }()
	poll.Until(t, 20*time.Second, func() error {
		if n := calls.Load(); n < 2 {
			return fmt.Errorf("%d calls, want the left event delivered again", n)
		}
		return nil
	})
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("second Run = %v", err)
	}
}
