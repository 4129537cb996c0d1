package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/ledger"
)

// Mode is how effects are delivered (DESIGN.md, "Delivery modes").
type Mode string

const (
	// AtLeastOnce: effect, then checkpoint; a crash replays.
	AtLeastOnce Mode = "at-least-once"
	// Idempotent: the ledger is consulted before the effect and written
	// after it; the handler gets the idempotency key (Event.ID) and epoch.
	Idempotent Mode = "idempotent"
	// Transactional: ledger insert, a lease-epoch check, the handler's
	// own writes (through the context it is given) and a write to the
	// partition's fence document in one MongoDB transaction: exactly-once
	// effects in the state store's cluster, none from a fenced-off owner.
	Transactional Mode = "transactional"
)

// ErrLeaseLost is returned to a handler call made after the partition's
// lease could no longer be proven valid: the effect must not happen.
var ErrLeaseLost = errors.New("group: partition lease lost")

// ErrEpochChanged aborts a transactional effect whose lease epoch is no
// longer current (another member took the partition over): it wraps the
// lease.ErrLost error of lease.Held.VerifyEpoch, which says who holds it.
var ErrEpochChanged = errors.New("group: lease epoch changed")

// Group is one member of a consumer group.
type Group struct {
	cfg     config
	client  *mongo.Client
	handler ferry.Handler      // New's, or nil
	batch   ferry.BatchHandler // NewBatch's, or nil
	leases  *lease.Store
	cps     checkpoint.Store
	dlq     deadletter.Store
	log     *slog.Logger

	mu    sync.Mutex
	owned map[int]int64 // partition → epoch, for Owned

	// tried: the partitions whose lease this Group (this process) has
	// asked for. A live lease under the member id on another partition
	// is an earlier process's (restarted with the same id): it is not
	// adopted, which would share its epoch, but left to expire.
	tried map[int]bool
	// unsure: the partitions whose last acquire ended without an answer
	// (an error other than ErrHeld): the server may have given the lease
	// all the same (releaseStrays).
	unsure map[int]bool

	st      *status
	records *failureRecords
	from    string // the stream this one started from (ferry.StartAtCheckpointsOf), for the ledger
	// scheme is the partitioning every partition runs with, resolved by
	// Run before it runs any (partitioning.go); "" before.
	scheme ferry.Partitioning

	ledgerDuplicates atomic.Int64
	poolWarned       atomic.Bool // warnPool logged
}

// LedgerDuplicates returns how many events the ledger recognised as
// already applied (replays absorbed) in the idempotent and transactional
// modes.
func (g *Group) LedgerDuplicates() int64 { return g.ledgerDuplicates.Load() }

// LeaseRenewFailures returns how many lease renewals failed.
func (g *Group) LeaseRenewFailures() int64 { return g.leases.RenewFailures() }

// New checks the options and returns a group member. Run joins the group.
// It contacts no server. client reads the partitions' change streams;
// StateDatabase's client carries leases, heartbeats and checkpoints, and
// should be another client (see the package doc, "Operational notes"). Its error, a *ferry.ConfigError, lists every
// problem of the options, of the ConsumerOptions (as ferry.NewConsumer
// reports them, under "ConsumerOptions: ") and of the LeaseOptions.
func New(client *mongo.Client, handler ferry.Handler, opts ...Option) (*Group, error) {
	return newGroup(client, handler, nil, false, opts)
}

// NewBatch is New for a ferry.BatchHandler: each partition's consumer is
// a ferry.NewBatchConsumer, and the delivery mode works per batch. In
// idempotent mode a batch costs one ledger find (SeenMany) before the
// handler, which gets only the events not applied before, and one
// unordered insertMany (RecordMany) after it, of the events it applied;
// in transactional mode one transaction holds both, the lease check and
// the handler's writes for the whole batch. ConsumerOptions may then
// carry ferry.BatchSize, BatchBytes and BatchLinger.
func NewBatch(client *mongo.Client, handler ferry.BatchHandler, opts ...Option) (*Group, error) {
	return newGroup(client, nil, handler, true, opts)
}

func newGroup(client *mongo.Client, handler ferry.Handler, batch ferry.BatchHandler, batches bool, opts []Option) (*Group, error) {
	cfg := defaultConfig()
	var p optcheck.Problems
	if client == nil {
		p.Add("client", "a connected *mongo.Client is required")
	}
	switch {
	case batches && batch == nil:
		p.Add("handler", "a BatchHandler is required")
	case !batches && handler == nil:
		p.Add("handler", "a Handler is required")
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if cfg.memberID == "" {
		cfg.memberID = lease.DefaultMemberID()
	}
	if !cfg.intervalSet {
		cfg.interval = cfg.ttl / 4
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	// The options passed on are checked once what they depend on is valid
	// (a state database, a lease TTL, a partition count), so that one bad
	// option is not reported twice.
	if cfg.state == nil || cfg.ttl < minLeaseTTL {
		return nil, &ferry.ConfigError{Problems: p.List()}
	}
	// The member timeout follows the lease TTL, so that a crashed member
	// stops counting as live when its leases expire (an explicit
	// lease.MemberTimeout in LeaseOptions wins).
	// The lease store logs through the group's logger: failed heartbeats
	// and renewals, and a Join that waits on another registration of the
	// member id.
	ls, err := lease.New(cfg.state, append([]lease.Option{lease.MemberTimeout(cfg.ttl), lease.Logger(cfg.logger)},
		cfg.leaseOpts...)...)
	p.AddErr("LeaseOptions", err)
	cps, err := mongostore.New(cfg.state)
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, client: client, handler: handler, batch: batch, leases: ls, cps: cps,
		dlq: deadletter.NewMongo(cfg.state, "dlq"), owned: map[int]int64{}, tried: map[int]bool{}, unsure: map[int]bool{},
		log: cfg.logger.With("group", cfg.name, "member", cfg.memberID),
		st:  &status{onChange: cfg.onState, waits: make(chan struct{}, 1)},
		records: &failureRecords{coll: cfg.state.Collection(FailuresCollection), stream: cfg.name, member: cfg.memberID,
			refresh: min(10*time.Second, max(cfg.ttl, time.Second))}}
	if client != nil && (handler != nil || batch != nil) && cfg.partitions >= 1 {
		_, err := g.newConsumer(nil, 0, g.consumerOptions(0, 0))
		var ce *ferry.ConfigError
		if errors.As(err, &ce) {
			for _, q := range ce.Problems {
				p.Add("ConsumerOptions", "%s", q)
			}
		} else if err != nil {
			p.AddErr("ConsumerOptions", err)
		}
	}
	if problems := p.List(); len(problems) > 0 {
		return nil, &ferry.ConfigError{Problems: problems}
	}
	g.st.s.State = Starting
	g.from = ferry.StartOf(cfg.consumer...).FromStream()
	return g, nil
}

// MemberID returns this member's id.
func (g *Group) MemberID() string { return g.cfg.memberID }

// Owned returns the partitions this member runs, with their epochs.
func (g *Group) Owned() map[int]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int]int64, len(g.owned))
	for p, e := range g.owned {
		out[p] = e
	}
	return out
}

// Status returns this member's view of its stream: its state, the run
// states of the partitions it owns, and why it failed, if it did.
func (g *Group) Status() Status { return g.st.get() }

// Run joins the group and consumes the partitions assigned to this member
// until ctx is cancelled; then it drains every partition, writes final
// checkpoints, releases its leases (so others take over at once; also a
// lease whose acquire it sent but never had an answer to), leaves, and
// returns nil.
//
// Run does not return on a failure: a partition that stops with one (see
// ferry.AsFailure: a changed definition, lost history under
// HistoryLostFail, a required image missing, ...) puts the stream into the
// Failed state on this member: every partition is handed off, the member
// leaves the group so the others take its partitions, the failure is
// recorded in the state store (Failures) and reported through Status and
// OnStateChange, and the member takes none of the stream's leases until it
// re-checks. A failure that can clear (Failure.Clears) is re-checked by
// joining again, after a backoff from 1 s doubling to 5 min; one that
// cannot stays until ctx ends (a restart with a new configuration) or
// until a tool that changed the stream's checkpoints asks the failed
// members to re-check (RequestRecheck: ferry position set, ferry reset).
// Transient problems (the state store unreachable, a partition stopping on
// a network error) are retried with backoff, partition by partition.
//
// Run returns an error only when this process cannot be a member at all:
// another live process is registered under its MemberID (an error
// matching lease.ErrDuplicateMember, wrapping a
// *lease.DuplicateMemberError). That process is not disturbed. A process
// restarted under the id of one that crashed is not refused: it waits,
// at most LeaseTTL after the crashed one's last heartbeat, for that
// registration to expire, and the crashed one's leases are taken over
// only once they expire, at a new epoch (see lease.Store.Join).
func (g *Group) Run(ctx context.Context) error {
	defer g.st.set(Stopped)
	g.st.set(Starting)
	recheck := backoff.New(time.Second, maxRecheck)
	if !g.prepare(ctx, recheck) {
		return nil
	}
	rejoin := backoff.New(100*time.Millisecond, 10*time.Second)
	ownRecord := true // the failure record under this member id is this process's
	defer func() {
		if ownRecord {
			g.clearFailureRecord()
		}
	}()
	for ctx.Err() == nil {
		g.st.set(Starting)
		member, err := g.leases.Join(ctx, g.cfg.name, g.cfg.memberID, nil)
		if errors.Is(err, lease.ErrDuplicateMember) {
			ownRecord = false
			g.log.Error("another live process is a member of the group under this member id: this one does not join "+
				"(the other keeps running); give every process its own member id", "err", err)
			g.st.update(func(s *Status) { s.LastError = err.Error() })
			return fmt.Errorf("group %s: %w; give every process its own MemberID, or leave it unset "+
				"(lease.DefaultMemberID is unique per process)", g.cfg.name, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			g.transient("join the group", err)
			backoff.Sleep(ctx, rejoin.Next())
			continue
		}
		g.transient("", nil)
		rejoin.Reset()
		err = g.session(ctx, member, recheck)
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = member.Leave(lctx)
		cancel()
		var sf *streamFailure
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &sf):
			if !g.failed(ctx, sf, recheck) {
				return nil
			}
		case err != nil:
			// The membership expired (the process was paused, the server
			// unreachable): every partition was given up; join again.
			g.log.Warn("membership lost; rejoining", "err", err)
			backoff.Sleep(ctx, rejoin.Next())
		}
	}
	return nil
}

// maxRecheck bounds the backoff between re-checks of a failed stream.
const maxRecheck = 5 * time.Minute

// prepare readies the state store before the first membership: the ledger
// and the failures' indexes, and the group's origin. Transient errors are
// retried with backoff; a failure (a start position that cannot be
// resolved) fails the stream. It reports false when Run must return.
func (g *Group) prepare(ctx context.Context, recheck *backoff.Backoff) bool {
	cfg := &g.cfg
	b := backoff.New(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := func() error {
			if cfg.mode != AtLeastOnce && cfg.ledgerStore == nil {
				l, err := ledger.New(ctx, cfg.state)
				if err != nil {
					return err
				}
				cfg.ledgerStore = l
			}
			if err := g.records.ensureIndex(ctx); err != nil {
				return fmt.Errorf("group: create the index of %s: %w", FailuresCollection, err)
			}
			return g.ready(ctx)
		}()
		if err == nil {
			g.transient("", nil)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if f, ok := ferry.AsFailure(err); ok {
			for g.failed(ctx, &streamFailure{partition: -1, failure: f}, recheck) {
				if err := g.ready(ctx); err == nil {
					return true
				}
			}
			return false
		}
		g.transient("prepare the state store", err)
		backoff.Sleep(ctx, b.Next())
	}
	return false
}

// ready gives the stream its origin (seedOrigin, when the consumers start
// now or at another stream's checkpoints) and resolves its partitioning
// (resolvePartitioning): what must hold before any partition runs. A
// failure of either fails the stream's start.
func (g *Group) ready(ctx context.Context) error {
	if start := ferry.StartOf(g.cfg.consumer...); start.IsNow() || start.FromStream() != "" {
		if err := g.seedOrigin(ctx, start); err != nil {
			return err
		}
	}
	return g.resolvePartitioning(ctx)
}

// transient records (and logs, when it changes) a transient problem; an
// empty what clears it.
func (g *Group) transient(what string, err error) {
	msg := ""
	if err != nil {
		msg = what + ": " + err.Error()
		g.warnPool(err)
	}
	prev := g.st.get().LastError
	g.st.update(func(s *Status) { s.LastError = msg })
	switch {
	case msg != "" && msg != prev:
		g.log.Warn("cannot "+what+"; retrying with backoff", "err", err)
	case msg == "" && prev != "":
		g.log.Info("recovered from: " + prev)
	}
}

// streamFailure is a partition's failure that failed the stream.
type streamFailure struct {
	partition int
	failure   ferry.Failure
}

func (e *streamFailure) Error() string { return e.failure.Detail }

// failed puts the stream into the Failed state: the session ended and
// released everything; the failure is recorded, logged once per new
// reason, and kept fresh in the state store. It waits for the re-check
// (true) or for ctx (false).
func (g *Group) failed(ctx context.Context, sf *streamFailure, recheck *backoff.Backoff) bool {
	f := sf.failure
	now := time.Now()
	prev := g.st.get()
	since := now
	if prev.Failure != nil && prev.Failure.Class == f.Class {
		since = prev.FailedSince
	}
	var wait time.Duration
	var retryAt time.Time
	if f.Clears {
		wait = recheck.Next()
		retryAt = now.Add(wait)
	}
	if prev.Failure == nil || prev.Failure.Class != f.Class || prev.Failure.Detail != f.Detail {
		recheckIn := "never by itself: a new configuration, or a position set or reset (RequestRecheck), ends it"
		if f.Clears {
			recheckIn = wait.Round(time.Millisecond).String()
		}
		attrs := []any{"class", f.Class}
		if sf.partition >= 0 { // -1: the stream's start failed, not a partition
			attrs = append(attrs, "partition", sf.partition)
		}
		g.log.Error("stream failed: its leases are released and this member takes none of them while failed",
			append(attrs, "err", f.Detail, "recheck_in", recheckIn)...)
	} else {
		g.log.Debug("stream still failed", "class", f.Class, "recheck_in", wait)
	}
	fail := func(s *Status) {
		s.State, s.Failure, s.FailedPartition, s.FailedSince, s.RetryAt = Failed, &f, sf.partition, since, retryAt
		s.Partitions, s.SinkErrors = nil, nil
	}
	// The record is written before Status (and OnStateChange) says Failed,
	// so that whoever sees the state finds the record too (as recovered
	// deletes it before Status reports the recovery).
	next := prev
	fail(&next)
	recheckNow := g.putFailureRecord(ctx, next)
	g.st.update(fail)
	if recheckNow {
		g.log.Info("re-checking the failed stream: its checkpoints were changed (ferry position set or reset)", "class", f.Class)
		return true
	}
	refresh := time.NewTicker(g.records.refresh)
	defer refresh.Stop()
	var timer <-chan time.Time
	if f.Clears {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer:
			g.log.Debug("re-checking the failed stream", "class", f.Class)
			return true
		case <-refresh.C:
			if g.putFailureRecord(ctx, g.st.get()) {
				g.log.Info("re-checking the failed stream: its checkpoints were changed (ferry position set or reset)", "class", f.Class)
				return true
			}
		}
	}
}

// recovered ends a failure once a re-check has run for the probation
// period without failing again. The failure record is deleted first, so
// that once Status reports the recovery, Failures no longer lists it.
func (g *Group) recovered(recheck *backoff.Backoff) {
	prev := g.st.get()
	if prev.Failure == nil {
		return
	}
	g.clearFailureRecord()
	g.st.update(func(s *Status) { s.Failure, s.FailedSince, s.RetryAt = nil, time.Time{}, time.Time{} })
	recheck.Reset()
	g.log.Info("stream recovered", "class", prev.Failure.Class, "failed_for", time.Since(prev.FailedSince).Round(time.Second))
}

// rechecking reports whether the member is re-checking a failed stream
// (its partition hand-offs are then logged at debug level only).
func (g *Group) rechecking() bool { return g.st.get().Failure != nil }

// putFailureRecord writes or refreshes the member's failure record from
// s. It reports whether a re-check was requested (RequestRecheck).
func (g *Group) putFailureRecord(ctx context.Context, s Status) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	recheck, err := g.records.put(wctx, s)
	if err != nil {
		g.transient("record the failure in the state store", err)
	}
	return recheck
}

func (g *Group) clearFailureRecord() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.records.clear(ctx)
}
