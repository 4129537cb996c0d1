package lease

import (
	"errors"
	"fmt"
	"time"
)

// Errors to check with errors.Is.
var (
	// ErrInvalid is wrapped by every error about a bad argument or option;
	// the message names the field.
	ErrInvalid = errors.New("lease: invalid argument")
	// ErrHeld: Acquire or Hold found the lease held, unexpired, by another
	// owner. The error is a *HeldError carrying the holder and its epoch.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrLost: the lease (or membership) is no longer ours: another owner
	// took it at a higher epoch, it expired by the server's clock, it was
	// released elsewhere, or the holder could not prove it was still valid
	// (no successful renewal within ttl minus the safety margin). Whoever
	// gets it must stop working on the partition.
	ErrLost = errors.New("lease: lost")
	// ErrNotFound: Get found no lease document for the partition.
	ErrNotFound = errors.New("lease: not found")
	// ErrReleased is Held.Err after Held.Release, and Member.Err after
	// Member.Leave.
	ErrReleased = errors.New("lease: released")
)

// HeldError is the error of an Acquire (or Hold) that lost to a live
// holder. Current is the lease as the server stored it when it refused, read
// in the same atomic operation (so Owner and Epoch are exact).
type HeldError struct {
	Current Lease
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: group %q partition %d is held by %q (epoch %d) until %s (server clock)",
		e.Current.Group, e.Current.Partition, e.Current.Owner, e.Current.Epoch, e.Current.ExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
