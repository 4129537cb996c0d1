package ferry

import (
	"errors"
	"fmt"
)

// BatchError reports which events of a batch failed: a BatchHandler (or
// a sink's Write) returns one when some events were applied and others
// were not.
type BatchError struct {
	// Errs has one entry per event of the batch, in order; nil means
	// applied.
	Errs []error
}

// NewBatchError returns a BatchError for a batch of n events, all applied
// until Set says otherwise.
func NewBatchError(n int) *BatchError { return &BatchError{Errs: make([]error, n)} }

// Set records the failure of event i.
func (e *BatchError) Set(i int, err error) { e.Errs[i] = err }

// Failed returns how many events failed.
func (e *BatchError) Failed() int {
	n := 0
	for _, err := range e.Errs {
		if err != nil {
			n++
		}
	}
	return n
}

// Err returns e, or nil if no event failed, so a handler can end with
// `return be.Err()`.
func (e *BatchError) Err() error {
	if e == nil || e.Failed() == 0 {
		return nil
	}
	return e
}

func (e *BatchError) Error() string {
	var first string
	for i, err := range e.Errs {
		if err != nil {
			first = fmt.Sprintf("event %d: %v", i, err)
			break
		}
	}
	if n := e.Failed(); n > 1 {
		return fmt.Sprintf("ferry: %d of %d events failed; first %s", n, len(e.Errs), first)
	}
	return "ferry: " + first
}

// EventErrors returns one error per event of a batch of n from the error
// a BatchHandler (or a sink's Write) returned: nil for every event when
// err is nil, the entries of a *BatchError of n entries, otherwise err for
// every event.
func EventErrors(err error, n int) []error {
	out := make([]error, n)
	if err == nil {
		return out
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == n {
		copy(out, be.Errs)
		return out
	}
	for i := range out {
		out[i] = err
	}
	return out
}
