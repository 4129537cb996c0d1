package mongotest_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// snapshotFind runs a find with readConcern snapshot (at atClusterTime
// when given) and returns its documents' _ids and the atClusterTime of
// the reply.
func snapshotFind(t *testing.T, db *mongo.Database, coll string, at *bson.Timestamp, extra ...bson.E) ([]int32, bson.Timestamp) {
	t.Helper()
	rc := bson.D{{Key: "level", Value: "snapshot"}}
	if at != nil {
		rc = append(rc, bson.E{Key: "atClusterTime", Value: *at})
	}
	cmd := append(bson.D{{Key: "find", Value: coll}, {Key: "batchSize", Value: 10_000}}, extra...)
	cmd = append(cmd, bson.E{Key: "readConcern", Value: rc})
	raw, err := db.RunCommand(ctx(t), cmd).Raw()
	if err != nil {
		t.Fatalf("snapshot find %v: %v", cmd, err)
	}
	var ids []int32
	vals, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
	for _, v := range vals {
		ids = append(ids, v.Document().Lookup("_id").Int32())
	}
	if id := raw.Lookup("cursor", "id").Int64(); id != 0 {
		t.Fatalf("snapshot find left a cursor open (%d documents in the first batch)", len(ids))
	}
	tt, ti, ok := raw.Lookup("cursor", "atClusterTime").TimestampOK()
	if !ok {
		t.Fatalf("snapshot find's reply has no cursor.atClusterTime: %v", raw)
	}
	return ids, bson.Timestamp{T: tt, I: ti}
}

// TestShardedSnapshotReadsAcrossMigration: a snapshot read through the
// mongos is routed with the chunk placement as of its atClusterTime, and
// each shard keeps only the documents it owned then, as a real cluster
// does (chunk history and the shards' ownership filter): read at a time
// before a migration that emptied the donor, every document is there
// (routed by the current placement, the read would go to the recipient
// only, which did not have them yet); read at a time inside the
// migration, after the recipient's copies and before the commit, each
// document is there once. Without atClusterTime the mongos picks one time
// for every shard and returns it.
func TestShardedSnapshotReadsAcrossMigration(t *testing.T) {
	client, sc := mongotest.ShardedClient(t, 2, mongotest.NoopInterval(100*time.Millisecond))
	if sc == nil {
		t.Skip("reads a shard's migration events: needs the emulated cluster")
	}
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "enableSharding", Value: "shop"}, {Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	db := client.Database("shop")
	c := db.Collection("items")
	shardCollection(t, client, "shop.items", bson.D{{Key: "g", Value: 1}})
	const n = 40
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "g", Value: int32(i % 2)}}
	}
	if _, err := c.InsertMany(ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	// g 1 on shard1, g 0 on shard0.
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "split", Value: "shop.items"}, {Key: "middle", Value: bson.D{{Key: "g", Value: int32(1)}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sc.MoveChunk("shop.items", bson.D{{Key: "g", Value: 1}}, "shard1"); err != nil {
		t.Fatal(err)
	}
	// A first snapshot read: the shards keep versions from then on.
	ids, before := snapshotFind(t, db, "items", nil)
	if len(ids) != n {
		t.Fatalf("snapshot read before the migration: %d documents, want %d", len(ids), n)
	}
	shard1 := connectClient(t, options.Client().ApplyURI(sc.Shards()[1].URI())).Database("shop")
	migr, _ := openRaw(t, shard1, "items", bson.D{{Key: "showMigrationEvents", Value: true}})
	// shard0's last chunk moves to shard1.
	if err := sc.MoveChunk("shop.items", bson.D{{Key: "g", Value: 0}}, "shard1"); err != nil {
		t.Fatal(err)
	}
	// The recipient's copies, each at its own cluster time before the
	// migration committed.
	var copies []bson.Timestamp
	for _, ev := range migr.collect(n/2, 10*time.Second) {
		tt, ti := ev.Lookup("clusterTime").Timestamp()
		copies = append(copies, bson.Timestamp{T: tt, I: ti})
	}
	for _, at := range []struct {
		name string
		at   bson.Timestamp
	}{{"before the migration", before}, {"at the recipient's last copy", copies[len(copies)-1]}, {"at its first copy", copies[0]}} {
		got, _ := snapshotFind(t, db, "items", &at.at)
		seen := map[int32]int{}
		for _, id := range got {
			seen[id]++
		}
		for i := range int32(n) {
			if seen[i] != 1 {
				t.Fatalf("snapshot read %s (%v): document %d %d times (%d documents)", at.name, at.at, i, seen[i], len(got))
			}
		}
	}
	// Targeted by the shard key at the earlier time: shard0's then.
	if got, _ := snapshotFind(t, db, "items", &before, bson.E{Key: "filter", Value: bson.D{{Key: "g", Value: int32(0)}}}); len(got) != n/2 {
		t.Fatalf("snapshot read of g 0 before the migration: %d documents, want %d", len(got), n/2)
	}
	// The current state: every document once, from shard1.
	if got, at := snapshotFind(t, db, "items", nil); len(got) != n || !before.Before(at) {
		t.Fatalf("snapshot read after the migration: %d documents at %v, want %d after %v", len(got), at, n, before)
	}
}

// TestShardedHashedKeyIndex: sharding an empty collection on {_id:
// "hashed"} creates the shard key's index on the shards, as
// shardCollection does, so a find can hint it with min and max (each
// shard reads its part of the range; the mongos merges them).
func TestShardedHashedKeyIndex(t *testing.T) {
	client, _ := mongotest.ShardedClient(t, 2)
	c := client.Database("shop").Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "_id", Value: "hashed"}})
	specs, err := c.Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range specs {
		found = found || s.Name == "_id_hashed"
	}
	if !found {
		t.Fatalf("indexes after shardCollection {_id: \"hashed\"}: %v; want _id_hashed", specs)
	}
	docs := make([]any, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}}
	}
	if _, err := c.InsertMany(ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	ids, _ := snapshotFind(t, client.Database("shop"), "orders", nil,
		bson.E{Key: "hint", Value: bson.D{{Key: "_id", Value: "hashed"}}},
		bson.E{Key: "min", Value: bson.D{{Key: "_id", Value: bson.MinKey{}}}},
		bson.E{Key: "max", Value: bson.D{{Key: "_id", Value: bson.MaxKey{}}}})
	if len(ids) != 200 {
		t.Fatalf("find with min/max over the hashed index: %d documents, want 200", len(ids))
	}
}
