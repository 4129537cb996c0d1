package sink_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
)

func TestClasses(t *testing.T) {
	base := errors.New("boom")
	if sink.IsRetryable(nil) {
		t.Error("IsRetryable(nil) = true")
	}
	if !sink.IsRetryable(base) || !sink.IsRetryable(sink.Retryable(base)) {
		t.Error("unmarked and Retryable errors must be retryable")
	}
	p := sink.Permanent(base)
	if sink.IsRetryable(p) || !errors.Is(p, ferry.ErrPermanent) || !errors.Is(p, base) {
		t.Errorf("Permanent(err) = %v: retryable %v", p, sink.IsRetryable(p))
	}
	r := sink.RetryAfter(base, 3*time.Second)
	if d, ok := sink.RetryDelay(r); !ok || d != 3*time.Second || !errors.Is(r, sink.ErrRetryable) || !errors.Is(r, base) {
		t.Errorf("RetryAfter: delay %v %v, err %v", d, ok, r)
	}
	if _, ok := sink.RetryDelay(sink.Retryable(base)); ok {
		t.Error("Retryable carries no delay")
	}
	if sink.Retryable(nil) != nil || sink.Permanent(nil) != nil || sink.RetryAfter(nil, time.Second) != nil {
		t.Error("marking nil must stay nil")
	}
}

func TestBatchError(t *testing.T) {
	be := sink.NewBatchError(3)
	if be.Err() != nil {
		t.Fatal("empty BatchError.Err() != nil")
	}
	be.Set(1, errors.New("one"))
	be.Set(2, errors.New("two"))
	if be.Failed() != 2 || be.Err() == nil || !strings.Contains(be.Error(), "2 of 3 events failed; first event 1: one") {
		t.Errorf("BatchError = %q, failed %d", be.Error(), be.Failed())
	}
	errs := sink.Errors(be, 3)
	if errs[0] != nil || errs[1] == nil || errs[2] == nil {
		t.Errorf("Errors(BatchError) = %v", errs)
	}
	whole := errors.New("down")
	for _, e := range sink.Errors(whole, 2) {
		if e != whole {
			t.Errorf("Errors(plain) = %v, want the error for every event", e)
		}
	}
	if errs := sink.Errors(nil, 2); errs[0] != nil || errs[1] != nil {
		t.Error("Errors(nil) must be all nil")
	}
}

func TestEachInOrder(t *testing.T) {
	evs := []*ferry.Event{sinktest.NewEvent(0, "a", 1), sinktest.NewEvent(1, "b", 1), sinktest.NewEvent(2, "a", 1), sinktest.NewEvent(3, "b", 1)}
	var tried []int
	fail := errors.New("no")
	err := sink.EachInOrder(context.Background(), evs, func(_ context.Context, ev *ferry.Event) error {
		i := int(ev.ClusterTime.T - 1730000000)
		tried = append(tried, i)
		if i == 0 {
			return fail
		}
		return nil
	}, nil)
	errs := sink.Errors(err, 4)
	if !errors.Is(errs[0], fail) || errs[1] != nil || !errors.Is(errs[2], sink.ErrSkipped) || errs[3] != nil {
		t.Errorf("errs = %v", errs)
	}
	if len(tried) != 3 || tried[0] != 0 || tried[1] != 1 || tried[2] != 3 {
		t.Errorf("tried %v, want [0 1 3]", tried)
	}
	// stop: the rest is not attempted.
	tried = nil
	err = sink.EachInOrder(context.Background(), evs, func(_ context.Context, ev *ferry.Event) error {
		tried = append(tried, 0)
		return fail
	}, func(error) bool { return true })
	for i, e := range sink.Errors(err, 4) {
		if !errors.Is(e, fail) {
			t.Errorf("event %d: %v, want the stopping error", i, e)
		}
		// The ones after it were not attempted: ferry does not count them.
		if notAttempted := errors.Is(e, sink.ErrNotAttempted); notAttempted != (i > 0) {
			t.Errorf("event %d: %v matches ErrNotAttempted = %v, want %v", i, e, notAttempted, i > 0)
		}
	}
	// A stopping error's class and retry delay hold for the events after it.
	err = sink.EachInOrder(context.Background(), evs, func(context.Context, *ferry.Event) error {
		return sink.RetryAfter(fail, time.Second)
	}, func(error) bool { return true })
	if d, ok := sink.RetryDelay(sink.Errors(err, 4)[3]); !ok || d != time.Second || !sink.IsRetryable(sink.Errors(err, 4)[3]) {
		t.Errorf("a stopped event's error %v: retry delay %v %v, want 1s", sink.Errors(err, 4)[3], d, ok)
	}
	if len(tried) != 1 {
		t.Errorf("%d attempts after a stopping error, want 1", len(tried))
	}
	// A cancelled context attempts nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = sink.EachInOrder(ctx, evs, func(context.Context, *ferry.Event) error { t.Error("attempted"); return nil }, nil)
	for _, e := range sink.Errors(err, 4) {
		if !errors.Is(e, context.Canceled) || !sink.IsRetryable(e) || !errors.Is(e, sink.ErrNotAttempted) {
			t.Errorf("cancelled: %v", e)
		}
	}
}

// fakeSink fails every write with err.
type fakeSink struct{ err error }

func (f *fakeSink) Connect(context.Context) error { return nil }
func (f *fakeSink) Close(context.Context) error   { return nil }
func (f *fakeSink) Write(_ context.Context, b []*ferry.Event) error {
	be := sink.NewBatchError(len(b))
	for i := range b {
		be.Set(i, f.err)
	}
	return be.Err()
}

func TestHandler(t *testing.T) {
	ev := sinktest.NewEvent(1, "a", 1)
	if err := sink.Handler(&fakeSink{})(context.Background(), ev); err != nil {
		t.Errorf("delivered: %v", err)
	}
	base := errors.New("rejected")
	if err := sink.Handler(&fakeSink{sink.Permanent(base)})(context.Background(), ev); !errors.Is(err, ferry.ErrPermanent) || !errors.Is(err, base) {
		t.Errorf("permanent: %v", err)
	}
	if err := sink.Handler(&fakeSink{base})(context.Background(), ev); !errors.Is(err, base) || !errors.Is(err, ferry.ErrTransient) ||
		errors.Is(err, ferry.ErrPermanent) || err.Error() != base.Error() {
		t.Errorf("retryable: %v, want the error marked ferry.Transient (the sink's failure), its text unchanged", err)
	}
	start := time.Now()
	err := sink.Handler(&fakeSink{sink.RetryAfter(base, 30*time.Millisecond)})(context.Background(), ev)
	if !errors.Is(err, base) || errors.Is(err, ferry.ErrPermanent) || time.Since(start) < 30*time.Millisecond {
		t.Errorf("retry-after: %v after %v, want the error after at least 30ms", err, time.Since(start))
	}
}

// scriptSink answers each Write with write(batch).
type scriptSink struct {
	write func([]*ferry.Event) error
	calls [][]*ferry.Event
}

func (f *scriptSink) Connect(context.Context) error { return nil }
func (f *scriptSink) Close(context.Context) error   { return nil }
func (f *scriptSink) Write(_ context.Context, b []*ferry.Event) error {
	f.calls = append(f.calls, b)
	return f.write(b)
}

// TestBatchHandler: the whole batch goes to one Write; per-event failures
// come back per event, permanent ones marked ferry.Permanent, retryable ones
// ferry.Transient, after the longest Retry-After of the batch; a failure of the
// whole Write comes back whole.
func TestBatchHandler(t *testing.T) {
	evs := []*ferry.Event{sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1), sinktest.NewEvent(3, "c", 1), sinktest.NewEvent(4, "d", 1)}
	rejected, busy := errors.New("rejected"), errors.New("busy")
	s := &scriptSink{write: func(b []*ferry.Event) error {
		be := sink.NewBatchError(len(b))
		be.Set(1, sink.Permanent(rejected))
		be.Set(2, sink.RetryAfter(busy, 20*time.Millisecond))
		be.Set(3, sink.RetryAfter(busy, 60*time.Millisecond))
		return be.Err()
	}}
	start := time.Now()
	err := sink.BatchHandler(s)(context.Background(), evs)
	took := time.Since(start)
	if len(s.calls) != 1 || len(s.calls[0]) != 4 {
		t.Fatalf("Write calls %d, want one with the 4 events", len(s.calls))
	}
	var be *ferry.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 4 {
		t.Fatalf("BatchHandler = %v, want a *ferry.BatchError of 4", err)
	}
	if be.Errs[0] != nil || !errors.Is(be.Errs[1], ferry.ErrPermanent) || !errors.Is(be.Errs[1], rejected) || errors.Is(be.Errs[1], ferry.ErrTransient) ||
		!errors.Is(be.Errs[2], busy) || errors.Is(be.Errs[2], ferry.ErrPermanent) || !errors.Is(be.Errs[2], ferry.ErrTransient) || !errors.Is(be.Errs[3], busy) {
		t.Fatalf("per-event errors %v", be.Errs)
	}
	if took < 60*time.Millisecond {
		t.Fatalf("returned after %v, want after the longest Retry-After (60ms)", took)
	}
	// Every event delivered.
	s.write = func([]*ferry.Event) error { return nil }
	if err := sink.BatchHandler(s)(context.Background(), evs); err != nil {
		t.Fatalf("delivered batch: %v", err)
	}
	// A failure of the whole Write: returned whole (ferry retries each
	// event alone), marked ferry.Transient or ferry.Permanent.
	s.write = func([]*ferry.Event) error { return sink.ErrNotConnected }
	if err := sink.BatchHandler(s)(context.Background(), evs); errors.As(err, &be) || !errors.Is(err, sink.ErrNotConnected) || !errors.Is(err, ferry.ErrTransient) {
		t.Fatalf("whole-batch failure = %v, want sink.ErrNotConnected whole, marked ferry.Transient", err)
	}
	s.write = func([]*ferry.Event) error { return sink.Permanent(rejected) }
	if err := sink.BatchHandler(s)(context.Background(), evs); errors.As(err, &be) || !errors.Is(err, ferry.ErrPermanent) {
		t.Fatalf("whole-batch permanent failure = %v, want it whole and permanent", err)
	}
	// A retry delay never outlives the context.
	s.write = func([]*ferry.Event) error { return sink.RetryAfter(busy, time.Hour) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sink.BatchHandler(s)(ctx, evs); !errors.Is(err, busy) {
		t.Fatalf("retry-after an hour with a 20ms context = %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("returned before the context ended")
	}
}

// TestSkippedIsNotAttempted: ferry retries an event the sink skipped
// without counting the attempt, because ErrSkipped matches
// ferry.ErrNotAttempted.
func TestSkippedIsNotAttempted(t *testing.T) {
	if !errors.Is(sink.ErrSkipped, ferry.ErrNotAttempted) || !errors.Is(sink.Retryable(sink.ErrSkipped), sink.ErrNotAttempted) {
		t.Fatal("ErrSkipped does not match ErrNotAttempted")
	}
	if errors.Is(ferry.ErrNotAttempted, sink.ErrSkipped) {
		t.Fatal("every not-attempted failure matches ErrSkipped")
	}
}
