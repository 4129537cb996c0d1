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
	// ErrDuplicateMember: Join found the member id registered by another
	// live process (it heartbeat while Join watched it). The error is a
	// *DuplicateMemberError. Two processes must never share a member id.
	ErrDuplicateMember = errors.New("lease: member id in use by another live process")
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

// DuplicateMemberError is Join's error when another live process holds the
// member id: its registration heartbeat, or another process registered
// the id, while Join watched it. Times are the server's clock.
type DuplicateMemberError struct {
	Group, Member string
	// JoinedAt and HeartbeatAt are the other registration's, as last read.
	JoinedAt, HeartbeatAt time.Time
	// Waited is how long Join watched it before deciding (local clock).
	Waited time.Duration
}

func (e *DuplicateMemberError) Error() string {
	return fmt.Sprintf("lease: member id %q of group %q is in use by another live process (it joined at %s and heartbeat "+
		"at %s, server clock, while this one watched it for %v); every process needs its own member id",
		e.Member, e.Group, e.JoinedAt.Format(time.RFC3339Nano), e.HeartbeatAt.Format(time.RFC3339Nano), e.Waited.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrDuplicateMember) true.
func (e *DuplicateMemberError) Is(target error) bool { return target == ErrDuplicateMember }
