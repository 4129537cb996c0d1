package ferry

import (
	"sync"
	"time"
)

// inFlight is one lane's handler call in progress, so that a drain that
// runs out can leave a call that ignores its cancelled context and name
// it. The lane holds mu while it starts a call and while it settles the
// call's outcome, never during the call. A drain that leaves the lane
// sets leftBehind under mu: from then on the lane neither starts a call
// nor settles one (it abandons its events), and a settle that was under
// way has ended.
type inFlight struct {
	mu         sync.Mutex
	leftBehind bool   // the drain left this lane's call (under mu)
	ev         *Event // the call's first event, nil between calls (under mu)
	n          int    // its events
	since      time.Time
	// ended is closed when the lane's goroutine returns.
	ended chan struct{}
}

// begin records a call of n events from ev, at now, about to start. It
// reports false, and records nothing, when the drain left the lane: the
// call must not start.
func (f *inFlight) begin(ev *Event, n int, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leftBehind {
		return false
	}
	f.ev, f.n, f.since = ev, n, now
	return true
}

// returned records that the call returned and locks f for its settling,
// which the caller ends with f.mu.Unlock. It reports false, with f
// unlocked, when the drain left the call meanwhile: Run has returned, and
// the outcome must touch nothing of it.
func (f *inFlight) returned() bool {
	f.mu.Lock()
	f.ev = nil
	if f.leftBehind {
		f.mu.Unlock()
		return false
	}
	return true
}

// leave marks the lane left and returns the call it is in (ev nil: none;
// the lane then ends on its own, without starting another).
func (f *inFlight) leave() (ev *Event, n int, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leftBehind = true
	return f.ev, f.n, f.since
}
