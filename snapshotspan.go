package ferry

import (
	"context"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Hashed-range snapshots through a mongos.
//
// On a replica set a chunk is the first documents of the partition's
// hashed range after where the last one ended: find with hint {_id:
// "hashed"}, min, max and a limit returns them in hashed order, and the
// chunk ends at its last document's hashed value. A mongos does not keep
// that order. It sends the find, min and max included, to every shard
// holding chunks of a sharded collection; each shard reads its own part of
// the range in hashed order, and mongos, given no sort (and no sort can
// name the hashed value), returns their documents in whatever order they
// arrive, then applies the limit (cluster_find.cpp: the limit and sort
// are the router's, min and max are passed through). A chunk cut at its
// last hashed value would skip the other shards' documents below it.
//
// So through a mongos a chunk is a span [from, to) of the hashed range,
// read whole: find with min {_id: from}, max {_id: to} and a limit of
// twice the chunk size. Fewer documents than the limit is the whole span,
// in any order, and the next chunk starts at to. The limit reached (or a
// reply cut at 16 MiB) means the span was too wide: it is narrowed and
// read again. Hashed values are uniform, so the first span's width is the
// chunk size's share of the collection's estimated count, and each span
// after is scaled by what the last one held. Each shard still examines
// only the documents of the span (and each document once, but for the
// rare span read again), and memory holds at most twice a chunk.

// readSnapshotChunk reads the partition's next chunk of ns at cluster time
// at: a span of the hashed range (readSpan) in hashed mode through a
// mongos, else readChunk.
func (r *runner) readSnapshotChunk(ctx context.Context, ns Namespace, rec *snapshotRecord, at bson.Timestamp) (*chunk, error) {
	if rec.Mode == SnapshotByHashedIndex {
		mongos, err := r.viaMongos(ctx)
		if err != nil {
			return nil, err
		}
		if mongos {
			return r.readSpan(ctx, ns, rec, at)
		}
	}
	return r.readChunk(ctx, ns, rec, at)
}

// viaMongos reports whether the client talks to a mongos (hello's msg
// "isdbgrid"), asked once per partition.
func (r *runner) viaMongos(ctx context.Context) (bool, error) {
	if r.snap.span.mongos == 0 {
		var hello struct {
			Msg string `bson:"msg"`
		}
		if err := r.c.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
			return false, fmt.Errorf("ferry: snapshot: hello: %w", err)
		}
		r.snap.span.mongos = -1
		if hello.Msg == "isdbgrid" {
			r.snap.span.mongos = 1
		}
	}
	return r.snap.span.mongos > 0, nil
}

// readSpan reads the partition's next span of ns' hashed range, from
// rec.From, at cluster time at (see above).
func (r *runner) readSpan(ctx context.Context, ns Namespace, rec *snapshotRecord, at bson.Timestamp) (*chunk, error) {
	size := r.c.cfg.snapshotChunk
	limit := 2 * size
	_, hi, _ := r.c.partitionRange()
	sp := &r.snap.span
	if sp.ns != ns.String() {
		sp.ns, sp.width = ns.String(), 0
	}
	if sp.width == 0 {
		sp.width = math.MaxUint64
		if n, err := r.c.client.Database(ns.DB).Collection(ns.Coll).EstimatedDocumentCount(ctx); err == nil && n > int64(size) {
			sp.width = uint64(float64(size) / float64(n) * math.Exp2(64))
		}
	}
	var userFilter any = bson.D{}
	if len(rec.Filter) > 0 {
		userFilter = rec.Filter
	}
	from := rec.From
	for {
		// The span [from, to): to past hi ends the partition's range.
		last := sp.width > uint64(hi)-uint64(from)
		var end any = bson.MaxKey{}
		to := int64(uint64(from) + sp.width)
		switch {
		case !last:
			end = to
		case hi < math.MaxInt64:
			end = hi + 1
		}
		cmd := bson.D{{Key: "find", Value: ns.Coll},
			{Key: "filter", Value: userFilter},
			{Key: "hint", Value: hashedIndexKey},
			{Key: "min", Value: bson.D{{Key: "_id", Value: from}}},
			{Key: "max", Value: bson.D{{Key: "_id", Value: end}}}}
		whole := sp.width == 1 // one hashed value: read it all, however many
		if !whole {
			cmd = append(cmd, bson.E{Key: "limit", Value: int64(limit)}, bson.E{Key: "batchSize", Value: int64(limit)})
		}
		c, truncated, err := r.runChunkFind(ctx, ns, cmd, at, limit)
		if err != nil {
			return nil, err
		}
		if !whole && (truncated || len(c.rows) >= limit) {
			// Too wide: a quarter of it (half when only the bytes
			// overflowed), read again at the same time.
			if truncated && len(c.rows) < limit {
				sp.width = max(sp.width/2, 1)
			} else {
				sp.width = max(sp.width/4, 1)
			}
			continue
		}
		if truncated {
			// Documents sharing one hashed value beyond one reply: the
			// rest of them is read as the next chunk's documents would
			// be, never; it is an error to report, not to skip.
			return nil, fmt.Errorf("ferry: snapshot: read a chunk of %s: the documents of hashed value %d exceed one reply (16 MiB)", ns, from)
		}
		c.last, c.from = last, to
		// The next span: scaled to hold about a chunk, at most 4 times
		// wider or narrower.
		w := sp.width
		switch n := len(c.rows); {
		case n == 0:
			w = satMul(w, 4)
		default:
			scaled := min(max(float64(w)*float64(size)/float64(n), float64(w)/4), float64(w)*4)
			if scaled >= math.Exp2(64) {
				w = math.MaxUint64
			} else {
				w = uint64(scaled)
			}
		}
		sp.width = max(w, 1)
		return c, nil
	}
}

// satMul is a*b, or the largest uint64 when that overflows.
func satMul(a, b uint64) uint64 {
	if a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}
