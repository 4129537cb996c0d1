package ferry

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of one handler call: its parent's values and
// cancellation, plus a deadline, and cancelled when the call returns. It
// behaves as context.WithDeadline(parent, deadline) does but costs less
// for a call that never waits on it (a handler that does its work
// without blocking, as most do for most events): the timer that ends it at
// the deadline and the link to its parent's cancellation are set up only
// when Done is first called, directly or by deriving a context from it
// (AfterFunc); until then Err reads the clock and the parent.
//
// Value hides the parent's cancellation from the context package (as
// context.WithoutCancel does), so that context.Cause reports the call's
// own end and a context derived from it follows it through AfterFunc.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu         sync.Mutex
	ch         chan struct{} // nil until Done is called
	err        error
	timer      *time.Timer
	stopParent func() bool
	afters     []*callAfter
	values     context.Context // context.WithoutCancel(parent), made on first use
}

// callAfter is a function registered with callCtx.AfterFunc.
type callAfter struct{ f func() }

// newCallCtx returns a context ended at deadline, when parent ends, or by
// its end function, whichever comes first.
func newCallCtx(parent context.Context, deadline time.Time) (*callCtx, func()) {
	c := openCallCtx(parent, deadline)
	return c, c.stop
}

// openCallCtx is newCallCtx without a function value to allocate: the
// context's stop method ends it.
func openCallCtx(parent context.Context, deadline time.Time) *callCtx {
	return &callCtx{parent: parent, deadline: deadline}
}

// stop ends the context as the call's return does (context.Canceled).
func (c *callCtx) stop() { c.end(context.Canceled) }

func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callCtx) Value(key any) any {
	c.mu.Lock()
	if c.values == nil {
		c.values = context.WithoutCancel(c.parent)
	}
	v := c.values
	c.mu.Unlock()
	return v.Value(key)
}

// Err is nil until the call's context ends: context.Canceled when the
// call returned or the parent was cancelled, context.DeadlineExceeded once
// the deadline passed (or the parent's error, if it ended first).
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkLocked(time.Time{})
	return c.err
}

// finish ends the context as the call's return does, at now (the
// caller's time.Now), and returns what Err returned just before:
// DeadlineExceeded if the deadline had passed by now, the parent's error
// if it had ended, or nil.
func (c *callCtx) finish(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkLocked(now)
	err := c.err
	c.endLocked(context.Canceled)
	return err
}

// checkLocked ends the context if its parent ended or its deadline
// passed at now (zero: read the clock). Callers hold c.mu.
func (c *callCtx) checkLocked(now time.Time) {
	if c.err != nil {
		return
	}
	if err := c.parent.Err(); err != nil {
		c.endLocked(err)
		return
	}
	if now.IsZero() {
		now = time.Now()
	}
	if !now.Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
	}
}

// Done returns a channel closed when the context ends. The first call arms
// the deadline's timer and the link to the parent.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		return c.ch
	}
	// Check before the channel exists: ending the context closes c.ch
	// when there is one, so a check after making it would close it, and
	// this method would close it again.
	c.checkLocked(time.Time{})
	c.ch = make(chan struct{})
	if c.err != nil {
		close(c.ch)
		return c.ch
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	c.stopParent = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
	return c.ch
}

// AfterFunc arranges to call f in its own goroutine once the context
// ends, as context.AfterFunc does; the context package uses it to cancel
// the contexts derived from this one. stop unregisters f, reporting
// whether it did so before f was started.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.Done() // arm
	a := &callAfter{f: f}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.afters = append(c.afters, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.afters {
			if x == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// end ends the context with err, unless it has ended.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(err)
}

func (c *callCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.ch != nil {
		close(c.ch)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopParent != nil {
		c.stopParent()
	}
	for _, a := range c.afters {
		go a.f()
	}
	c.afters = nil
}

func (c *callCtx) String() string { return "ferry handler call context" }
