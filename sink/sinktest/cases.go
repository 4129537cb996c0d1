package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
)

func connect(t *testing.T, s sink.Sink) {
	t.Helper()
	if err := s.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
}

func closeSink(t *testing.T, s sink.Sink) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// checkDelivery checks one delivery against the event it claims to be.
func checkDelivery(t *testing.T, d Delivery, ev *ferry.Event) {
	t.Helper()
	if d.EventID != ev.ID() {
		t.Errorf("delivery event id = %q, want %q", d.EventID, ev.ID())
	}
	if d.IdempotencyKey != ev.ID() {
		t.Errorf("delivery idempotency key = %q, want the event id %q", d.IdempotencyKey, ev.ID())
	}
	if d.Epoch != ev.Epoch {
		t.Errorf("delivery of %s: epoch = %d, want %d", ev.ID()[:12], d.Epoch, ev.Epoch)
	}
	f, err := parseBody(d.Body)
	if err != nil {
		t.Errorf("delivery of %s: %v", ev.ID()[:12], err)
		return
	}
	if f.ID.Data != tokenData(ev) || f.OperationType != ev.OperationType {
		t.Errorf("delivery of %s: body has _id %q, op %q; want %q, %q", ev.ID()[:12], f.ID.Data, f.OperationType, tokenData(ev), ev.OperationType)
	}
}

func byID(evs []*ferry.Event) map[string]*ferry.Event {
	m := make(map[string]*ferry.Event, len(evs))
	for _, ev := range evs {
		m[ev.ID()] = ev
	}
	return m
}

// seqsByKey returns, per document key, the seq of each delivery in arrival
// order; deliveries of unknown events are errors.
func seqsByKey(t *testing.T, got []Delivery, known map[string]*ferry.Event) map[string][]int {
	t.Helper()
	out := make(map[string][]int)
	for _, d := range got {
		if _, ok := known[d.EventID]; !ok {
			t.Errorf("delivery of an event never written: %q", d.EventID)
			continue
		}
		f, err := parseBody(d.Body)
		if err != nil {
			t.Errorf("delivery %q: %v", d.EventID, err)
			continue
		}
		out[f.FullDocument.ID] = append(out[f.FullDocument.ID], f.FullDocument.Seq)
	}
	return out
}

func testDeliveryFields(t *testing.T, s sink.Sink, r Receiver) {
	connect(t, s)
	defer closeSink(t, s)
	evs := []*ferry.Event{NewEvent(1, "a", 1), NewEvent(2, "b", 7), NewEvent(3, "a", 1<<40)}
	if err := s.Write(context.Background(), evs); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := r.Received()
	if len(got) != len(evs) {
		t.Fatalf("received %d deliveries, want %d", len(got), len(evs))
	}
	// Events of different documents are independent: match deliveries to
	// events by id, each event exactly once.
	want := byID(evs)
	for _, d := range got {
		ev, ok := want[d.EventID]
		if !ok {
			t.Errorf("delivery %q: not an event of the batch, or delivered twice", d.EventID)
			continue
		}
		delete(want, d.EventID)
		checkDelivery(t, d, ev)
	}
	// An empty batch is a no-op.
	if err := s.Write(context.Background(), nil); err != nil {
		t.Errorf("Write(empty batch) = %v, want nil", err)
	}
	if n := len(r.Received()); n != len(evs) {
		t.Errorf("after an empty batch: %d deliveries, want %d", n, len(evs))
	}
}

func testNotConnected(t *testing.T, s sink.Sink, r Receiver) {
	ev := NewEvent(1, "a", 1)
	if err := s.Write(context.Background(), []*ferry.Event{ev}); !errors.Is(err, sink.ErrNotConnected) {
		t.Errorf("Write before Connect = %v, want ErrNotConnected", err)
	}
	connect(t, s)
	closeSink(t, s)
	err := s.Write(context.Background(), []*ferry.Event{ev})
	if !errors.Is(err, sink.ErrNotConnected) {
		t.Errorf("Write after Close = %v, want ErrNotConnected", err)
	}
	if err := sink.Handler(s)(context.Background(), ev); err == nil || errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler on a closed sink = %v, want a retryable error", err)
	}
	if got := r.Received(); len(got) != 0 {
		t.Errorf("a sink that was not connected delivered %d events", len(got))
	}
}

func testRestart(t *testing.T, s1 sink.Sink, r Receiver) {
	var evs []*ferry.Event
	for i := range 10 {
		evs = append(evs, NewEvent(i, fmt.Sprintf("k%d", i%3), 4))
	}
	connect(t, s1)
	if err := s1.Write(context.Background(), evs[:6]); err != nil {
		t.Fatalf("first instance: Write: %v", err)
	}
	closeSink(t, s1)
	if err := s1.Write(context.Background(), evs[6:7]); err == nil {
		t.Fatalf("Write to a closed instance succeeded: the event would be lost")
	}
	// The new instance replays from an earlier checkpoint, as a consumer
	// does after a crash between delivery and checkpoint.
	s2 := r.NewSink(t)
	connect(t, s2)
	defer closeSink(t, s2)
	if err := s2.Write(context.Background(), evs[3:]); err != nil {
		t.Fatalf("second instance: Write: %v", err)
	}
	got := r.Received()
	first := make(map[string]Delivery)
	for _, d := range got {
		if prev, dup := first[d.EventID]; dup {
			if prev.IdempotencyKey != d.IdempotencyKey || prev.Epoch != d.Epoch || !bytes.Equal(prev.Body, d.Body) {
				t.Errorf("duplicate delivery of %s differs from the first: key %q/%q epoch %d/%d", d.EventID[:12],
					prev.IdempotencyKey, d.IdempotencyKey, prev.Epoch, d.Epoch)
			}
			continue
		}
		first[d.EventID] = d
	}
	known := byID(evs)
	for _, ev := range evs {
		d, ok := first[ev.ID()]
		if !ok {
			t.Errorf("event %s lost across the restart", ev.ID()[:12])
			continue
		}
		checkDelivery(t, d, ev)
	}
	if len(got) != 13 {
		t.Errorf("received %d deliveries, want 13 (10 events, 3 replayed)", len(got))
	}
	for key, seqs := range seqsByKey(t, got, known) {
		// Order per key holds within each instance's run.
		if !sortedRuns(seqs, 2) {
			t.Errorf("key %s: arrival order %v is not two ordered runs", key, seqs)
		}
	}
}

// sortedRuns reports whether seqs splits into at most n ascending runs.
func sortedRuns(seqs []int, n int) bool {
	runs := 1
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			runs++
		}
	}
	return len(seqs) == 0 || runs <= n
}

func testPartialFailure(t *testing.T, s sink.Sink, r Receiver) {
	connect(t, s)
	defer closeSink(t, s)
	// a1 b1 c1 a2 b2 c2
	var evs []*ferry.Event
	for i := range 6 {
		evs = append(evs, NewEvent(i, string(rune('a'+i%3)), 2))
	}
	if !r.Fail(evs[1].ID(), FaultRetryable) {
		t.Fatalf("the receiver cannot inject a retryable fault: every sink must report one")
	}
	err := s.Write(context.Background(), evs)
	var be *sink.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Write with one failing event = %v, want a *sink.BatchError", err)
	}
	if len(be.Errs) != len(evs) {
		t.Fatalf("BatchError has %d entries, want %d", len(be.Errs), len(evs))
	}
	for i, e := range be.Errs {
		switch i {
		case 1:
			if e == nil || !sink.IsRetryable(e) {
				t.Errorf("failed event: error %v, want a retryable error", e)
			}
		case 4: // same key as the failed one, later: not attempted
			if e == nil || !sink.IsRetryable(e) {
				t.Errorf("later event of the failed key: error %v, want a retryable failure (not attempted)", e)
			}
		default:
			if e != nil {
				t.Errorf("event %d of another key: error %v, want delivered", i, e)
			}
		}
	}
	got := r.Received()
	delivered := map[string]bool{}
	for _, d := range got {
		delivered[d.EventID] = true
	}
	for i, ev := range evs {
		if want := i != 1 && i != 4; delivered[ev.ID()] != want {
			t.Errorf("event %d delivered = %v, want %v", i, delivered[ev.ID()], want)
		}
	}
	if err := sink.Handler(s)(context.Background(), evs[1]); err == nil || errors.Is(err, ferry.ErrPermanent) || !errors.Is(err, ferry.ErrTransient) {
		t.Errorf("Handler on a retryable failure = %v, want a retryable error marked ferry.Transient (the sink's failure)", err)
	}
	// Retrying the failed ones after the fault clears delivers them, in order.
	r.Heal()
	if err := s.Write(context.Background(), []*ferry.Event{evs[1], evs[4]}); err != nil {
		t.Fatalf("retry after Heal: %v", err)
	}
	got = r.Received()
	if len(got) < 2 {
		t.Fatalf("after the retry: %d deliveries, want the 2 retried events among them", len(got))
	}
	tail := got[len(got)-2:]
	checkDelivery(t, tail[0], evs[1])
	checkDelivery(t, tail[1], evs[4])
}

func testPermanentFailure(t *testing.T, s sink.Sink, r Receiver) {
	connect(t, s)
	defer closeSink(t, s)
	evs := []*ferry.Event{NewEvent(1, "a", 3), NewEvent(2, "b", 3)}
	if !r.Fail(evs[0].ID(), FaultPermanent) {
		t.Skip("the receiver cannot inject a permanent fault")
	}
	errs := sink.Errors(s.Write(context.Background(), evs), len(evs))
	if errs[0] == nil || sink.IsRetryable(errs[0]) {
		t.Errorf("permanently rejected event: error %v, want a permanent error", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("event of another key: error %v, want delivered", errs[1])
	}
	err := sink.Handler(s)(context.Background(), evs[0])
	if !errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler on a permanent failure = %v, want it wrapped with ferry.Permanent", err)
	}
	got := r.Received()
	if len(got) != 1 {
		t.Fatalf("received %d deliveries, want 1", len(got))
	}
	checkDelivery(t, got[0], evs[1])
}

func testPerKeyOrder(t *testing.T, s sink.Sink, r Receiver) {
	connect(t, s)
	defer closeSink(t, s)
	const writers, keysPerWriter, perKey = 4, 3, 8
	var all []*ferry.Event
	batches := make([][][]*ferry.Event, writers)
	seq := 0
	for w := range writers {
		// Interleave this writer's keys and cut into batches of 5.
		var evs []*ferry.Event
		for range perKey {
			for k := range keysPerWriter {
				evs = append(evs, NewEvent(seq, fmt.Sprintf("w%d-k%d", w, k), 1))
				seq++
			}
		}
		all = append(all, evs...)
		for len(evs) > 0 {
			n := min(5, len(evs))
			batches[w] = append(batches[w], evs[:n])
			evs = evs[n:]
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches[w] {
				if err := s.Write(context.Background(), b); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Write: %v", err)
	}
	got := r.Received()
	if len(got) != len(all) {
		t.Fatalf("received %d deliveries, want %d", len(got), len(all))
	}
	byKey := seqsByKey(t, got, byID(all))
	if len(byKey) != writers*keysPerWriter {
		t.Errorf("deliveries for %d keys, want %d", len(byKey), writers*keysPerWriter)
	}
	for key, seqs := range byKey {
		if len(seqs) != perKey || !sortedRuns(seqs, 1) {
			t.Errorf("key %s: arrival order %v, want %d events in ascending order", key, seqs, perKey)
		}
	}
}

// CheckTooLarge writes a small event and one whose raw document is padded
// with pad bytes, above what the destination accepts: the sink must report
// the big one permanent (wrapping want, the destination's own error), so
// Handler dead-letters it at once, and deliver the small one. s must be
// connected; r is its receiver.
func CheckTooLarge(t *testing.T, s sink.Sink, r Receiver, pad int, want error) {
	t.Helper()
	ctx := context.Background()
	evs := []*ferry.Event{NewEvent(1, "a", 1), NewEvent(2, "b", 1)}
	big, err := bson.Marshal(bson.D{{Key: "_id", Value: evs[1].Token}, {Key: "pad", Value: strings.Repeat("x", pad)}})
	if err != nil {
		t.Fatal(err)
	}
	evs[1].Raw = big
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	if errs[0] != nil {
		t.Errorf("small event: %v", errs[0])
	}
	if errs[1] == nil || sink.IsRetryable(errs[1]) || !errors.Is(errs[1], want) {
		t.Errorf("too large event: %v, want a permanent error wrapping %v", errs[1], want)
	}
	if err := sink.Handler(s)(ctx, evs[1]); !errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler = %v, want ferry.Permanent", err)
	}
	if got := r.Received(); len(got) != 1 || got[0].EventID != evs[0].ID() {
		t.Errorf("the destination holds %d deliveries, want only the small event", len(got))
	}
}
