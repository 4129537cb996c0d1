package sinktest

import (
	"sync"

	"github.com/ferry-io/ferry"
)

// Faults is the fault table most test receivers need. Embedded in a
// receiver, it provides the Receiver's Fail and Heal; Hook turns it into
// the fault function a sink's test hook takes, failing an event with the
// destination's own error for each Fault. The zero value is ready to use
// and safe for concurrent use.
type Faults struct {
	mu sync.Mutex
	m  map[string]Fault
}

// Fail makes every delivery of the event with that id fail with f, until
// Heal. It reports true: a hook can inject both kinds.
func (fs *Faults) Fail(eventID string, f Fault) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = make(map[string]Fault)
	}
	fs.m[eventID] = f
	return true
}

// Heal removes every injected fault.
func (fs *Faults) Heal() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	clear(fs.m)
}

// Of returns the fault injected for the event with that id (0: none).
func (fs *Faults) Of(eventID string) Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[eventID]
}

// Hook returns a function failing each event with retryable or permanent
// (as the destination would report them) when a fault of that kind is
// injected for it, and returning nil otherwise.
func (fs *Faults) Hook(retryable, permanent error) func(*ferry.Event) error {
	return func(ev *ferry.Event) error {
		switch fs.Of(ev.ID()) {
		case FaultRetryable:
			return retryable
		case FaultPermanent:
			return permanent
		}
		return nil
	}
}
