package ferry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
)

// Handler applies one change. It is called at least once per event; it
// must return nil only after its side effect is durable. An error is
// retried with backoff up to the configured attempts (wrap it with
// Permanent to skip retries); a panic counts as an error.
type Handler func(ctx context.Context, ev *Event) error

// Sweeper removes, after a backfill scan, what the scan did not touch:
// documents deleted while the stream's history was lost. since is when the
// scan began (the server's clock).
type Sweeper func(ctx context.Context, since time.Time) error

// Consumer reads one partition of one stream and applies each change with
// its handler. Create it with NewConsumer and call Run.
type Consumer struct {
	cfg      config
	client   *mongo.Client
	handler  Handler
	log      *slog.Logger
	hooks    hooks
	identity string
	def      bson.Raw
	debug    bool // the logger has debug enabled

	mu    sync.Mutex
	state Status
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
	// State is the run state: running, waiting-for-sink or stopped.
	State     RunState
	LastError string
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

// NewConsumer checks the options and returns a consumer. It does not
// connect: Run does.
func NewConsumer(client *mongo.Client, handler Handler, opts ...Option) (*Consumer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, &ConfigError{Problems: []string{"client: a connected *mongo.Client is required"}}
	}
	if handler == nil {
		return nil, &ConfigError{Problems: []string{"handler: a Handler is required"}}
	}
	id, def, err := cfg.identity()
	if err != nil {
		return nil, err
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("stream", cfg.name, "partition", cfg.partition)
	return &Consumer{cfg: cfg, client: client, handler: handler, log: log, hooks: hooks(cfg.hooks), identity: id, def: def,
		debug: log.Enabled(context.Background(), slog.LevelDebug),
		state: Status{Stream: cfg.name, Partition: cfg.partition, Epoch: cfg.epoch}}, nil
}

// Identity returns the stream's identity digest.
func (c *Consumer) Identity() string { return c.identity }

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

// Run consumes the stream until ctx is cancelled or a stop condition
// (ErrHistoryLost, ErrInvalidated, ErrFenced, ErrStalled,
// ErrIdentityChanged, a fatal server error). On cancellation it stops
// reading, lets in-flight events finish within the drain timeout, writes
// the final checkpoint, closes the cursor and returns nil. No goroutine
// outlives Run.
func (c *Consumer) Run(ctx context.Context) error {
	c.setStatus(func(s *Status) { s.Running, s.LastError, s.State = true, "", StateRunning })
	c.hooks.state(StateInfo{Stream: c.cfg.name, Partition: c.cfg.partition, State: StateRunning})
	err := c.run(ctx)
	c.setStatus(func(s *Status) {
		s.Running, s.State, s.OldestPending = false, StateStopped, time.Time{}
		if err != nil {
			s.LastError = err.Error()
		}
	})
	c.hooks.state(StateInfo{Stream: c.cfg.name, Partition: c.cfg.partition, State: StateStopped, Err: err})
	switch _, failed := AsFailure(err); {
	case err == nil, c.cfg.quietStops:
	case failed:
		c.log.Error("consumer stopped", "err", err)
	default:
		// A hand-off (fenced, lease lost) or a transient error: whoever
		// runs the consumer restarts it with backoff.
		c.log.Warn("consumer stopped", "err", err)
	}
	return err
}

// position is where the stream (re)opens.
type position struct {
	resumeAfter bson.Raw
	startAfter  bson.Raw
	startAt     *bson.Timestamp
}

func (c *Consumer) run(ctx context.Context) error {
	cp, err := c.cfg.store.Load(ctx, c.cfg.name, c.cfg.partition)
	exists := err == nil
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			detail := fmt.Sprintf("stream %q partition %d: %v", c.cfg.name, c.cfg.partition, err)
			return &stopError{kind: ErrCorruptCheckpoint, err: err, detail: detail, msg: "ferry: " + detail +
				"; nothing is resumed from it. Repair the record, or delete it to start the partition again from its start position"}
		}
		return fmt.Errorf("ferry: load checkpoint: %w", err)
	}
	if exists && cp.Identity != "" && cp.Identity != c.identity {
		detail := fmt.Sprintf("stream %q partition %d: the checkpoint was written by a different stream definition (%s)",
			c.cfg.name, c.cfg.partition, describeChange(cp.Definition, c.def))
		return &stopError{kind: ErrIdentityChanged, detail: detail, msg: "ferry: " + detail + ". " +
			"Its token is never reused under another definition. Choose one: give the new definition a new stream name and " +
			"start it where this one stopped (StartAt(StartAtCheckpointsOf(store, oldName)), the ledger absorbing the overlap); " +
			"run a backfill under the new definition (StartAt(StartWithBackfill()) after deleting the checkpoints); " +
			"or delete the checkpoints to start over"}
	}
	if exists && cp.Epoch > c.cfg.epoch {
		return &stopError{kind: ErrFenced, msg: fmt.Sprintf(
			"ferry: stream %q partition %d: the checkpoint was written under lease epoch %d, newer than ours (%d): another owner has taken over",
			c.cfg.name, c.cfg.partition, cp.Epoch, c.cfg.epoch)}
	}
	r := &runner{c: c, cp: cp, exists: exists}
	return r.run(ctx)
}
