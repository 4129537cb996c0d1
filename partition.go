package ferry

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/ferry-io/ferry/checkpoint"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// partitionExpr is the aggregation expression (for $expr) that is true
// when {$toHashedIndexKey: value} falls in this consumer's partition,
// under the partitioning in effect (see PartitionMatch).
func (c *Consumer) partitionExpr(value any) bson.D {
	return PartitionMatch(c.Partitioning(), value, c.cfg.partition, c.cfg.partitions)
}

// partitionRange is the inclusive range of hashed-_id values this
// consumer's partition holds: PartitionRange under HashRange, the whole
// int64 space with one partition; ok is false under HashMod, where a
// partition is no range.
func (c *Consumer) partitionRange() (lo, hi int64, ok bool) {
	switch {
	case c.cfg.partitions <= 1:
		return math.MinInt64, math.MaxInt64, true
	case c.Partitioning() == HashMod:
		return 0, 0, false
	}
	lo, hi = PartitionRange(c.cfg.partition, c.cfg.partitions)
	return lo, hi, true
}

// partitionOf reports whether a hashed _id belongs to this consumer's
// partition, under the partitioning in effect.
func (c *Consumer) partitionOf(hash int64) bool {
	return InPartition(c.Partitioning(), hash, c.cfg.partition, c.cfg.partitions)
}

// ResolvePartitioning returns the partitioning the consumers opts describe
// run with, given the stream's checkpoints in store: the one
// WithPartitioning sets; when none is set and there is more than one
// partition, HashMod when a checkpoint of the stream was written under its
// definition with HashMod (adopted is then true: a stream created before
// HashRange keeps its partitioning), else HashRange. opts must name the
// stream (Stream) and the partition count (Partition); the rest of the
// definition (scope, pipeline, options) decides the digests compared, and
// the stores and policies in opts play no part. Checkpoints written under
// both partitionings are an error matching ErrIdentityChanged (a failure,
// FailIdentityChanged). A corrupt checkpoint record is skipped.
//
// A Run does the same for its own consumer. A consumer group resolves it
// once for its partitions and passes the result to each (WithPartitioning),
// so that they agree; tools that open the stream as its consumers do
// (reconciliation, a status page's digest) use it too.
func ResolvePartitioning(ctx context.Context, store checkpoint.Store, opts ...Option) (p Partitioning, adopted bool, err error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	def, adopted, err := cfg.resolvePartitioning(ctx, store)
	if err != nil {
		return "", false, err
	}
	return def.scheme, adopted, nil
}

// resolvePartitioning returns the definition the stream runs under, given
// its checkpoints in store (see ResolvePartitioning).
func (c *config) resolvePartitioning(ctx context.Context, store checkpoint.Store) (*streamDef, bool, error) {
	cur, err := c.identity(c.scheme())
	if err != nil || c.partitioning != "" || c.partitions <= 1 {
		return cur, false, err
	}
	mod, err := c.identity(HashMod)
	if err != nil {
		return nil, false, err
	}
	if store == nil {
		return nil, false, fmt.Errorf("ferry: stream %q: no checkpoint store to find its partitioning in", c.name)
	}
	cps, err := storedCheckpoints(ctx, store, c.name, c.partitions)
	if err != nil {
		return nil, false, fmt.Errorf("ferry: stream %q: read its checkpoints to find its partitioning: %w", c.name, err)
	}
	var modParts, rangeParts []int
	for _, cp := range cps {
		switch cp.Identity {
		case mod.identity:
			modParts = append(modParts, cp.Partition)
		case cur.identity:
			rangeParts = append(rangeParts, cp.Partition)
		}
	}
	switch {
	case len(modParts) > 0 && len(rangeParts) > 0:
		detail := fmt.Sprintf("stream %q: its checkpoints were written under two partitionings (partitioning was %s for partitions %v, "+
			"%s for partitions %v), and every partition of a stream must use one", c.name, HashMod, modParts, HashRange, rangeParts)
		return nil, false, &stopError{kind: ErrIdentityChanged, detail: detail, msg: "ferry: " + detail + ". " +
			"Choose one: give the stream a new name started where this one stopped (StartAt(StartAtCheckpointsOf(store, oldName))), " +
			"or set the partitioning (WithPartitioning) and set every partition's position again (ferry position set)"}
	case len(modParts) > 0:
		return mod, true, nil
	}
	return cur, false, nil
}

// storedCheckpoints returns the stream's checkpoints: List's, or, when a
// record of the stream is corrupt, every partition's that Load can read.
func storedCheckpoints(ctx context.Context, store checkpoint.Store, name string, n int) ([]checkpoint.Checkpoint, error) {
	cps, err := store.List(ctx, name)
	if !errors.Is(err, checkpoint.ErrCorrupt) {
		return cps, err
	}
	cps = cps[:0]
	for p := range n {
		cp, err := store.Load(ctx, name, p)
		switch {
		case err == nil:
			cps = append(cps, cp)
		case errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, checkpoint.ErrCorrupt):
		default:
			return nil, err
		}
	}
	return cps, nil
}

// adoptPartitioning sets the definition this Run uses from the stream's
// checkpoints (see WithPartitioning), and logs once per Consumer that the
// stream keeps HashMod.
func (c *Consumer) adoptPartitioning(ctx context.Context) error {
	def, adopted, err := c.cfg.resolvePartitioning(ctx, c.cfg.store)
	if err != nil {
		return err
	}
	c.def.Store(def)
	if adopted && c.keptMod.CompareAndSwap(false, true) {
		c.log.Info(HashModNote(c.cfg.name, c.cfg.partitions))
	}
	return nil
}

// HashModNote is the line logged (at Info) when a stream keeps HashMod
// because its checkpoints were written under it: what it costs and how to
// move to HashRange without losing a change.
func HashModNote(stream string, partitions int) string {
	return fmt.Sprintf("stream %q keeps hash-mod partitioning: its checkpoints were written under it (before Ferry partitioned by "+
		"ranges of the hashed _id). A snapshot of it (start_at: backfill, on_history_lost: backfill) reads every document at the "+
		"server %d times, once per partition, where hash-range reads each once. To move it to hash-range without losing a "+
		"change, give it a new name with source.start_at: {checkpoints_of: %s} (ferry.StartAtCheckpointsOf) and restart the members",
		stream, partitions, stream)
}
