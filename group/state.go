package group

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ferry-io/ferry"
)

// State is what a member does with its stream.
type State string

// The states of a member's stream (DESIGN.md, "Stream states"):
// starting → running ⇄ waiting-for-sink → draining → stopped, and failed
// from any of them.
const (
	// Starting: joining the group (or re-checking a failed stream).
	Starting State = "starting"
	// Running: a member of the group, running the partitions assigned to
	// it (possibly none: a hot standby).
	Running State = "running"
	// WaitingForSink: running, but the sink of at least one owned
	// partition fails for every event; those events wait, nothing is
	// dead-lettered.
	WaitingForSink State = "waiting-for-sink"
	// Failed: a partition stopped with a failure a retry cannot fix (see
	// ferry.AsFailure). The member released the stream's leases, left the
	// group and takes none of its partitions while failed; it re-checks
	// with backoff (1 s up to 5 min) when the failure can clear by itself,
	// and otherwise stays failed until its configuration changes (a
	// restart with a new one).
	Failed State = "failed"
	// Draining: stopping: in-flight events finish, final checkpoints are
	// written, leases released.
	Draining State = "draining"
	// Stopped: Run returned.
	Stopped State = "stopped"
)

// States lists every state.
var States = []State{Starting, Running, WaitingForSink, Failed, Draining, Stopped}

// Status is a member's view of its stream: the state, and why when failed.
type Status struct {
	State State
	Since time.Time // when State began
	// Failure says why the stream failed on this member. It stays set
	// while a re-check runs (Starting, Running) until the stream has run
	// for a while without failing again, and is nil otherwise.
	Failure *ferry.Failure
	// FailedPartition is the partition whose stop failed the stream; -1
	// when no partition did (the stream's start position could not be
	// resolved before any partition ran).
	FailedPartition int
	// FailedSince is when the stream first failed for this reason.
	FailedSince time.Time
	// RetryAt is when a failed stream is next re-checked; zero when the
	// failure does not clear by itself.
	RetryAt time.Time
	// Partitions are the run states of the partitions this member owns.
	Partitions map[int]ferry.RunState
	// SinkErrors holds, for each owned partition waiting for its sink
	// (ferry.StateWaitingForSink), the delivery error that made it wait
	// (or the latest, when the consumer reported it changing),
	// as SinkProblem renders it.
	SinkErrors map[int]string
	// LastError is the last transient problem (joining the group,
	// acquiring a lease), "" once things work again.
	LastError string
	// Corrupt names each corrupt record of the group's state (a lease or
	// member document with a field of the wrong type) this member read at
	// its last rebalance, with what is done about it; nil when none. The
	// stream goes on (see CorruptAction).
	Corrupt []string
}

// status holds a member's Status and tells OnStateChange about changes.
type status struct {
	mu       sync.Mutex
	s        Status
	onChange func(Status)
	// waits is signalled (never blocking) when the partitions waiting for
	// their sink, or their errors, change: the session publishes them.
	waits chan struct{}
}

func (st *status) get() Status {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.Partitions = maps.Clone(st.s.Partitions)
	s.SinkErrors = maps.Clone(st.s.SinkErrors)
	s.Corrupt = slices.Clone(st.s.Corrupt)
	if s.Failure != nil {
		f := *s.Failure
		s.Failure = &f
	}
	return s
}

// update applies f; when the state changed, OnStateChange is called with
// the new status (outside the lock).
func (st *status) update(f func(*Status)) {
	st.mu.Lock()
	before := st.s.State
	f(&st.s)
	changed := st.s.State != before
	if changed {
		st.s.Since = time.Now()
	}
	st.mu.Unlock()
	if changed && st.onChange != nil {
		st.onChange(st.get())
	}
}

// set moves to state s; Running and WaitingForSink follow the partitions.
func (st *status) set(s State) {
	st.update(func(x *Status) {
		x.State = s
		if s == Running {
			x.State = runningState(x.Partitions)
		}
	})
}

// partition records a partition's run state (from its consumer's
// HookState), with the delivery error when it waits for its sink, and
// moves the member between Running and WaitingForSink.
func (st *status) partition(p int, rs ferry.RunState, err error) {
	var waitsChanged bool
	st.update(func(x *Status) {
		before, had := x.SinkErrors[p]
		if rs == ferry.StateStopped {
			delete(x.Partitions, p)
		} else {
			if x.Partitions == nil {
				x.Partitions = map[int]ferry.RunState{}
			}
			x.Partitions[p] = rs
		}
		if rs == ferry.StateWaitingForSink {
			if x.SinkErrors == nil {
				x.SinkErrors = map[int]string{}
			}
			x.SinkErrors[p] = SinkProblem(err)
		} else {
			delete(x.SinkErrors, p)
		}
		after, has := x.SinkErrors[p]
		waitsChanged = had != has || before != after
		if x.State == Running || x.State == WaitingForSink {
			x.State = runningState(x.Partitions)
		}
	})
	if waitsChanged && st.waits != nil {
		select {
		case st.waits <- struct{}{}:
		default:
		}
	}
}

func runningState(parts map[int]ferry.RunState) State {
	for _, rs := range parts {
		if rs == ferry.StateWaitingForSink {
			return WaitingForSink
		}
	}
	return Running
}

// partitionStates is the ferry.HookState the group gives each consumer.
type partitionStates struct{ st *status }

func (h partitionStates) OnState(i ferry.StateInfo) { h.st.partition(i.Partition, i.State, i.Err) }
