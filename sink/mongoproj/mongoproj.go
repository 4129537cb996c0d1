package mongoproj

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/mongoname"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// Field is the hidden field every document the sink writes carries.
const Field = "_ferry"

// ErrInvalidOption is wrapped by every error New returns about its
// arguments and options.
var ErrInvalidOption = errors.New("mongoproj: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order and then validates the result once; its
// error matches ErrInvalidOption and lists every problem, each naming its
// option. A nil option is a problem. Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	index   bool
	fault   func(*ferry.Event) error // tests: fail an event before writing it
	noWrite bool                     // tests: build every write but skip the update (a benchmark's baseline)
}

// NoIndex stops Connect from creating the index on _ferry.at that Sweep
// and PurgeTombstones use.
func NoIndex() Option { return option(func(c *config) { c.index = false }) }

// Sink maintains a projection of the source in a target collection. It is
// safe for concurrent use.
type Sink struct {
	target    *mongo.Collection
	cfg       config
	connected atomic.Bool
}

var _ sink.Sink = (*Sink)(nil)

// New returns a sink writing to target. It does not connect: Connect does.
func New(target *mongo.Collection, opts ...Option) (*Sink, error) {
	cfg := config{index: true}
	var p optcheck.Problems
	if target == nil {
		p.Add("target", "nil collection: pass the collection the projection is written to")
	} else {
		if db := target.Database(); db == nil {
			p.Add("target", "the collection has no database")
		} else {
			p.AddErr("target", mongoname.Database(db.Name()))
		}
		p.AddErr("target", mongoname.Collection(target.Name()))
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	return &Sink{target: target, cfg: cfg}, nil
}

// Target returns the target collection.
func (s *Sink) Target() *mongo.Collection { return s.target }

// Connect checks that the target's server answers and creates the index on
// _ferry.at (unless NoIndex).
func (s *Sink) Connect(ctx context.Context) error {
	db := s.target.Database()
	if err := db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		return fmt.Errorf("mongoproj: connect to %s: %w", s.ns(), err)
	}
	if s.cfg.index {
		_, err := s.target.Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys:    bson.D{{Key: Field + ".at", Value: 1}},
			Options: options.Index().SetName("ferry_at"),
		})
		if err != nil {
			return fmt.Errorf("mongoproj: create the %s.at index on %s: %w", Field, s.ns(), err)
		}
	}
	s.connected.Store(true)
	return nil
}

// Close stops the sink; it does not disconnect the target's client, which
// the caller owns.
func (s *Sink) Close(context.Context) error {
	s.connected.Store(false)
	return nil
}

// Write applies a batch in order (see the package doc for what each
// operation does): one event with one update command, more with one
// ordered bulk write.
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if !s.connected.Load() {
		return sink.ErrNotConnected
	}
	if len(batch) == 1 {
		return sink.EachInOrder(ctx, batch, s.apply, nil)
	}
	return s.writeBatch(ctx, batch)
}

// Sweep deletes the target documents not written since since: after a
// backfill scan that began at since, those are the documents deleted from
// the source while its history was lost, stale tombstones, and documents
// the sink never wrote. It is a ferry.Sweeper for an unpartitioned stream
// (one consumer, or a group of one partition): a partitioned consumer's
// backfill scans only its partition, and Sweep would also delete every
// other partition's documents written before that scan began. Partitioned
// streams use SweepPartition.
func (s *Sink) Sweep(ctx context.Context, since time.Time) error {
	return s.sweep(ctx, since, "", 0, 1)
}

var _ ferry.Sweeper = (*Sink)(nil).Sweep

// SweepPartition returns the Sweeper for partition p of n under
// partitioning scheme: like Sweep, but it deletes only the documents whose
// _id falls in that partition (the same filter, ferry.PartitionMatch, the
// stream and the backfill scan use), so one partition's backfill leaves
// the others' documents alone. The scheme must be the one the stream runs
// with (a stream created before ferry.HashRange keeps ferry.HashMod); its
// signature fits group.Sweeper, which passes the stream's:
//
//	group.NewBatch(client, sink.BatchHandler(s), group.Partitions(8), group.Sweeper(s.SweepPartition), ...)
func (s *Sink) SweepPartition(scheme ferry.Partitioning, p, n int) ferry.Sweeper {
	return func(ctx context.Context, since time.Time) error { return s.sweep(ctx, since, scheme, p, n) }
}

// sourceID is the source document's _id of a target document: its _id, or
// _id._id when the target _id is the whole documentKey (stamp key: true).
var sourceID = bson.D{{Key: "$cond", Value: bson.A{
	bson.D{{Key: "$eq", Value: bson.A{"$" + Field + ".key", true}}}, "$_id._id", "$_id"}}}

func (s *Sink) sweep(ctx context.Context, since time.Time, scheme ferry.Partitioning, p, n int) error {
	if !s.connected.Load() {
		return sink.ErrNotConnected
	}
	filter := bson.D{{Key: Field + ".at", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: since}}}}}}
	if n > 1 {
		if p < 0 || p >= n {
			return fmt.Errorf("mongoproj: sweep %s: partition %d is out of range [0, %d)", s.ns(), p, n)
		}
		switch scheme {
		case ferry.HashRange, ferry.HashMod:
		default:
			return fmt.Errorf("mongoproj: sweep %s: %q is not a partitioning (ferry.HashRange or ferry.HashMod)", s.ns(), scheme)
		}
		filter = append(filter, bson.E{Key: "$expr", Value: ferry.PartitionMatch(scheme, sourceID, p, n)})
	}
	_, err := s.target.DeleteMany(ctx, filter)
	if err != nil {
		if n > 1 {
			return fmt.Errorf("mongoproj: sweep partition %d of %d (%s) of %s: %w", p, n, scheme, s.ns(), err)
		}
		return fmt.Errorf("mongoproj: sweep %s: %w", s.ns(), err)
	}
	return nil
}

// PurgeTombstones deletes the tombstones written before before and returns
// how many. Purge only tombstones older than the consumer's checkpoint (no
// event before them can be replayed any more); a purged tombstone no longer
// stops an older replayed event from resurrecting its document.
func (s *Sink) PurgeTombstones(ctx context.Context, before time.Time) (int64, error) {
	if !s.connected.Load() {
		return 0, sink.ErrNotConnected
	}
	res, err := s.target.DeleteMany(ctx, bson.D{
		{Key: Field + ".del", Value: true},
		{Key: Field + ".at", Value: bson.D{{Key: "$lt", Value: before}}},
	})
	if err != nil {
		return 0, fmt.Errorf("mongoproj: purge tombstones of %s: %w", s.ns(), err)
	}
	return res.DeletedCount, nil
}

// Live returns the filter that excludes tombstones: AND it into every read
// of the projection.
func Live() bson.D {
	return bson.D{{Key: Field + ".del", Value: bson.D{{Key: "$ne", Value: true}}}}
}

// Hidden returns the projection that hides the sink's bookkeeping field.
func Hidden() bson.D { return bson.D{{Key: Field, Value: 0}} }

func (s *Sink) ns() string {
	return s.target.Database().Name() + "." + s.target.Name()
}
