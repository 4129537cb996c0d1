package ferry

import (
	"time"
)

// Hook observes a consumer. A hook implements one or more of the Hook*
// interfaces below (WithHooks refuses a value that implements none); Ferry
// calls the ones it implements. Hooks must be fast and must
// not block: they run on the data path. Metrics (Prometheus) plug in here,
// outside the core.
type Hook interface{}

// EventResult is what happened to one event.
type EventResult string

const (
	ResultApplied      EventResult = "applied"
	ResultRetried      EventResult = "retried"
	ResultDeadLettered EventResult = "dead-lettered"
	ResultStalled      EventResult = "stalled"
)

// EventInfo describes one handler call.
type EventInfo struct {
	Stream      string
	Partition   int
	Operation   string
	Namespace   Namespace
	EventID     string
	Result      EventResult
	Attempt     int
	Duration    time.Duration
	Err         error
	ClusterTime time.Time // for lag: now - ClusterTime
	// NoPreImage: the stream asks for pre-images when available
	// (FullDocumentBeforeChange "whenAvailable") and this update, replace
	// or delete arrived without one. Set on the applied and dead-lettered
	// results, so each event counts once.
	NoPreImage bool
	// NoPostImage: the stream asks for post-images when available
	// (FullDocument "whenAvailable") and this update arrived without one.
	// Set as NoPreImage is.
	NoPostImage bool
}

// HookEvent is called after every handler call.
type HookEvent interface{ OnEvent(EventInfo) }

// ResumeInfo describes a reopened stream.
type ResumeInfo struct {
	Stream    string
	Partition int
	Class     string // mongoerr class of the error: resumable, history-lost, ...
	Err       error
}

// HookResume is called each time Ferry reopens the change stream after an
// error, and when history is lost.
type HookResume interface{ OnResume(ResumeInfo) }

// CheckpointInfo describes a written checkpoint.
type CheckpointInfo struct {
	Stream      string
	Partition   int
	Version     int64
	ClusterTime time.Time
	Idle        bool // advanced with a postBatchResumeToken on a quiet stream
	Err         error
}

// HookCheckpoint is called after each checkpoint write attempt.
type HookCheckpoint interface{ OnCheckpoint(CheckpointInfo) }

// QueueInfo describes the bounded queue between reader and handlers.
type QueueInfo struct {
	Stream    string
	Partition int
	Events    int
	Bytes     int64
	// OldestPending is the clusterTime of the oldest event read and not
	// yet applied or dead-lettered; zero when none is pending. Lag is
	// defined from it: 0 when nothing is pending, otherwise now minus
	// OldestPending (see Status.Lag).
	OldestPending time.Time
	// ReadDelay is how long the first event of the newest server batch
	// waited between its write on the source (its wallTime) and its
	// arrival (0: none read yet). Through a mongos it includes the wait
	// for the shard slowest to report progress: up to the shards'
	// periodicNoopIntervalSecs (10 s by default) when one is idle. It
	// includes the difference between the source's clock and this host's.
	ReadDelay time.Duration
}

// HookQueue is called when the queue depth changes notably (every commit
// interval, and on every checkpoint write).
type HookQueue interface{ OnQueue(QueueInfo) }

// RunState is what one consumer (one partition) is doing.
type RunState string

// The run states of a consumer.
const (
	// StateRunning: reading and delivering.
	StateRunning RunState = "running"
	// StateWaitingForSink: every delivery attempt since the last success
	// failed transiently (the sink is down); events wait in order with
	// backoff, none is dead-lettered, reading pauses at the queue bound.
	StateWaitingForSink RunState = "waiting-for-sink"
	// StateStopped: Run returned (Err says why; nil after a cancel).
	StateStopped RunState = "stopped"
)

// StateInfo describes a change of a consumer's run state.
type StateInfo struct {
	Stream    string
	Partition int
	State     RunState
	// Err is the last delivery error when the sink went down (or its
	// error changed), and Run's error when it stopped.
	Err error
}

// HookState is called when a consumer starts running, when its sink goes
// down or comes back, and when Run returns; and again with
// StateWaitingForSink when the delivery error of an outage changes (at
// most every 10 seconds), so that status shows the error of now. A
// consumer group's member uses it to show its stream's state; metrics use
// it to drop a
// partition's series once the partition is given up.
type HookState interface{ OnState(StateInfo) }

// SnapshotInfo is a partition's snapshot progress, reported after every
// chunk, when it starts, finishes or is cancelled.
type SnapshotInfo struct {
	Stream    string
	Partition int
	Progress  SnapshotProgress
}

// HookSnapshot observes snapshots.
type HookSnapshot interface{ OnSnapshot(SnapshotInfo) }

type hooks []Hook

func (h hooks) event(i EventInfo) {
	for _, x := range h {
		if f, ok := x.(HookEvent); ok {
			f.OnEvent(i)
		}
	}
}

func (h hooks) resume(i ResumeInfo) {
	for _, x := range h {
		if f, ok := x.(HookResume); ok {
			f.OnResume(i)
		}
	}
}

func (h hooks) checkpoint(i CheckpointInfo) {
	for _, x := range h {
		if f, ok := x.(HookCheckpoint); ok {
			f.OnCheckpoint(i)
		}
	}
}

func (h hooks) state(i StateInfo) {
	for _, x := range h {
		if f, ok := x.(HookState); ok {
			f.OnState(i)
		}
	}
}

func (h hooks) queue(i QueueInfo) {
	for _, x := range h {
		if f, ok := x.(HookQueue); ok {
			f.OnQueue(i)
		}
	}
}

func (h hooks) snapshot(i SnapshotInfo) {
	for _, x := range h {
		if f, ok := x.(HookSnapshot); ok {
			f.OnSnapshot(i)
		}
	}
}

// isHook reports whether h implements at least one hook interface.
func isHook(h Hook) bool {
	switch h.(type) {
	case HookEvent, HookResume, HookCheckpoint, HookQueue, HookState, HookSnapshot:
		return true
	}
	return false
}
