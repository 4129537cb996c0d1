package ferry

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/optcheck"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Consumer reads one partition of one stream and applies each change with
// its handler. Create it with NewConsumer (a Handler, one event per call)
// or NewBatchConsumer (a BatchHandler) and call Run.
type Consumer struct {
	cfg     config
	client  *mongo.Client
	handler BatchHandler
	log     *slog.Logger
	hooks   hooks
	// perEvent is set when a hook is told of each handler call
	// (HookEvent, HookDelivery), delivery when one wraps it
	// (HookDelivery): only then is an EventInfo made for each event, with
	// its id (a SHA-256 for a snapshot row).
	perEvent, delivery bool
	// def is the stream's definition under the partitioning in effect:
	// the configured one (HashRange when unset), or the HashMod a Run
	// adopted from the stream's checkpoints (see WithPartitioning).
	def     atomic.Pointer[streamDef]
	keptMod atomic.Bool // the adoption of HashMod was logged
	debug   bool        // the logger has debug enabled
	// running is set while a Run is in progress: a second concurrent Run
	// is refused (ErrAlreadyRunning).
	running atomic.Bool

	mu    sync.Mutex
	state Status
	// split is whether the server splits large events: 0 not checked yet,
	// 1 yes (the pipeline ends with $changeStreamSplitLargeEvent), 2 no.
	split atomic.Int32
}

// Status is a snapshot of a consumer for health checks and status pages.
type Status struct {
	Stream          string
	Partition       int
	Epoch           int64
	Running         bool
	CheckpointAt    time.Time
	CheckpointTime  bson.Timestamp
	CheckpointState checkpoint.State
	QueueEvents     int
	QueueBytes      int64
	// OldestPending is the clusterTime of the oldest event read and not
	// yet applied or dead-lettered (zero: none), as of the last commit
	// interval.
	OldestPending time.Time
	// ReadDelay is QueueInfo.ReadDelay as of the last commit interval:
	// the wait of the newest server batch's first event between its write
	// and its arrival, which an idle shard of a sharded cluster makes up
	// to periodicNoopIntervalSecs (see the package documentation, Lag).
	ReadDelay time.Duration
	// State is the run state: running, waiting-for-sink or stopped.
	State RunState
	// LastError says what is wrong, empty when nothing is: while State is
	// StateWaitingForSink, the delivery error that keeps the consumer
	// waiting (the error that took the sink down, replaced when the error
	// changes, as HookState reports it); once Run returned, the error it
	// returned (empty after a cancellation). It is cleared when the sink
	// accepts events again and when Run starts.
	LastError string
	// Snapshot is the partition's snapshot in progress, or its last one
	// (nil: none since Run started).
	Snapshot *SnapshotProgress
}

// Lag is how far behind the consumer is at now: 0 when nothing is
// pending, otherwise now minus the clusterTime of the oldest event not yet
// applied or dead-lettered (never negative).
func (s Status) Lag(now time.Time) time.Duration {
	return LagOf(now, s.OldestPending)
}

// LagOf is the one definition of lag: 0 when oldestPending is zero (nothing
// pending), otherwise now minus oldestPending, never negative.
func LagOf(now, oldestPending time.Time) time.Duration {
	if oldestPending.IsZero() {
		return 0
	}
	if d := now.Sub(oldestPending); d > 0 {
		return d
	}
	return 0
}

// NewConsumer checks the options and returns a consumer whose handler is
// called with one event at a time. It does not connect: Run does.
func NewConsumer(client *mongo.Client, handler Handler, opts ...Option) (*Consumer, error) {
	var bh BatchHandler
	if handler != nil {
		bh = func(ctx context.Context, batch []*Event) error {
			if len(batch) == 1 {
				return handler(ctx, batch[0])
			}
			be := NewBatchError(len(batch)) // not reached: batches are of one
			for i, ev := range batch {
				be.Set(i, handler(ctx, ev))
			}
			return be.Err()
		}
	}
	return newConsumer(client, bh, handler == nil, false, opts)
}

// NewBatchConsumer checks the options and returns a consumer whose handler
// is called with batches of events (see BatchHandler, BatchSize,
// BatchBytes, BatchLinger): every lane hands the events ready in it over
// in one call, so a sink pays its round trip, syscall or transaction once
// per batch. Everything else is as with NewConsumer: each event is
// finished, retried, dead-lettered and checkpointed on its own. It does
// not connect: Run does.
func NewBatchConsumer(client *mongo.Client, handler BatchHandler, opts ...Option) (*Consumer, error) {
	return newConsumer(client, handler, handler == nil, true, opts)
}

func newConsumer(client *mongo.Client, handler BatchHandler, noHandler, batches bool, opts []Option) (*Consumer, error) {
	cfg := defaultConfig()
	var p optcheck.Problems
	if client == nil {
		p.Add("client", "a connected *mongo.Client is required")
	}
	if noHandler {
		if batches {
			p.Add("handler", "a BatchHandler is required")
		} else {
			p.Add("handler", "a Handler is required")
		}
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	if !batches {
		for _, name := range slices.Compact(slices.Sorted(slices.Values(cfg.batchSet))) {
			p.Add(name, "applies to a BatchHandler (NewBatchConsumer); a Handler is called with one event at a time")
		}
		cfg.batchSize = 1
	}
	cfg.validate(&p)
	if problems := p.List(); len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	def, err := cfg.identity(cfg.scheme())
	if err != nil {
		return nil, err
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("stream", cfg.name, "partition", cfg.partition)
	c := &Consumer{cfg: cfg, client: client, handler: handler, log: log, hooks: hooks(cfg.hooks),
		perEvent: hooks(cfg.hooks).perEvent(), delivery: hooks(cfg.hooks).has(false), debug: log.Enabled(context.Background(), slog.LevelDebug),
		state: Status{Stream: cfg.name, Partition: cfg.partition, Epoch: cfg.epoch}}
	c.def.Store(def)
	return c, nil
}

// Identity returns the stream's identity digest: under the partitioning
// set, or HashRange when none is set, until a Run adopts HashMod from the
// stream's checkpoints (see WithPartitioning); from then on under HashMod.
func (c *Consumer) Identity() string { return c.def.Load().identity }

// Definition returns the canonical encoding of the stream's definition
// the identity digest is computed from, as checkpoints record it (for
// tools that write a checkpoint for the stream, such as ferry position
// set). The caller must not modify it.
func (c *Consumer) Definition() bson.Raw { return c.def.Load().raw }

// Partitioning returns the partitioning the consumer's partition filter
// uses: the one set, or HashRange when none is set, until a Run adopts
// HashMod from the stream's checkpoints (see WithPartitioning).
func (c *Consumer) Partitioning() Partitioning { return c.def.Load().scheme }

// Status returns the consumer's current state.
func (c *Consumer) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *Consumer) setStatus(f func(*Status)) {
	c.mu.Lock()
	f(&c.state)
	c.mu.Unlock()
}
