package group

import (
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/ledger"
)

// An Option configures a Group. Option functions only record their
// values: New applies the options in order (a later one overrides an
// earlier one) and then validates the result once, returning a
// *ferry.ConfigError that lists every problem, each naming its option and
// the fix; the options passed on with ConsumerOptions and LeaseOptions are
// checked there too. A nil option is a problem. Only this package makes
// Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

// Defaults of New.
const (
	DefaultLeaseTTL = 10 * time.Second
	// minLeaseTTL: a shorter lease leaves no time for a renewal's round
	// trip.
	minLeaseTTL = 100 * time.Millisecond
)

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
	interval    time.Duration // 0: ttl/4
	intervalSet bool
	logger      *slog.Logger
	leaseOpts   []lease.Option
	drain       time.Duration // explicit DrainTimeout; 0: the default (drainTimeout)
	drainSet    bool
	ledgerStore *ledger.Store // opened by Run (prepare)
	sweeper     func(scheme ferry.Partitioning, partition, partitions int) ferry.Sweeper
	onState     func(Status)
	// partitioning is group.Partitioning's ("": not set, resolved from
	// the stream's checkpoints by Run).
	partitioning ferry.Partitioning
}

func defaultConfig() config {
	return config{partitions: 1, ttl: DefaultLeaseTTL, mode: AtLeastOnce}
}

// DefaultDrainTimeout is the drain of a partition handed off or stopped,
// unless DrainTimeout says otherwise: 8 s, but at most half the lease TTL.
const DefaultDrainTimeout = 8 * time.Second

// drainTimeout is the drain every partition's consumer gets.
func (c *config) drainTimeout() time.Duration {
	if c.drainSet {
		return c.drain
	}
	return min(DefaultDrainTimeout, c.ttl/2)
}

// validate records every problem of the group's own options in p.
func (c *config) validate(p *optcheck.Problems) {
	if c.name == "" {
		p.Add("Name", "a group name is required (group.Name(\"orders\"))")
	}
	if c.partitions < 1 {
		p.Add("Partitions", "must be at least 1, got %d", c.partitions)
	}
	if c.drainSet && c.drain <= 0 {
		p.Add("DrainTimeout", "must be positive, got %v", c.drain)
	}
	if c.ttl < minLeaseTTL {
		p.Add("LeaseTTL", "must be at least %v, got %v", minLeaseTTL, c.ttl)
	}
	if c.state == nil {
		p.Add("StateDatabase", "a state database is required (group.StateDatabase(stateClient.Database(\"ferry\")), "+
			"on a client of its own: see the package doc, \"Operational notes\")")
	}
	switch c.mode {
	case AtLeastOnce, Idempotent, Transactional:
	default:
		p.Add("DeliveryMode", "%q is not a mode (use AtLeastOnce, Idempotent or Transactional)", c.mode)
	}
	switch c.partitioning {
	case "", ferry.HashRange, ferry.HashMod:
	default:
		p.Add("Partitioning", "%q is not a partitioning (use ferry.HashRange, %q, or ferry.HashMod, %q)", c.partitioning,
			ferry.HashRange, ferry.HashMod)
	}
	if c.intervalSet && c.interval <= 0 {
		p.Add("RebalanceInterval", "must be positive, got %v (leave it out for a quarter of the lease TTL)", c.interval)
	}
	seen := map[string]bool{}
	for _, name := range ferry.OptionNames(c.consumer...) {
		switch why, owned := setByGroup[name]; {
		case seen[name]:
		case owned:
			p.Add("ConsumerOptions", "%s: the group sets it (%s); leave it out of ConsumerOptions", name, why)
		case name == "WithSweeper" && c.sweeper != nil:
			p.Add("ConsumerOptions", "WithSweeper: group.Sweeper is set too, and would replace it; pass one "+
				"(group.Sweeper gives each partition a sweeper of its own)")
		}
		seen[name] = true
	}
}

// setByGroup is the consumer options the group sets for each partition
// itself, with where their values come from: passed through
// ConsumerOptions they are problems, not silently replaced.
var setByGroup = map[string]string{
	"Stream":       "group.Name names the group and its stream",
	"Partition":    "group.Partitions sets the count; each member runs the partitions whose leases it holds",
	"Epoch":        "each partition's lease epoch",
	"Checkpoints":  "the checkpoints are in StateDatabase, collection checkpoints",
	"DeadLetters":  "dead letters go to StateDatabase, collection dlq",
	"DrainTimeout": "use group.DrainTimeout",
	"LogStops":     "it reports its partitions' stops itself, once per state change",
	"WithPartitioning": "use group.Partitioning: every partition of the stream must use the same one, " +
		"which the group resolves once for all of them",
}

// Name names the group and its stream (required).
func Name(s string) Option { return option(func(c *config) { c.name = s }) }

// Partitions sets the partition count (default 1: one active consumer with
// hot standbys).
func Partitions(n int) Option { return option(func(c *config) { c.partitions = n }) }

// LeaseTTL sets the partition lease TTL (default 10s, at least 100ms). It
// is also the member timeout (a member silent for it is no longer live)
// unless LeaseOptions sets lease.MemberTimeout, so a crashed member's
// partitions move to the others within about the TTL: its leases expire,
// its membership lapses, and the next rebalance (a quarter of the TTL)
// claims them. After a graceful stop (cancel) they move at once.
func LeaseTTL(d time.Duration) Option { return option(func(c *config) { c.ttl = d }) }

// DrainTimeout sets how long a partition lets the handler calls in flight
// finish when it is handed off or the group stops (Run's context
// cancelled, as on SIGTERM); queued events are not started and failed ones
// not retried meanwhile: they are left for the next owner. Then handlers
// still running are cancelled (a webhook request is
// cut off), their events are not checkpointed, and the partition's next
// owner delivers them again. What the sink acknowledged meanwhile is still
// recorded (idempotent mode, within 2 s), then the final checkpoint is
// written and the lease released. Default DefaultDrainTimeout, but at most
// half the lease TTL; set, it is used as given. A partition's consumer
// returns within it plus ferry.DrainMargin (2 s), even when a handler
// ignores its cancelled context (see ferry.DrainMargin: that call is left
// running); keep it, plus those 2 s, inside the time your platform allows
// between SIGTERM and SIGKILL (Cloud Run: 10 s). It is the group's option:
// ferry.DrainTimeout in ConsumerOptions is refused.
func DrainTimeout(d time.Duration) Option {
	return option(func(c *config) { c.drain, c.drainSet = d, true })
}

// MemberID sets this member's id (default, and when id is empty,
// lease.DefaultMemberID()).
func MemberID(id string) Option { return option(func(c *config) { c.memberID = id }) }

// StateDatabase sets where leases, members, checkpoints, the ledger and
// dead letters live (required). Its client carries all of that traffic,
// and the transactions of the Transactional mode; give it a client of its
// own rather than a database of New's client, whose pooled connections
// the partitions' change streams hold while they wait for events (see
// the package doc, "Operational notes").
func StateDatabase(db *mongo.Database) Option { return option(func(c *config) { c.state = db }) }

// ConsumerOptions passes options to every partition's consumer (scope,
// pipeline, retries, ...); New checks them as ferry.NewConsumer does. The
// group sets Stream (group.Name), Partition (group.Partitions and the
// leases), Epoch, Checkpoints, DeadLetters (StateDatabase), DrainTimeout
// (group.DrainTimeout) and LogStops itself: New reports each of them
// passed here as a problem ("ConsumerOptions: DeadLetters: the group sets
// it ..."), as it does WithSweeper beside group.Sweeper. WithHooks adds
// to the group's own hooks.
func ConsumerOptions(opts ...ferry.Option) Option {
	return option(func(c *config) { c.consumer = append(c.consumer, opts...) })
}

// Sweeper sets the sweeper of each partition's backfill (see
// ferry.WithSweeper and ferry.OnHistoryLost): f is called with the
// stream's partitioning, the partition and the partition count each time
// this member starts a partition. A backfill scans only its own
// partition, so its sweep must only remove that partition's documents, as
// the partitioning splits them (a stream created before
// ferry.HashRange keeps ferry.HashMod: see Partitioning); a sweeper
// passed through ConsumerOptions(ferry.WithSweeper(...)) is shared by
// every partition, does not know which one is sweeping, and (with more
// than one partition) would delete the documents other partitions wrote
// before the scan began. The group checks that the lease is still
// provably valid before each sweep. mongoproj.Sink.SweepPartition fits.
func Sweeper(f func(scheme ferry.Partitioning, partition, partitions int) ferry.Sweeper) Option {
	return option(func(c *config) { c.sweeper = f })
}

// Partitioning sets how the stream's documents are split among its
// partitions (see ferry.Partitioning and ferry.WithPartitioning; it
// matters only with more than one partition). Left unset, Run resolves it
// once from the stream's checkpoints before it runs any partition
// (ferry.ResolvePartitioning): ferry.HashRange for a new stream,
// ferry.HashMod for one that checkpointed under it (created before
// HashRange), logged once; checkpoints of both fail the stream
// (identity-changed). Every partition's consumer then gets the same one,
// and so does each partition's sweeper (Sweeper). Set to HashRange on a
// stream that checkpointed under HashMod, its partitions fail with
// identity-changed naming the partitioning. ferry.WithPartitioning in
// ConsumerOptions is refused: the group sets it.
func Partitioning(p ferry.Partitioning) Option {
	return option(func(c *config) { c.partitioning = p })
}

// DeliveryMode sets the delivery mode (default AtLeastOnce).
func DeliveryMode(m Mode) Option { return option(func(c *config) { c.mode = m }) }

// OnAssigned, OnRevoked and OnLost are called when this member starts a
// partition, hands one off cooperatively, or loses one; never concurrently.
// A nil function is not called.
func OnAssigned(f func(partition int, epoch int64)) Option {
	return option(func(c *config) { c.onAssigned = f })
}

// OnRevoked: see OnAssigned.
func OnRevoked(f func(partition int)) Option { return option(func(c *config) { c.onRevoked = f }) }

// OnLost: see OnAssigned.
func OnLost(f func(partition int, err error)) Option {
	return option(func(c *config) { c.onLost = f })
}

// RebalanceInterval sets how often the member recomputes the assignment
// (default a quarter of the lease TTL). It must be positive.
func RebalanceInterval(d time.Duration) Option {
	return option(func(c *config) { c.interval, c.intervalSet = d, true })
}

// Logger sets the logger (default, and when l is nil: discard).
func Logger(l *slog.Logger) Option { return option(func(c *config) { c.logger = l }) }

// OnStateChange is called with the member's Status each time its state
// changes (Starting, Running, WaitingForSink, Failed, Draining, Stopped),
// from the goroutine that changed it; it must not block.
func OnStateChange(f func(Status)) Option { return option(func(c *config) { c.onState = f }) }

// LeaseOptions passes options to the lease store (member timeout,
// heartbeat interval, clock); New checks them as lease.New does. The
// member timeout defaults to the lease TTL.
func LeaseOptions(opts ...lease.Option) Option {
	return option(func(c *config) { c.leaseOpts = append(c.leaseOpts, opts...) })
}
