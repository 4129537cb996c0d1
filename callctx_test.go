package ferry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitDone waits for ch to close, failing the test after 5 s.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not done after 5s", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCallCtxEnds: a handler call's context ends as a
// context.WithDeadline would — when the call returns (Canceled), at its
// deadline (DeadlineExceeded) whether or not Done was asked for first,
// when its parent is cancelled — and keeps its first error.
func TestCallCtxEnds(t *testing.T) {
	far := time.Now().Add(time.Hour)
	t.Run("end", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), far)
		if c.Err() != nil {
			t.Fatalf("Err = %v before the end", c.Err())
		}
		done := c.Done()
		if isClosed(done) {
			t.Fatal("Done closed before the end")
		}
		end()
		if !isClosed(done) || !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("after end: Done closed %v, Err %v; want closed, Canceled", isClosed(done), c.Err())
		}
		end()
		if c.Err() != context.Canceled {
			t.Fatalf("a second end changed Err to %v", c.Err())
		}
	})
	t.Run("end before Done", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), far)
		end()
		if !isClosed(c.Done()) || c.Err() != context.Canceled {
			t.Fatalf("Done after end: closed %v, Err %v", isClosed(c.Done()), c.Err())
		}
	})
	t.Run("deadline passed, Done never called", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), time.Now().Add(-time.Millisecond))
		defer end()
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("Err = %v past the deadline, want DeadlineExceeded", c.Err())
		}
		if !isClosed(c.Done()) {
			t.Fatal("Done not closed past the deadline")
		}
		end()
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("end after the deadline changed Err to %v", c.Err())
		}
	})
	t.Run("deadline while waiting", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), time.Now().Add(20*time.Millisecond))
		defer end()
		waitDone(t, c.Done(), "Done at the deadline")
		if c.Err() != context.DeadlineExceeded || context.Cause(c) != context.DeadlineExceeded {
			t.Fatalf("Err %v, Cause %v; want DeadlineExceeded", c.Err(), context.Cause(c))
		}
	})
	t.Run("parent cancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c, end := newCallCtx(parent, far)
		defer end()
		done := c.Done()
		cancel()
		waitDone(t, done, "Done after the parent's cancel")
		if c.Err() != context.Canceled {
			t.Fatalf("Err = %v, want Canceled", c.Err())
		}
	})
	t.Run("parent cancelled before Done", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c, end := newCallCtx(parent, far)
		defer end()
		cancel()
		if c.Err() != context.Canceled || !isClosed(c.Done()) {
			t.Fatalf("Err %v, Done closed %v; want Canceled, closed", c.Err(), isClosed(c.Done()))
		}
	})
	// Issue 25 A.1: a handler that first asks for Done after its deadline
	// (a slow handler that then makes an HTTP call with ctx) closed the
	// channel twice and panicked.
	t.Run("Done first called after the deadline", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), time.Now().Add(-time.Millisecond))
		defer end()
		if !isClosed(c.Done()) {
			t.Fatal("Done not closed past the deadline")
		}
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
		}
		end()
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("end changed Err to %v", c.Err())
		}
	})
	t.Run("Done first called after the parent's cancel", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c, end := newCallCtx(parent, far)
		defer end()
		cancel()
		if !isClosed(c.Done()) || c.Err() != context.Canceled {
			t.Fatalf("Done closed %v, Err %v; want closed, Canceled", isClosed(c.Done()), c.Err())
		}
	})
	t.Run("AfterFunc first called after the deadline", func(t *testing.T) {
		c, end := newCallCtx(context.Background(), time.Now().Add(-time.Millisecond))
		defer end()
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		waitDone(t, ran, "AfterFunc past the deadline")
		child, cancelChild := context.WithCancel(c)
		defer cancelChild()
		waitDone(t, child.Done(), "child derived past the deadline")
	})
	t.Run("parent's earlier deadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		c, end := newCallCtx(parent, far)
		defer end()
		pd, _ := parent.Deadline()
		if d, ok := c.Deadline(); !ok || !d.Equal(pd) {
			t.Fatalf("Deadline = %v, %v; want the parent's %v", d, ok, pd)
		}
		waitDone(t, c.Done(), "Done at the parent's deadline")
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
		}
	})
}

type ctxKey struct{}

// TestCallCtxDerived: contexts derived from a call's context, and
// AfterFunc, follow it; values pass through.
func TestCallCtxDerived(t *testing.T) {
	far := time.Now().Add(time.Hour)
	parent := context.WithValue(WithTraceParent(context.Background(), "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"), ctxKey{}, "v")
	c, end := newCallCtx(parent, far)
	if c.Value(ctxKey{}) != "v" || TraceParent(c) == "" {
		t.Fatalf("values lost: %v, %q", c.Value(ctxKey{}), TraceParent(c))
	}
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(c, 2*time.Hour)
	defer cancelTimed()
	if d, _ := timed.Deadline(); !d.Equal(far) {
		t.Fatalf("a longer timeout's deadline = %v, want the call's %v", d, far)
	}
	var ran atomic.Int32
	ranCh := make(chan struct{})
	context.AfterFunc(c, func() { ran.Add(1); close(ranCh) })
	stop := context.AfterFunc(c, func() { ran.Add(100) })
	if !stop() {
		t.Fatal("stop before the end reported false")
	}
	if child.Err() != nil || timed.Err() != nil {
		t.Fatalf("derived contexts ended early: %v, %v", child.Err(), timed.Err())
	}
	end()
	waitDone(t, child.Done(), "child after the call's end")
	waitDone(t, timed.Done(), "timeout child after the call's end")
	waitDone(t, ranCh, "AfterFunc")
	if child.Err() != context.Canceled || ran.Load() != 1 {
		t.Fatalf("child Err %v, AfterFunc runs %d; want Canceled, 1 (the stopped one never)", child.Err(), ran.Load())
	}
	// Registered after the end: runs at once.
	again := make(chan struct{})
	context.AfterFunc(c, func() { close(again) })
	waitDone(t, again, "AfterFunc after the end")

	// A child of a call that reaches its deadline.
	c2, end2 := newCallCtx(context.Background(), time.Now().Add(20*time.Millisecond))
	defer end2()
	g, cancelG := context.WithCancel(c2)
	defer cancelG()
	waitDone(t, g.Done(), "child at the call's deadline")
	if g.Err() != context.DeadlineExceeded {
		t.Fatalf("child Err at the deadline = %v, want DeadlineExceeded", g.Err())
	}
}

// TestCallCtxConcurrent: Done, Err, AfterFunc and the end from several
// goroutines (run with -race).
func TestCallCtxConcurrent(t *testing.T) {
	for range 50 {
		c, end := newCallCtx(context.Background(), time.Now().Add(time.Millisecond))
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-c.Done()
				if c.Err() == nil {
					t.Error("Done closed with Err nil")
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan struct{})
			context.AfterFunc(c, func() { close(ch) })
			<-ch
		}()
		end()
		wg.Wait()
	}
}
