package mongoproj_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// sharded builds a change event of a sharded collection: its documentKey
// is {region, _id}, as the server sends it for shard key {region: 1}.
func sharded(op, region string, id int, doc bson.D, t, i uint32) *ferry.Event {
	key := bson.D{{Key: "region", Value: region}, {Key: "_id", Value: int32(id)}}
	ev := bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X2B%04X0463", t, i, 0)}}},
		{Key: "operationType", Value: op},
		{Key: "clusterTime", Value: bson.Timestamp{T: t, I: i}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: key},
	}
	if doc != nil {
		ev = append(ev, bson.E{Key: "fullDocument", Value: append(bson.D{{Key: "_id", Value: int32(id)}, {Key: "region", Value: region}}, doc...)})
	}
	raw, err := bson.Marshal(ev)
	if err != nil {
		panic(err) // static input
	}
	out, err := ferry.ParseEvent(raw, 0, 1)
	if err != nil {
		panic(err)
	}
	return out
}

// TestShardedDocumentsAreKeyedByDocumentKey: on a sharded collection _id is
// unique only per shard, so the projection keys a document by its whole
// documentKey ({region, _id} as the target _id): two documents with one
// _id on two shards are two documents, and a document moved across shards
// by a shard key update — a delete on the old shard and an insert on the
// new one, in either order — ends live under its new key and a tombstone
// under the old. Keyed by _id alone, the insert-then-delete order would
// leave the document deleted. A per-partition sweep hashes the source _id.
func TestShardedDocumentsAreKeyedByDocumentKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(t,
		sharded("insert", "eu", 1, v(1), 10, 1),
		sharded("insert", "us", 1, v(2), 10, 2),
		// Document 2 moves from eu to us: the insert is seen first.
		sharded("insert", "eu", 2, v(3), 11, 1),
		sharded("insert", "us", 2, v(4), 12, 1),
		sharded("delete", "eu", 2, nil, 12, 2),
	)
	live := func(region string, id int) bson.D {
		t.Helper()
		filter := append(bson.D{{Key: "_id", Value: bson.D{{Key: "region", Value: region}, {Key: "_id", Value: int32(id)}}}}, mongoproj.Live()...)
		var d bson.D
		if err := e.target.FindOne(ctx, filter).Decode(&d); err != nil {
			return nil
		}
		return d
	}
	for _, c := range []struct {
		region string
		id, v  int
	}{{"eu", 1, 1}, {"us", 1, 2}, {"us", 2, 4}} {
		if d := live(c.region, c.id); d == nil || lookupD(d, "v") != int32(c.v) || lookupD(d, "region") != c.region {
			t.Errorf("{%s, %d}: %v, want live with v %d", c.region, c.id, d, c.v)
		}
	}
	if d := live("eu", 2); d != nil {
		t.Errorf("{eu, 2} after its delete: %v, want a tombstone", d)
	}
	if n, err := e.target.CountDocuments(ctx, bson.D{}); err != nil || n != 4 {
		t.Errorf("%d target documents (%v), want 4: three live, one tombstone", n, err)
	}
	// A document without the shard key field has documentKey {_id}: its
	// target _id is its _id.
	e.write(t, change("insert", 9, v(9), 13, 1, 0))
	wantV(t, e.doc(t, 9), 9)

	// Sweeping one partition of 8 takes every target document of a source
	// _id or none: the hash is of the source _id, not of the documentKey.
	for p := range 8 {
		if err := e.s.SweepPartition(ferry.HashRange, p, 8)(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int{1, 2} {
			n, err := e.target.CountDocuments(ctx, bson.D{{Key: "_id._id", Value: int32(id)}})
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 && n != 2 {
				t.Fatalf("after sweeping partition %d: %d of source _id %d's 2 target documents left", p, n, id)
			}
		}
	}
	if n, _ := e.target.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Errorf("%d documents left after sweeping every partition", n)
	}
}
