package ferry

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/ferry-io/ferry/internal/hashkey"
)

// chunk is one read of a snapshot: the partition's next documents of a
// collection, as of one cluster time.
type chunk struct {
	at   bson.Timestamp // the cluster time the documents were read at
	rows []bson.Raw     // alias reply
	// next is where the chunk after this one starts (hashed mode: from;
	// id mode: after), last that the collection has no documents after it.
	from  int64
	after bson.RawValue
	last  bool
	bytes int64
}

// hashedIndexKey is the key pattern of the index a hashed-mode snapshot
// reads.
var hashedIndexKey = bson.D{{Key: "_id", Value: "hashed"}}

// snapshotMode decides how collection ns is read: by its {_id: "hashed"}
// index when partitions are hashed ranges and the collection has one,
// else in _id order.
func (r *runner) snapshotMode(ctx context.Context, ns Namespace) (string, error) {
	if _, _, ok := r.c.partitionRange(); !ok {
		return SnapshotByID, nil
	}
	cur, err := r.c.client.Database(ns.DB).Collection(ns.Coll).Indexes().List(ctx)
	if err != nil {
		return "", fmt.Errorf("ferry: snapshot: list the indexes of %s: %w", ns, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		key, err := cur.Current.LookupErr("key")
		if err != nil {
			continue
		}
		doc, ok := key.DocumentOK()
		if !ok {
			continue
		}
		elems, err := doc.Elements()
		if err != nil || len(elems) != 1 || elems[0].Key() != "_id" {
			continue
		}
		if s, ok := elems[0].Value().StringValueOK(); ok && s == "hashed" {
			return SnapshotByHashedIndex, nil
		}
	}
	return SnapshotByID, cur.Err()
}

// readChunk reads the partition's next chunk of ns after rec's position,
// at cluster time at (a snapshot read), in one reply: up to the chunk
// size, or less when the reply reached the server's 16 MiB.
//
// Hashed mode: find with hint {_id: "hashed"}, min {_id: from}, max the
// partition's end: the server walks the index range and returns each
// document once. It reads one document more than the chunk size, so that
// a chunk never ends between two documents of the same hashed value (the
// next starts at that value, inclusive).
//
// Through a mongos, hashed mode reads a bounded span of the hashed range
// instead (readSpan, snapshotspan.go): mongos sends min/max to every shard
// and merges their documents unordered.
//
// Id mode: find {_id: {$gt: after}, $expr: <partition filter>} sorted by
// _id: the server walks the _id index from after and evaluates the filter
// on each document until the chunk is full. Through a mongos the shards
// each walk theirs and mongos merges them in _id order. It too reads one
// document more, so that a chunk never ends between two documents of one
// _id (on two shards, see cutByID).
func (r *runner) readChunk(ctx context.Context, ns Namespace, rec *snapshotRecord, at bson.Timestamp) (*chunk, error) {
	cfg := &r.c.cfg
	size := cfg.snapshotChunk
	var userFilter any = bson.D{}
	if len(rec.Filter) > 0 {
		userFilter = rec.Filter
	}
	cmd := bson.D{{Key: "find", Value: ns.Coll}}
	switch rec.Mode {
	case SnapshotByHashedIndex:
		_, hi, _ := r.c.partitionRange()
		var max any = bson.MaxKey{}
		if hi < math.MaxInt64 {
			max = hi + 1
		}
		cmd = append(cmd,
			bson.E{Key: "filter", Value: userFilter},
			bson.E{Key: "hint", Value: hashedIndexKey},
			bson.E{Key: "min", Value: bson.D{{Key: "_id", Value: rec.From}}},
			bson.E{Key: "max", Value: bson.D{{Key: "_id", Value: max}}},
			bson.E{Key: "limit", Value: int64(size + 1)},
			bson.E{Key: "batchSize", Value: int64(size + 1)})
	default:
		var and bson.A
		if len(rec.Filter) > 0 {
			and = append(and, rec.Filter)
		}
		if v, ok := rec.after(); ok {
			and = append(and, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: v}}}})
		}
		if cfg.partitions > 1 {
			and = append(and, bson.D{{Key: "$expr", Value: r.c.partitionExpr("$_id")}})
		}
		var filter any = bson.D{}
		switch len(and) {
		case 0:
		case 1:
			filter = and[0]
		default:
			filter = bson.D{{Key: "$and", Value: and}}
		}
		cmd = append(cmd,
			bson.E{Key: "filter", Value: filter},
			bson.E{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}},
			bson.E{Key: "hint", Value: bson.D{{Key: "_id", Value: 1}}},
			bson.E{Key: "limit", Value: int64(size + 1)},
			bson.E{Key: "batchSize", Value: int64(size + 1)})
	}
	c, truncated, err := r.runChunkFind(ctx, ns, cmd, at, size+1)
	if err != nil {
		return nil, err
	}
	switch rec.Mode {
	case SnapshotByHashedIndex:
		err = c.cutHashed(size, truncated)
	default:
		err = c.cutByID(size, truncated)
	}
	if err != nil {
		return nil, fmt.Errorf("ferry: snapshot: read a chunk of %s: %w", ns, err)
	}
	return c, nil
}

// cutByID ends an id-mode chunk between two _id values and sets where the
// next starts (after: its last _id, exclusive). The read asked for size+1
// documents: with all of them (or a reply cut at 16 MiB) the chunk ends
// before the last _id read, which the next chunk reads again. Through a
// mongos two documents can share an _id (one per shard, when _id is not
// the shard key): a chunk ending between them would lose the second to the
// next chunk's {$gt: _id}. Values compare by their hashed-index key, equal
// for equal values (1 and 1.0 alike), so the cut may come a few documents
// early, never between equal ones.
func (c *chunk) cutByID(size int, truncated bool) error {
	n := len(c.rows)
	if n <= size && !truncated {
		c.last = true
		return nil
	}
	if n == 0 {
		return errors.New("a reply cut short before its first document")
	}
	hashAt := func(i int) (int64, bson.RawValue, error) {
		id, err := c.rows[i].LookupErr("_id")
		if err != nil {
			return 0, id, err
		}
		h, err := hashkey.HashRaw(id)
		return h, id, err
	}
	boundary, id, err := hashAt(n - 1)
	if err != nil {
		return err
	}
	keep := n - 1
	for keep > 0 {
		h, prev, err := hashAt(keep - 1)
		if err != nil {
			return err
		}
		if h != boundary {
			c.rows, c.after = c.rows[:keep], prev
			return nil
		}
		keep--
	}
	// Every document read shares one hashed _id: keep them all and go on
	// after the last (more documents with one _id than a chunk holds).
	c.after = id
	return nil
}

// runChunkFind runs a chunk's find at cluster time at (a snapshot read;
// at zero: the server's latest) and returns its first batch (room made for
// want rows); truncated when the reply stopped at the server's 16 MiB (its
// cursor is killed).
func (r *runner) runChunkFind(ctx context.Context, ns Namespace, cmd bson.D, at bson.Timestamp, want int) (*chunk, bool, error) {
	rc := bson.D{{Key: "level", Value: "snapshot"}}
	if !at.IsZero() {
		rc = append(rc, bson.E{Key: "atClusterTime", Value: at})
	}
	cmd = append(cmd, bson.E{Key: "readConcern", Value: rc})
	db := r.c.client.Database(ns.DB)
	reply, err := db.RunCommand(ctx, cmd).Raw()
	if err != nil {
		return nil, false, fmt.Errorf("ferry: snapshot: read a chunk of %s: %w", ns, err)
	}
	c, id, err := parseChunk(reply, at, want)
	if err != nil {
		return nil, false, fmt.Errorf("ferry: snapshot: read a chunk of %s: %w", ns, err)
	}
	// A cursor left open: the reply reached the server's size limit.
	truncated := false
	if id != 0 {
		truncated = true
		kill := bson.D{{Key: "killCursors", Value: ns.Coll}, {Key: "cursors", Value: bson.A{id}}}
		_ = db.RunCommand(context.WithoutCancel(ctx), kill).Err()
	}
	return c, truncated, nil
}

// parseChunk reads a chunk's reply: its documents (aliasing reply), the
// cluster time it was read at (at when the reply does not say), and the id
// of the cursor it left open (0: none). want is how many documents were
// asked for.
func parseChunk(reply bson.Raw, at bson.Timestamp, want int) (*chunk, int64, error) {
	cur, ok := reply.Lookup("cursor").DocumentOK()
	if !ok {
		return nil, 0, errors.New("the reply has no cursor")
	}
	c := &chunk{at: at, bytes: int64(len(reply))}
	var batch bson.Raw
	var id int64
	elems, err := cur.Elements()
	if err != nil {
		return nil, 0, err
	}
	for _, el := range elems {
		switch el.Key() {
		case "atClusterTime":
			if t, i, ok := el.Value().TimestampOK(); ok {
				c.at = bson.Timestamp{T: t, I: i}
			}
		case "firstBatch":
			arr, ok := el.Value().ArrayOK()
			if !ok {
				return nil, 0, errors.New("the reply's firstBatch is not an array")
			}
			batch = bson.Raw(arr)
		case "id":
			id, _ = el.Value().Int64OK()
		}
	}
	if c.at.IsZero() {
		return nil, 0, errors.New("the server did not say at which cluster time it read")
	}
	if batch == nil {
		return nil, 0, errors.New("the reply has no firstBatch")
	}
	if len(batch) < 5 {
		return nil, 0, errors.New("a malformed firstBatch")
	}
	// The batch's documents, read in place (no RawValue per document).
	c.rows = make([]bson.Raw, 0, want)
	rest := batch[4 : len(batch)-1]
	for len(rest) > 0 {
		el, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return nil, 0, errors.New("a malformed firstBatch")
		}
		v := el.Value()
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return nil, 0, fmt.Errorf("a document of the reply is a %v", v.Type)
		}
		c.rows = append(c.rows, bson.Raw(v.Data))
		rest = next
	}
	return c, id, nil
}

// cutHashed ends a hashed-mode chunk at a change of hashed value and sets
// where the next starts. The read asked for size+1 documents: with all of
// them (or a reply cut at 16 MiB) the chunk ends before the last hashed
// value read, which the next chunk reads again from its first document.
func (c *chunk) cutHashed(size int, truncated bool) error {
	n := len(c.rows)
	if n <= size && !truncated {
		c.last = true
		return nil
	}
	if n == 0 {
		return errors.New("a reply cut short before its first document")
	}
	hashAt := func(i int) (int64, error) {
		id, err := c.rows[i].LookupErr("_id")
		if err != nil {
			return 0, err
		}
		return hashkey.HashRaw(id)
	}
	boundary, err := hashAt(n - 1)
	if err != nil {
		return err
	}
	keep := n - 1
	for keep > 0 {
		h, err := hashAt(keep - 1)
		if err != nil {
			return err
		}
		if h != boundary {
			break
		}
		keep--
	}
	if keep == 0 {
		// Every document read has one hashed value: keep them all and go
		// on after it (documents sharing a 64-bit hash beyond one reply).
		if boundary == math.MaxInt64 {
			c.last = true
			return nil
		}
		c.from = boundary + 1
		return nil
	}
	c.rows = c.rows[:keep]
	c.from = boundary
	return nil
}
