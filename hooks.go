package ferry

import "time"

// Hook observes a consumer. A hook implements any of the Hook* interfaces
// below; Ferry calls the ones it implements. Hooks must be fast and must
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
}

// HookQueue is called when the queue depth changes notably (on every
// checkpoint write).
type HookQueue interface{ OnQueue(QueueInfo) }

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

func (h hooks) queue(i QueueInfo) {
	for _, x := range h {
		if f, ok := x.(HookQueue); ok {
			f.OnQueue(i)
		}
	}
}
