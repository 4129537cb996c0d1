package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
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
	// Transactional: ledger insert, a lease-epoch check and the handler's
	// own writes (through the context it is given) in one MongoDB
	// transaction: exactly-once effects in the state store's cluster.
	Transactional Mode = "transactional"
)

// ErrLeaseLost is returned to a handler call made after the partition's
// lease could no longer be proven valid: the effect must not happen.
var ErrLeaseLost = errors.New("group: partition lease lost")

// ErrEpochChanged aborts a transactional effect whose lease epoch is no
// longer current (another member took the partition over).
var ErrEpochChanged = errors.New("group: lease epoch changed")

type config struct {
	name        string
	partitions  int
	ttl         time.Duration
	memberID    string
	state       *mongo.Database
	consumer    []ferry.Option
	mode        Mode
	onAssigned  func(partition int, epoch int64)
	onRevoked   func(partition int)
	onLost      func(partition int, err error)
	interval    time.Duration
	logger      *slog.Logger
	leaseOpts   []lease.Option
	drain       time.Duration
	ledgerStore *ledger.Store
	sweeper     func(partition, partitions int) ferry.Sweeper
}

// Option configures a Group.
type Option func(*config)

// Name names the group and its stream (required).
func Name(s string) Option { return func(c *config) { c.name = s } }

// Partitions sets the partition count (default 1: one active consumer with
// hot standbys).
func Partitions(n int) Option { return func(c *config) { c.partitions = n } }

// LeaseTTL sets the partition lease TTL (default 10s).
func LeaseTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// MemberID sets this member's id (default lease.DefaultMemberID()).
func MemberID(id string) Option { return func(c *config) { c.memberID = id } }

// StateDatabase sets where leases, members, checkpoints, the ledger and
// dead letters live (required).
func StateDatabase(db *mongo.Database) Option { return func(c *config) { c.state = db } }

// Consumer passes options to every partition's consumer (scope, pipeline,
// retries, ...). The group sets Stream, Partition, Epoch, Checkpoints and
// DeadLetters itself.
func Consumer(opts ...ferry.Option) Option {
	return func(c *config) { c.consumer = append(c.consumer, opts...) }
}

// Sweeper sets the sweeper of each partition's backfill (see
// ferry.WithSweeper and ferry.OnHistoryLost): f is called with the
// partition and the partition count each time this member starts a
// partition. A backfill scans only its own partition, so its sweep must
// only remove that partition's documents; a sweeper passed through
// Consumer(ferry.WithSweeper(...)) is shared by every partition, does not
// know which one is sweeping, and (with more than one partition) would
// delete the documents other partitions wrote before the scan began.
// The group checks that the lease is still provably valid before each
// sweep. mongoproj.Sink.SweepPartition fits.
func Sweeper(f func(partition, partitions int) ferry.Sweeper) Option {
	return func(c *config) { c.sweeper = f }
}

// DeliveryMode sets the delivery mode (default AtLeastOnce).
func DeliveryMode(m Mode) Option { return func(c *config) { c.mode = m } }

// OnAssigned, OnRevoked and OnLost are called when this member starts a
// partition, hands one off cooperatively, or loses one; never concurrently.
func OnAssigned(f func(partition int, epoch int64)) Option {
	return func(c *config) { c.onAssigned = f }
}

// OnRevoked: see OnAssigned.
func OnRevoked(f func(partition int)) Option { return func(c *config) { c.onRevoked = f } }

// OnLost: see OnAssigned.
func OnLost(f func(partition int, err error)) Option { return func(c *config) { c.onLost = f } }

// RebalanceInterval sets how often the member recomputes the assignment
// (default a third of the lease TTL).
func RebalanceInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// Logger sets the logger (default: discard).
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// LeaseOptions passes options to the lease store (member timeout,
// heartbeat interval, clock).
func LeaseOptions(opts ...lease.Option) Option {
	return func(c *config) { c.leaseOpts = append(c.leaseOpts, opts...) }
}

// Group is one member of a consumer group.
type Group struct {
	cfg     config
	client  *mongo.Client
	handler ferry.Handler
	leases  *lease.Store
	cps     checkpoint.Store
	dlq     deadletter.Store
	log     *slog.Logger

	mu    sync.Mutex
	owned map[int]int64 // partition → epoch, for Owned

	ledgerDuplicates atomic.Int64
}

// LedgerDuplicates returns how many events the ledger recognised as
// already applied (replays absorbed) in the idempotent and transactional
// modes.
func (g *Group) LedgerDuplicates() int64 { return g.ledgerDuplicates.Load() }

// LeaseRenewFailures returns how many lease renewals failed.
func (g *Group) LeaseRenewFailures() int64 { return g.leases.RenewFailures() }

// New checks the options and returns a group member. Run joins the group.
func New(client *mongo.Client, handler ferry.Handler, opts ...Option) (*Group, error) {
	cfg := config{partitions: 1, ttl: 10 * time.Second, mode: AtLeastOnce, drain: 8 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	var problems []string
	if cfg.name == "" {
		problems = append(problems, "Name: a group name is required")
	}
	if cfg.partitions < 1 {
		problems = append(problems, fmt.Sprintf("Partitions: must be at least 1, got %d", cfg.partitions))
	}
	if cfg.ttl < time.Second/10 {
		problems = append(problems, fmt.Sprintf("LeaseTTL: must be at least 100ms, got %v", cfg.ttl))
	}
	if cfg.state == nil {
		problems = append(problems, "StateDatabase: a state database is required")
	}
	switch cfg.mode {
	case AtLeastOnce, Idempotent, Transactional:
	default:
		problems = append(problems, fmt.Sprintf("DeliveryMode: %q is not a mode (at-least-once, idempotent, transactional)", cfg.mode))
	}
	if client == nil || handler == nil {
		problems = append(problems, "client and handler are required")
	}
	if len(problems) > 0 {
		return nil, &ferry.ConfigError{Problems: problems}
	}
	if cfg.memberID == "" {
		cfg.memberID = lease.DefaultMemberID()
	}
	if cfg.interval == 0 {
		cfg.interval = cfg.ttl / 3
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ls, err := lease.New(cfg.state, cfg.leaseOpts...)
	if err != nil {
		return nil, err
	}
	cps, err := mongostore.New(cfg.state)
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, client: client, handler: handler, leases: ls, cps: cps,
		dlq: deadletter.NewMongo(cfg.state, "dlq"), owned: map[int]int64{},
		log: cfg.logger.With("group", cfg.name, "member", cfg.memberID)}
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

// running is one partition this member consumes.
type running struct {
	held   *lease.Held
	cancel context.CancelFunc
	done   chan error // Run's result
}

// Run joins the group and consumes the partitions assigned to this member
// until ctx is cancelled; then it drains every partition, writes final
// checkpoints, releases its leases (so others take over at once) and leaves.
func (g *Group) Run(ctx context.Context) error {
	cfg := &g.cfg
	if cfg.mode != AtLeastOnce {
		l, err := ledger.New(ctx, cfg.state)
		if err != nil {
			return err
		}
		cfg.ledgerStore = l
	}
	if ferry.StartOf(cfg.consumer...).IsNow() {
		if err := g.seedOrigin(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	for {
		member, err := g.leases.Join(ctx, cfg.name, cfg.memberID, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("group: join %s: %w", cfg.name, err)
		}
		err = g.session(ctx, member)
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = member.Leave(lctx)
		cancel()
		if ctx.Err() != nil || err == nil {
			return nil
		}
		// The membership expired (the process was paused, the server
		// unreachable): every partition was given up; join again.
		g.log.Warn("membership lost; rejoining", "err", err)
	}
}

// session runs one membership: it returns nil when ctx ends (after a
// graceful hand-off of every partition) and an error when the membership is
// lost (after giving every partition up as lost).
func (g *Group) session(ctx context.Context, member *lease.Member) error {
	cfg := &g.cfg
	runs := map[int]*running{}
	ended := make(chan int, cfg.partitions)
	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	for {
		g.reconcile(ctx, runs, ended)
		select {
		case <-ctx.Done():
			g.stopAll(runs)
			return nil
		case <-member.Done():
			err := fmt.Errorf("group: membership lost: %w", member.Err())
			for p, run := range runs {
				run.cancel()
				<-run.done
				delete(runs, p)
				g.mu.Lock()
				delete(g.owned, p)
				g.mu.Unlock()
				_ = run.held.Release(context.Background())
				if cfg.onLost != nil {
					cfg.onLost(p, err)
				}
			}
			return err
		case p := <-ended:
			g.finish(runs, p)
		case <-tick.C:
		}
	}
}

// reconcile moves the member towards the target assignment.
func (g *Group) reconcile(ctx context.Context, runs map[int]*running, ended chan<- int) {
	cfg := &g.cfg
	members, err := g.leases.Members(ctx, cfg.name)
	if err != nil {
		g.log.Warn("list members", "err", err)
		return
	}
	leases, err := g.leases.List(ctx, cfg.name)
	if err != nil {
		g.log.Warn("list leases", "err", err)
		return
	}
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	current := map[int]string{}
	for _, l := range leases {
		if l.Owner != "" && !l.Expired {
			current[l.Partition] = l.Owner
		}
	}
	target := Assign(ids, cfg.partitions, current)
	me := cfg.memberID
	// Hand off what is no longer ours.
	for p, run := range runs {
		if target[p] != me {
			g.revoke(runs, p, run)
		}
	}
	// Claim what is ours and free (its previous owner released it or it
	// expired).
	for p := 0; p < cfg.partitions; p++ {
		if target[p] != me || runs[p] != nil {
			continue
		}
		if owner := current[p]; owner != "" && owner != me {
			continue // the previous owner is still handing it off
		}
		g.start(ctx, runs, p, ended)
	}
}

func (g *Group) start(ctx context.Context, runs map[int]*running, p int, ended chan<- int) {
	cfg := &g.cfg
	held, err := g.leases.Hold(ctx, cfg.name, p, cfg.memberID, cfg.ttl)
	if err != nil {
		if !errors.Is(err, lease.ErrHeld) && ctx.Err() == nil {
			g.log.Warn("acquire lease", "partition", p, "err", err)
		}
		return
	}
	epoch := held.Epoch()
	opts := append([]ferry.Option{}, cfg.consumer...)
	opts = append(opts, ferry.Stream(cfg.name), ferry.Partition(p, cfg.partitions), ferry.Epoch(epoch),
		ferry.Checkpoints(g.cps), ferry.DeadLetters(g.dlq), ferry.DrainTimeout(min(cfg.drain, cfg.ttl/2)))
	if cfg.sweeper != nil {
		if sweep := cfg.sweeper(p, cfg.partitions); sweep != nil {
			opts = append(opts, ferry.WithSweeper(func(ctx context.Context, since time.Time) error {
				if !held.Valid() {
					return ferry.StopPartition(ErrLeaseLost)
				}
				return sweep(ctx, since)
			}))
		}
	}
	c, err := ferry.NewConsumer(g.client, g.wrap(held, p), opts...)
	if err != nil {
		g.log.Error("consumer", "partition", p, "err", err)
		_ = held.Release(context.WithoutCancel(ctx))
		return
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &running{held: held, cancel: cancel, done: make(chan error, 1)}
	runs[p] = run
	go func() {
		err := c.Run(cctx)
		run.done <- err
		ended <- p
	}()
	go func() {
		select {
		case <-held.Done():
			cancel() // lost: stop at once
		case <-cctx.Done():
		}
	}()
	g.mu.Lock()
	g.owned[p] = epoch
	g.mu.Unlock()
	g.log.Info("partition assigned", "partition", p, "epoch", epoch)
	if cfg.onAssigned != nil {
		cfg.onAssigned(p, epoch)
	}
}

// revoke hands a partition off: stop reading, drain, final checkpoint,
// release the lease. A partition whose lease turns out lost meanwhile is
// reported as lost, not revoked.
func (g *Group) revoke(runs map[int]*running, p int, run *running) {
	valid := run.held.Valid()
	run.cancel()
	err := <-run.done
	delete(runs, p)
	g.mu.Lock()
	delete(g.owned, p)
	g.mu.Unlock()
	if lost := run.held.Err(); lost != nil || !valid {
		if lost == nil {
			lost = fmt.Errorf("%w: lease could no longer be proven valid", lease.ErrLost)
		}
		_ = run.held.Release(context.Background())
		g.log.Warn("partition lost", "partition", p, "err", lost)
		if g.cfg.onLost != nil {
			g.cfg.onLost(p, lost)
		}
		return
	}
	_ = run.held.Release(context.Background())
	g.log.Info("partition revoked", "partition", p, "err", err)
	if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(p)
	}
}

// finish handles a partition whose consumer stopped by itself (lease lost,
// fenced, a stop condition).
func (g *Group) finish(runs map[int]*running, p int) {
	run := runs[p]
	if run == nil {
		return
	}
	var err error
	select {
	case err = <-run.done:
	default:
		return
	}
	delete(runs, p)
	g.mu.Lock()
	delete(g.owned, p)
	g.mu.Unlock()
	lost := run.held.Err()
	_ = run.held.Release(context.Background())
	if lost == nil {
		lost = err
	}
	g.log.Warn("partition stopped", "partition", p, "err", lost)
	if g.cfg.onLost != nil {
		g.cfg.onLost(p, lost)
	}
}

func (g *Group) stopAll(runs map[int]*running) {
	for _, run := range runs {
		run.cancel()
	}
	for p, run := range runs {
		err := <-run.done
		run.done <- err
		_ = run.held.Release(context.Background())
		delete(runs, p)
	}
	g.mu.Lock()
	clear(g.owned)
	g.mu.Unlock()
}

// wrap applies the delivery mode around the user's handler.
func (g *Group) wrap(held *lease.Held, p int) ferry.Handler {
	cfg := &g.cfg
	h := g.handler
	switch cfg.mode {
	case Idempotent:
		return func(ctx context.Context, ev *ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			seen, err := cfg.ledgerStore.Seen(ctx, cfg.name, ev.ID())
			if err != nil {
				return err
			}
			if seen {
				g.ledgerDuplicates.Add(1)
				return nil // applied before (a replay)
			}
			if err := h(ctx, ev); err != nil {
				return err
			}
			return cfg.ledgerStore.Record(ctx, cfg.name, ev.ID(), p, ev.Epoch)
		}
	case Transactional:
		leases := g.leases.LeasesCollection()
		return func(ctx context.Context, ev *ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			return ledger.RunTransaction(ctx, g.client, func(sctx context.Context) error {
				inserted, err := cfg.ledgerStore.RecordNew(sctx, cfg.name, ev.ID(), p, ev.Epoch)
				if err != nil {
					return err
				}
				if !inserted {
					g.ledgerDuplicates.Add(1)
					return nil // a duplicate: applied before, no effect
				}
				// Fencing inside the transaction: the lease must still
				// carry our epoch, or another member took over.
				var l struct {
					Owner string `bson:"owner"`
					Epoch int64  `bson:"epoch"`
				}
				err = leases.FindOne(sctx, bson.D{{Key: "group", Value: cfg.name}, {Key: "partition", Value: p}}).Decode(&l)
				if err != nil {
					return err
				}
				if l.Owner != cfg.memberID || l.Epoch != ev.Epoch {
					return ferry.StopPartition(fmt.Errorf("%w: partition %d is now epoch %d of %q, not %d", ErrEpochChanged, p, l.Epoch, l.Owner, ev.Epoch))
				}
				return h(sctx, ev)
			})
		}
	}
	return func(ctx context.Context, ev *ferry.Event) error {
		if !held.Valid() {
			return ferry.StopPartition(ErrLeaseLost)
		}
		return h(ctx, ev)
	}
}
