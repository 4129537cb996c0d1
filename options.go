package ferry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// An Option configures a Consumer. Option functions only record their
// values: NewConsumer applies the options in order (a later one overrides
// an earlier one) and then validates the result once, returning a
// *ConfigError that lists every problem, each naming its option and the
// fix. A nil option is a problem too. Only this package makes Options.
type Option interface{ apply(*config) }

// namedOption is every Option: its function's name (OptionNames) and
// what it records.
type namedOption struct {
	name string
	set  func(*config)
}

func (o *namedOption) apply(c *config) { o.set(c) }

func option(name string, set func(*config)) Option { return &namedOption{name: name, set: set} }

// OptionNames returns the name of each option, as its problems name it
// ("Stream", "DrainTimeout", ...), in order; "" for a nil one. Whoever
// passes a user's options on to NewConsumer (package group) uses it to
// refuse the options it sets itself, by name, instead of overriding them.
func OptionNames(opts ...Option) []string {
	names := make([]string, len(opts))
	for i, o := range opts {
		if no, ok := o.(*namedOption); ok {
			names[i] = no.name
		}
	}
	return names
}

// Scope is what a stream watches: a collection, a database (Coll empty) or
// the whole cluster (both empty).
type Scope struct{ DB, Coll string }

func (s Scope) String() string {
	switch {
	case s.DB == "":
		return "cluster"
	case s.Coll == "":
		return "database " + s.DB
	}
	return "collection " + s.DB + "." + s.Coll
}

// StartPosition says where a stream with no checkpoint begins.
type StartPosition struct {
	kind  string // "now", "time", "backfill", "checkpoints"
	at    bson.Timestamp
	from  string           // kind "checkpoints": the other stream
	store checkpoint.Store // kind "checkpoints": where its checkpoints are
}

// StartNow starts at the current end of the oplog.
func StartNow() StartPosition { return StartPosition{kind: "now"} }

// StartAtTime starts at a cluster time (startAtOperationTime): events with
// clusterTime >= t.
func StartAtTime(t bson.Timestamp) StartPosition { return StartPosition{kind: "time", at: t} }

// StartAtCheckpointsOf starts where another stream's checkpoints are: at
// the oldest position among stream from's partitions in store (each
// partition's resume token's cluster time, else its recorded clusterTime),
// opened with startAtOperationTime. The other stream's tokens are never
// reused: they belong to its definition.
//
// It is the lossless way to move to a new definition (pipeline, options,
// partition count): give the new definition a new stream name that starts
// at the old one's checkpoints, and restart the members. Every change after
// the old stream's oldest checkpoint is delivered by the new stream; those
// the old one had delivered already are delivered again, which the ledger
// absorbs in a consumer group's idempotent and transactional modes (the
// group consults the old stream's ledger entries too). Until the old
// stream's members stop, both deliver.
func StartAtCheckpointsOf(store checkpoint.Store, from string) StartPosition {
	return StartPosition{kind: "checkpoints", from: from, store: store}
}

// FromStream returns the stream StartAtCheckpointsOf names, or "".
func (p StartPosition) FromStream() string {
	if p.kind == "checkpoints" {
		return p.from
	}
	return ""
}

// Time resolves a start position that is a cluster time: StartAtTime's,
// or the oldest position of StartAtCheckpointsOf's stream. It fails with
// ErrStartPosition when there is none (no checkpoints, or none with a
// position).
func (p StartPosition) Time(ctx context.Context) (bson.Timestamp, error) {
	switch p.kind {
	case "time":
		return p.at, nil
	case "checkpoints":
		if p.store == nil {
			return bson.Timestamp{}, fmt.Errorf("%w: StartAtCheckpointsOf(%q) has no checkpoint store", ErrStartPosition, p.from)
		}
		list, err := p.store.List(ctx, p.from)
		if err != nil {
			if errors.Is(err, checkpoint.ErrCorrupt) {
				return bson.Timestamp{}, fmt.Errorf("%w: stream %q: %v", ErrStartPosition, p.from, err)
			}
			return bson.Timestamp{}, fmt.Errorf("ferry: read the checkpoints of stream %q: %w", p.from, err)
		}
		oldest, ok := OldestPosition(list)
		if !ok {
			return bson.Timestamp{}, fmt.Errorf("%w: stream %q has no checkpoint with a position to start from (%d checkpoint(s)); "+
				"check the stream name", ErrStartPosition, p.from, len(list))
		}
		return oldest, nil
	}
	return bson.Timestamp{}, fmt.Errorf("%w: %s is not a cluster time", ErrStartPosition, p.kind)
}

// OldestPosition returns the oldest position among checkpoints, as a
// cluster time to start a stream at (startAtOperationTime): per checkpoint
// the cluster time its resume token holds (every change after the token
// is at that time or later), else its recorded ClusterTime. ok is false
// when none has either. Tokens are read for their time only.
func OldestPosition(cps []checkpoint.Checkpoint) (oldest bson.Timestamp, ok bool) {
	for _, cp := range cps {
		ts := cp.ClusterTime
		if tok, err := resumetoken.Parse(cp.Token); err == nil && !tok.ClusterTime.IsZero() {
			ts = tok.ClusterTime
		}
		if ts.IsZero() {
			continue
		}
		if !ok || ts.Before(oldest) {
			oldest, ok = ts, true
		}
	}
	return oldest, ok
}

// IsNow reports whether p is StartNow.
func (p StartPosition) IsNow() bool { return p.kind == "now" || p.kind == "" }

// StartOf returns the start position opts set: StartNow when none sets one.
// A consumer group uses it to decide whether to give its partitions a
// common origin (see package group).
func StartOf(opts ...Option) StartPosition {
	c := config{start: StartNow()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c.start
}

// StartWithBackfill streams from now and snapshots the watched
// collections beside the stream: every document reaches the handler as a
// backfill event, ordered with its changes (see Snapshots in the package
// documentation).
func StartWithBackfill() StartPosition { return StartPosition{kind: "backfill"} }

// PoisonPolicy says what happens to an event that failed MaxAttempts times.
type PoisonPolicy string

const (
	// PoisonDeadLetter records the event in the dead-letter store and moves on.
	PoisonDeadLetter PoisonPolicy = "dead-letter"
	// PoisonStall stops the partition at the event, for sinks where order
	// matters more than progress.
	PoisonStall PoisonPolicy = "stall"
)

// HistoryLostPolicy says what happens when the checkpoint's resume token is
// no longer in the oplog (ChangeStreamHistoryLost).
type HistoryLostPolicy string

const (
	// HistoryLostFail stops with ErrHistoryLost and marks the checkpoint
	// needs-backfill. It never silently starts from now.
	HistoryLostFail HistoryLostPolicy = "fail"
	// HistoryLostBackfill streams again from now and snapshots the
	// partition beside the stream (its sweeper, if any, then removes what
	// the snapshot did not touch).
	HistoryLostBackfill HistoryLostPolicy = "backfill"
)

// InvalidatePolicy says what happens when the stream is invalidated (its
// collection dropped or renamed, its database dropped).
type InvalidatePolicy string

const (
	// InvalidateStop records the invalidate token and stops with
	// ErrInvalidated.
	InvalidateStop InvalidatePolicy = "stop"
	// InvalidateRestart continues after the invalidate event (startAfter),
	// e.g. following a collection that is dropped and re-created.
	InvalidateRestart InvalidatePolicy = "restart"
)

type config struct {
	name           string
	scope          Scope
	scopeSet       bool
	pipeline       []bson.D
	fullDocument   string
	fullDocBefore  string
	showExpanded   bool
	store          checkpoint.Store
	dlq            deadletter.Store
	start          StartPosition
	partition      int
	partitions     int
	partitioning   Partitioning // as set (WithPartitioning); "": not set
	epoch          int64
	concurrency    int
	maxEvents      int
	maxBytes       int64
	commitInterval time.Duration
	commitBatch    int
	maxAttempts    int
	maxElapsed     time.Duration
	backoffMin     time.Duration
	backoffMax     time.Duration
	onPoison       PoisonPolicy
	handlerTimeout time.Duration
	onHistoryLost  HistoryLostPolicy
	onInvalidate   InvalidatePolicy
	drainTimeout   time.Duration
	maxAwait       time.Duration
	logger         *slog.Logger
	quietStops     bool
	noSplit        bool
	copyEvents     bool
	oversize       OversizePolicy
	hooks          []Hook
	sweeper        Sweeper
	// Snapshots: documents per chunk, a documents-per-second cap (0:
	// none), how often an operator's requests are looked for.
	snapshotChunk int
	snapshotRate  float64
	snapshotPoll  time.Duration
	// Batches of a BatchHandler (NewBatchConsumer); a Handler's are of one
	// event. batchSize 0: not set (the constructor's default).
	batchSize   int
	batchBytes  int64
	batchLinger time.Duration
	batchSet    []string // the batch options given, for NewConsumer's refusal
}

// Defaults of NewBatchConsumer's batches, and of Concurrency.
const (
	DefaultBatchSize   = 100
	DefaultBatchBytes  = 4 << 20
	DefaultConcurrency = 8
)

func defaultConfig() config {
	return config{
		start:          StartNow(),
		partitions:     1,
		concurrency:    DefaultConcurrency,
		maxEvents:      4_000,
		maxBytes:       64 << 20,
		commitInterval: time.Second,
		commitBatch:    1000,
		maxAttempts:    5,
		backoffMin:     100 * time.Millisecond,
		backoffMax:     30 * time.Second,
		onPoison:       PoisonDeadLetter,
		handlerTimeout: 30 * time.Second,
		onHistoryLost:  HistoryLostFail,
		onInvalidate:   InvalidateStop,
		drainTimeout:   8 * time.Second,
		maxAwait:       time.Second,
		snapshotChunk:  DefaultSnapshotChunk,
		snapshotPoll:   2 * time.Second,
		batchSize:      DefaultBatchSize,
		batchBytes:     DefaultBatchBytes,
	}
}

// Stream names the stream (required). The name keys the checkpoints: two
// consumers with the same name share them.
func Stream(name string) Option { return option("Stream", func(c *config) { c.name = name }) }

// WatchCollection watches one collection.
func WatchCollection(db, coll string) Option {
	return option("WatchCollection", func(c *config) { c.scope, c.scopeSet = Scope{DB: db, Coll: coll}, true })
}

// WatchDatabase watches every collection of a database.
func WatchDatabase(db string) Option {
	return option("WatchDatabase", func(c *config) { c.scope, c.scopeSet = Scope{DB: db}, true })
}

// WatchCluster watches every database of the cluster.
func WatchCluster() Option {
	return option("WatchCluster", func(c *config) { c.scope, c.scopeSet = Scope{}, true })
}

// Pipeline sets the stages that follow $changeStream (e.g. a $match). They
// are part of the stream's identity: changing them later is refused.
func Pipeline(stages ...bson.D) Option {
	return option("Pipeline", func(c *config) { c.pipeline = append([]bson.D(nil), stages...) })
}

// FullDocument sets the fullDocument option for update events:
// "updateLookup", "whenAvailable" or "required" ("" = default, absent).
func FullDocument(mode string) Option {
	return option("FullDocument", func(c *config) { c.fullDocument = mode })
}

// FullDocumentBeforeChange sets the pre-image option: "whenAvailable" or
// "required" ("" or "off" = none).
func FullDocumentBeforeChange(mode string) Option {
	return option("FullDocumentBeforeChange", func(c *config) { c.fullDocBefore = mode })
}

// ShowExpandedEvents asks for DDL events (create, createIndexes, ...).
func ShowExpandedEvents(on bool) Option {
	return option("ShowExpandedEvents", func(c *config) { c.showExpanded = on })
}

// Checkpoints sets the checkpoint store (required).
func Checkpoints(s checkpoint.Store) Option {
	return option("Checkpoints", func(c *config) { c.store = s })
}

// DeadLetters sets where poison events go (required with PoisonDeadLetter).
func DeadLetters(s deadletter.Store) Option {
	return option("DeadLetters", func(c *config) { c.dlq = s })
}

// StartAt sets where a stream without a checkpoint starts (default
// StartNow). It is ignored once a checkpoint exists.
func StartAt(p StartPosition) Option { return option("StartAt", func(c *config) { c.start = p }) }

// Partition makes the consumer read partition p of n (default 0 of 1): the
// server filters events by the hashed-index key of documentKey._id (see
// WithPartitioning), so one document's events always land in one
// partition.
func Partition(p, n int) Option {
	return option("Partition", func(c *config) { c.partition, c.partitions = p, n })
}

// WithPartitioning sets how the stream's documents are split among its
// partitions: HashRange or HashMod (see Partitioning). It matters only
// with more than one partition, and every partition of a stream must use
// the same one.
//
// Left unset, a new stream uses HashRange, and a stream that checkpointed
// under HashMod (one created before Ferry partitioned by ranges) keeps
// HashMod: each Run reads the stream's checkpoints and, when one of them
// was written under the stream's definition with HashMod, runs with
// HashMod and logs so once (a Consumer whose stream has checkpoints of
// both is refused with ErrIdentityChanged). Under HashMod a snapshot
// (StartWithBackfill, HistoryLostBackfill) reads every document once per
// partition at the server; the lossless way to HashRange is a new stream
// name started at the old one's checkpoints (StartAtCheckpointsOf).
//
// HashRange is part of the stream's identity (with more than one
// partition) and HashMod is not, so a stream that checkpointed before
// this option existed keeps its identity under HashMod. Set to HashRange
// on such a stream, Run stops with ErrIdentityChanged naming the
// partitioning.
func WithPartitioning(p Partitioning) Option {
	return option("WithPartitioning", func(c *config) { c.partitioning = p })
}

// Epoch sets the lease epoch the consumer writes checkpoints with (fencing
// token; default 0). A checkpoint written with a higher epoch fences this
// consumer off.
func Epoch(e int64) Option { return option("Epoch", func(c *config) { c.epoch = e }) }

// Concurrency sets the number of lanes (default DefaultConcurrency, 8). Events of one document
// are applied in order in one lane; different documents in parallel.
func Concurrency(n int) Option { return option("Concurrency", func(c *config) { c.concurrency = n }) }

// QueueLimit bounds the events read but not yet finished, by count and by
// bytes (default 4,000 events, 64 MiB). When full, reading pauses.
func QueueLimit(events int, bytes int64) Option {
	return option("QueueLimit", func(c *config) { c.maxEvents, c.maxBytes = events, bytes })
}

// CommitEvery sets how often the checkpoint is written: after n finished
// events or after d, whichever comes first (default 1000, 1s).
func CommitEvery(n int, d time.Duration) Option {
	return option("CommitEvery", func(c *config) { c.commitBatch, c.commitInterval = n, d })
}

// Retry sets the handler retry policy: exponential backoff from min to
// max, with jitter, and maxAttempts counted attempts before an event is
// poison (default 5, 100ms, 30s).
//
// An attempt counts only as evidence that the event itself is bad, and
// whose failure it is decides. The handler's own failure (any error not
// of the kinds below, and a panic: a bug, or a value of the event it
// cannot use) counts every time, so a deterministic failure is poison
// after maxAttempts attempts even when nothing else succeeds around it. A
// failure of the destination (an error marked Transient, as package
// sink's Handler and BatchHandler mark every retryable failure of a sink;
// a network error; a timeout, the call's own deadline included; a
// MongoDB error of the cluster's state, such as no primary, or a
// transient transaction error) counts only when it failed while the
// destination accepted other events. So while the handler fails for every
// event with such failures, as during a receiver's outage or restart,
// attempts do not count and nothing is dead-lettered however long the
// outage lasts: events wait in order, with backoff, and reading pauses at
// the queue bound. The consumer's state meanwhile is StateWaitingForSink
// (HookState, Status). Permanent makes the event poison at once. A Go
// handler whose destination reports an outage in a way Ferry cannot
// recognise (an HTTP 503 turned into an error) marks it Transient. See
// RetryMaxElapsed for an explicit time bound.
func Retry(maxAttempts int, min, max time.Duration) Option {
	return option("Retry", func(c *config) { c.maxAttempts, c.backoffMin, c.backoffMax = maxAttempts, min, max })
}

// RetryMaxElapsed bounds how long one event is retried, outage or not
// (default 0: no bound). An event still failing d after its first attempt
// goes to the poison policy even if its attempts did not count. It trades
// completeness for progress: with a bound, an outage longer than d
// dead-letters (or stalls on) the events it holds up. If you set one, make
// it well above the longest outage you expect the sink to recover from by
// itself: a Cloud Run receiver's cold start or redeploy takes seconds to
// minutes.
func RetryMaxElapsed(d time.Duration) Option {
	return option("RetryMaxElapsed", func(c *config) { c.maxElapsed = d })
}

// OnPoison sets the poison-event policy (default PoisonDeadLetter).
func OnPoison(p PoisonPolicy) Option { return option("OnPoison", func(c *config) { c.onPoison = p }) }

// HandlerTimeout bounds one handler call (default 30s): one event of a
// Handler, one whole batch of a BatchHandler. When it passes, the call's
// context ends with context.DeadlineExceeded; what the call then returns
// decides: nil applied its events (late, logged), an error failed them.
func HandlerTimeout(d time.Duration) Option {
	return option("HandlerTimeout", func(c *config) { c.handlerTimeout = d })
}

// OnHistoryLost sets the lost-history policy (default HistoryLostFail).
func OnHistoryLost(p HistoryLostPolicy) Option {
	return option("OnHistoryLost", func(c *config) { c.onHistoryLost = p })
}

// OnInvalidate sets the invalidate policy (default InvalidateStop).
func OnInvalidate(p InvalidatePolicy) Option {
	return option("OnInvalidate", func(c *config) { c.onInvalidate = p })
}

// DrainTimeout bounds how long Run lets the handler calls in flight finish
// after its context is cancelled (default 8s, within Cloud Run's 10s).
// Events read but not yet handed to the handler are not started, nor is a
// failed one retried, while draining: they are left, in order, for the
// next run or owner. Then the
// calls still running are cancelled, and Run returns within DrainMargin
// more, whatever the handler does (see DrainMargin).
func DrainTimeout(d time.Duration) Option {
	return option("DrainTimeout", func(c *config) { c.drainTimeout = d })
}

// DrainMargin is how much longer than DrainTimeout Run takes at most to
// return once its context is cancelled and reading has stopped (at once:
// a getMore in flight is cancelled). The handler calls still running at
// the drain timeout have their context cancelled and half of it to
// return; the final checkpoint write gets the rest. With the defaults Run
// returns within 10 s of the cancellation, Cloud Run's grace period.
//
// A call that ignores its cancelled context is left running when its
// half has passed, so that Run can return: the one exception to "no
// goroutine outlives Run". What it costs: its lane's goroutine goes on
// until the handler returns, then ends without touching the consumer (no
// checkpoint, no status, no hook but the call's own delivery end,
// reported abandoned); its events are not finished, whatever the call
// returns, so the next Run or the partition's next owner delivers them
// again, possibly while the left call still runs; and Run logs it as an
// error naming the stream, the partition and the call's first event
// (short id). A handler that honours its context costs none of this.
const DrainMargin = 2 * time.Second

// MaxAwaitTime sets how long one getMore waits for events (default 1s); it
// is also how often a quiet stream's checkpoint may advance.
func MaxAwaitTime(d time.Duration) Option {
	return option("MaxAwaitTime", func(c *config) { c.maxAwait = d })
}

// SplitLargeEvents sets whether the stream splits events over 16 MB with
// $changeStreamSplitLargeEvent (default true, on servers that have it:
// MongoDB 7.0 and 6.0.9+). Ferry reassembles the fragments, so the handler
// sees one whole event (see Event), and never checkpoints between them.
// Turning it off is part of the stream's identity.
func SplitLargeEvents(on bool) Option {
	return option("SplitLargeEvents", func(c *config) { c.noSplit = !on })
}

// CopyEvents sets whether each event gets bytes of its own (default
// false). By default an event's byte slices (Raw, and the fields decoded
// from it) alias the server's reply they came in, which the driver never
// reuses: reading costs no copy per event, and the reply stays in memory
// while any of its events is referenced. A handler that keeps events past
// its call, or parts of them, keeps their whole replies (a batch is a
// quarter of QueueLimit's events) unless it copies what it keeps
// (bytes.Clone) or turns CopyEvents on. (Ferry itself holds at most three
// replies so: the events of further replies, read while a lane lags, are
// copied.) On a driver version Ferry has not checked for this (see the
// README), events are copied whatever the option says.
func CopyEvents(on bool) Option { return option("CopyEvents", func(c *config) { c.copyEvents = on }) }

// OversizePolicy says what happens to an event the server cannot return
// even split: one top-level field over 16 MB (a huge fullDocument or
// pre-image), so the stream fails with BSONObjectTooLarge at it.
type OversizePolicy string

const (
	// OversizeFail stops with a failure (FailEventTooLarge): the partition
	// cannot move past the event until the definition changes.
	OversizeFail OversizePolicy = "fail"
	// OversizeDeadLetter reads the event without its fullDocument and
	// fullDocumentBeforeChange and dead-letters it (documentKey, operation,
	// the reason; no body), then goes on.
	OversizeDeadLetter OversizePolicy = "dead-letter"
	// OversizeDropImages reads the event without its fullDocument and
	// fullDocumentBeforeChange and delivers it so, with Event.ImagesDropped
	// set.
	OversizeDropImages OversizePolicy = "drop-images"
)

// OnOversize sets the policy for an event too large for the server to
// return (default OversizeFail).
func OnOversize(p OversizePolicy) Option {
	return option("OnOversize", func(c *config) { c.oversize = p })
}

// LogStops sets whether Run logs why it stopped (default true). A
// consumer group turns it off: it reports its partitions' stops itself,
// once per state change.
func LogStops(on bool) Option { return option("LogStops", func(c *config) { c.quietStops = !on }) }

// Logger sets the logger (default: discard). Ferry logs event ids, never
// documents or tokens in full.
func Logger(l *slog.Logger) Option { return option("Logger", func(c *config) { c.logger = l }) }

// WithHooks adds observers (see Hook).
func WithHooks(h ...Hook) Option {
	return option("WithHooks", func(c *config) { c.hooks = append(c.hooks, h...) })
}

// BatchSize sets how many events a BatchHandler is given at most in one
// call (default DefaultBatchSize). A lane hands over the events that are
// ready, up to this many (see BatchLinger). Only for NewBatchConsumer: a
// Handler takes one event at a time.
func BatchSize(n int) Option {
	return option("BatchSize", func(c *config) { c.batchSize = n; c.batchSet = append(c.batchSet, "BatchSize") })
}

// BatchBytes bounds a batch by the sum of its events' raw sizes (default
// DefaultBatchBytes); an event larger than the bound is handed over alone.
// Only for NewBatchConsumer.
func BatchBytes(n int64) Option {
	return option("BatchBytes", func(c *config) { c.batchBytes = n; c.batchSet = append(c.batchSet, "BatchBytes") })
}

// BatchLinger sets how long a lane waits for more events once it has one
// and its batch is not full (default 0: it hands over what is ready at
// once, so a batch fills only while the handler is busy, and a quiet stream
// costs no latency). A linger trades latency for fuller batches. Only for
// NewBatchConsumer.
func BatchLinger(d time.Duration) Option {
	return option("BatchLinger", func(c *config) { c.batchLinger = d; c.batchSet = append(c.batchSet, "BatchLinger") })
}

// DefaultSnapshotChunk is SnapshotChunkSize's default.
const DefaultSnapshotChunk = 1000

// SnapshotChunkSize sets how many documents a snapshot reads per chunk
// (default DefaultSnapshotChunk). A chunk is read at one cluster time and
// spliced into the partition's flow there; its completion is recorded
// with the checkpoint, so a crash re-reads at most the chunk in flight. A
// chunk also ends at the server's 16 MiB reply: memory holds at most one
// chunk per partition beside the window.
func SnapshotChunkSize(n int) Option {
	return option("SnapshotChunkSize", func(c *config) { c.snapshotChunk = n })
}

// SnapshotMaxRate caps a snapshot's reads at documentsPerSecond per
// partition (0, the default: no cap).
func SnapshotMaxRate(documentsPerSecond float64) Option {
	return option("SnapshotMaxRate", func(c *config) { c.snapshotRate = documentsPerSecond })
}

// SnapshotPollInterval sets how often a partition's owner looks for an
// operator's snapshot request or cancellation in the checkpoint store
// (default 2 s; the store must implement checkpoint.SnapshotRequests).
func SnapshotPollInterval(d time.Duration) Option {
	return option("SnapshotPollInterval", func(c *config) { c.snapshotPoll = d })
}

// WithSweeper sets the function a backfill calls after its scan, to remove
// from the sink what the scan did not touch (deletes missed while the
// history was lost).
func WithSweeper(s Sweeper) Option { return option("WithSweeper", func(c *config) { c.sweeper = s }) }

// validate records every problem of the configuration in p, each naming
// its option.
func (c *config) validate(p *optcheck.Problems) {
	if c.name == "" {
		p.Add("Stream", "a stream name is required (ferry.Stream(\"orders\"))")
	}
	if !c.scopeSet {
		p.Add("scope", "choose what to watch with WatchCollection, WatchDatabase or WatchCluster")
	} else if c.scope.DB == "" && c.scope.Coll != "" {
		p.Add("WatchCollection", "the database name is empty")
	}
	if c.store == nil {
		p.Add("Checkpoints", "a checkpoint store is required")
	}
	if c.onPoison == PoisonDeadLetter && c.dlq == nil {
		p.Add("DeadLetters", "a dead-letter store is required with OnPoison(PoisonDeadLetter); set DeadLetters(...) or OnPoison(PoisonStall)")
	}
	switch c.onPoison {
	case PoisonDeadLetter, PoisonStall:
	default:
		p.Add("OnPoison", "%q is not a policy (use PoisonDeadLetter or PoisonStall)", c.onPoison)
	}
	if c.snapshotChunk < 1 || c.snapshotChunk > 1_000_000 {
		p.Add("SnapshotChunkSize", "%d is out of range: use 1 to 1000000 documents per chunk", c.snapshotChunk)
	}
	if c.snapshotRate < 0 {
		p.Add("SnapshotMaxRate", "%v is negative: use 0 (no cap) or a positive number of documents per second", c.snapshotRate)
	}
	if c.snapshotPoll <= 0 {
		p.Add("SnapshotPollInterval", "%v must be positive", c.snapshotPoll)
	}
	switch c.onHistoryLost {
	case HistoryLostFail, HistoryLostBackfill:
	default:
		p.Add("OnHistoryLost", "%q is not a policy (use HistoryLostFail or HistoryLostBackfill)", c.onHistoryLost)
	}
	switch c.oversize {
	case "", OversizeFail, OversizeDeadLetter, OversizeDropImages:
	default:
		p.Add("OnOversize", "%q is not a policy (use OversizeFail, OversizeDeadLetter or OversizeDropImages)", c.oversize)
	}
	if c.oversize == OversizeDeadLetter && c.dlq == nil {
		p.Add("OnOversize", "OversizeDeadLetter needs a dead-letter store (DeadLetters)")
	}
	switch c.onInvalidate {
	case InvalidateStop, InvalidateRestart:
	default:
		p.Add("OnInvalidate", "%q is not a policy (use InvalidateStop or InvalidateRestart)", c.onInvalidate)
	}
	switch c.fullDocument {
	case "", "default", "updateLookup", "whenAvailable", "required":
	default:
		p.Add("FullDocument", "%q is not a mode (use updateLookup, whenAvailable or required)", c.fullDocument)
	}
	switch c.fullDocBefore {
	case "", "off", "whenAvailable", "required":
	default:
		p.Add("FullDocumentBeforeChange", "%q is not a mode (use whenAvailable or required)", c.fullDocBefore)
	}
	switch c.start.kind {
	case "now", "time", "backfill":
	case "checkpoints":
		switch {
		case c.start.store == nil:
			p.Add("StartAt", "StartAtCheckpointsOf needs the checkpoint store of stream %q", c.start.from)
		case c.start.from == "":
			p.Add("StartAt", "StartAtCheckpointsOf needs the name of the stream to start from")
		case c.start.from == c.name:
			p.Add("StartAt", "StartAtCheckpointsOf(%q) names this stream itself; name the stream whose checkpoints to start from", c.start.from)
		}
	default:
		p.Add("StartAt", "use StartNow(), StartAtTime(t), StartWithBackfill() or StartAtCheckpointsOf(store, stream)")
	}
	if c.partitions < 1 {
		p.Add("Partition", "the partition count must be at least 1, got %d", c.partitions)
	} else if c.partition < 0 || c.partition >= c.partitions {
		p.Add("Partition", "partition %d is out of range [0, %d)", c.partition, c.partitions)
	}
	if !validPartitioning(c.partitioning) {
		p.Add("WithPartitioning", "%q is not a partitioning (use HashRange, %q, or HashMod, %q)", c.partitioning, HashRange, HashMod)
	}
	if c.epoch < 0 {
		p.Add("Epoch", "must not be negative, got %d", c.epoch)
	}
	if c.concurrency < 1 {
		p.Add("Concurrency", "must be at least 1, got %d", c.concurrency)
	}
	if c.maxEvents < 1 || c.maxBytes < 1 {
		p.Add("QueueLimit", "both limits must be positive, got %d events and %d bytes", c.maxEvents, c.maxBytes)
	}
	if c.commitBatch < 1 || c.commitInterval <= 0 {
		p.Add("CommitEvery", "both the count and the interval must be positive")
	}
	if c.maxAttempts < 1 {
		p.Add("Retry", "maxAttempts must be at least 1, got %d", c.maxAttempts)
	}
	if c.maxElapsed < 0 {
		p.Add("RetryMaxElapsed", "must not be negative, got %v (0: no bound)", c.maxElapsed)
	}
	for i, h := range c.hooks {
		if !isHook(h) && !isTraceHook(h) {
			p.Add("WithHooks", "hook %d (%T) implements none of HookEvent, HookResume, HookCheckpoint, HookQueue, HookState, HookRead, HookDelivery", i, h)
		}
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		p.Add("Retry", "need 0 < min <= max backoff, got %v and %v", c.backoffMin, c.backoffMax)
	}
	if c.handlerTimeout <= 0 {
		p.Add("HandlerTimeout", "must be positive, got %v", c.handlerTimeout)
	}
	if c.drainTimeout < 0 {
		p.Add("DrainTimeout", "must not be negative, got %v", c.drainTimeout)
	}
	if c.maxAwait <= 0 {
		p.Add("MaxAwaitTime", "must be positive, got %v", c.maxAwait)
	}
	if c.batchSize < 1 {
		p.Add("BatchSize", "must be at least 1, got %d", c.batchSize)
	}
	if c.batchBytes < 1 {
		p.Add("BatchBytes", "must be positive, got %d", c.batchBytes)
	}
	if c.batchLinger < 0 {
		p.Add("BatchLinger", "must not be negative, got %v (0: hand over what is ready)", c.batchLinger)
	}
}
