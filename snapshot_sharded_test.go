package ferry_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	ferry "github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// newMongosSnapshotEnv is newEnv on a sharded cluster of n shards (the emulated
// one, each shard's no-op every 100 ms, or the mongos
// $FERRY_TEST_MONGODB_SHARDED_URI names), the stream's database sharded
// with shard0 its primary shard.
func newMongosSnapshotEnv(t *testing.T, n int) *env {
	t.Helper()
	client, srv := emutest.ShardedClient(t, n, emutest.NoopInterval(100*time.Millisecond))
	e := envOn(t, client, srv)
	if err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "enableSharding", Value: e.db.Name()}, {Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	return e
}

// shardCollection shards db.coll on key through the mongos.
func shardCollection(t *testing.T, c *mongo.Collection, key bson.D) {
	t.Helper()
	ns := c.Database().Name() + "." + c.Name()
	if err := c.Database().Client().Database("admin").RunCommand(context.Background(), bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key}}).Err(); err != nil {
		t.Fatalf("shardCollection %s %v: %v", ns, key, err)
	}
}

// chunksOf lists the chunks of a sharded collection (config.chunks), in
// shard key order.
func chunksOf(t *testing.T, c *mongo.Collection) []bson.Raw {
	t.Helper()
	ctx := context.Background()
	cfg := c.Database().Client().Database("config")
	var coll struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := cfg.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: c.Database().Name() + "." + c.Name()}}).Decode(&coll); err != nil {
		t.Fatal(err)
	}
	cur, err := cfg.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll.UUID}}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// moveChunk moves chunk i (of chunksOf) to the other of two shards, as
// the moveChunk command does.
func moveChunk(t *testing.T, c *mongo.Collection, i int) {
	t.Helper()
	chunks := chunksOf(t, c)
	ch := chunks[i]
	to := "shard1"
	if ch.Lookup("shard").StringValue() == "shard1" {
		to = "shard0"
	}
	cmd := bson.D{{Key: "moveChunk", Value: c.Database().Name() + "." + c.Name()},
		{Key: "bounds", Value: bson.A{ch.Lookup("min").Document(), ch.Lookup("max").Document()}}, {Key: "to", Value: to}}
	if err := c.Database().Client().Database("admin").RunCommand(context.Background(), cmd).Err(); err != nil {
		t.Fatalf("moveChunk %v: %v", cmd, err)
	}
}

// TestSnapshotThroughMongos: a snapshot of a sharded collection read
// through mongos, on two shards, with writes and a chunk migration while
// it runs, delivers every document once and ends with the projection
// equal to the source: a hashed shard key ({_id: "hashed"}, read by its
// hashed index), a ranged one (read in _id order), and a ranged one with
// an {_id: "hashed"} index; each started with the stream
// (StartWithBackfill) and as an operator's request (`ferry snapshot`),
// over two partitions.
//
// mongos sends a find with min/max to every shard holding chunks and,
// without a sort, merges their documents in no particular order before
// applying the limit: a chunk cut at its last document's hashed value
// (the replica set's read) would skip the other shard's documents below
// it.
func TestSnapshotThroughMongos(t *testing.T) {
	for _, tc := range []struct {
		name        string
		key         bson.D
		hashedIndex bool
		request     bool
	}{
		{name: "hashed", key: bson.D{{Key: "_id", Value: "hashed"}}},
		{name: "hashed_request", key: bson.D{{Key: "_id", Value: "hashed"}}, request: true},
		{name: "ranged", key: bson.D{{Key: "g", Value: 1}}},
		{name: "ranged_hashed_index", key: bson.D{{Key: "g", Value: 1}}, hashedIndex: true, request: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSnapshotThroughMongos(t, tc.key, tc.hashedIndex, tc.request)
		})
	}
}

func testSnapshotThroughMongos(t *testing.T, key bson.D, hashedIndex, request bool) {
	e := newMongosSnapshotEnv(t, 2)
	if request {
		e.useMongoStore()
	}
	ctx := context.Background()
	c := e.db.Collection("c")
	shardCollection(t, c, key)
	if hashedIndex {
		if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
			t.Fatal(err)
		}
	}
	const n, parts = 1200, 2
	insertN(t, c, 0, n, func(i int) bson.D { return bson.D{{Key: "g", Value: int32(i % 4)}} })
	split := func(middle bson.D) {
		t.Helper()
		if err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "split", Value: e.db.Name() + ".c"}, {Key: "middle", Value: middle}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Four chunks. Ranged on g: shard0 holds g < 2, shard1 the rest.
	// Hashed: each partition's half of the hashed range spans both shards,
	// the shard listed first holding its upper chunk.
	if key[0].Key == "g" {
		for g := range int32(3) {
			split(bson.D{{Key: "g", Value: g + 1}})
		}
		moveChunk(t, c, 2)
		moveChunk(t, c, 3)
	} else {
		split(bson.D{{Key: "_id", Value: int64(-1) << 62}}) // shard0's [MinKey, 0)
		split(bson.D{{Key: "_id", Value: int64(1) << 62}})  // shard1's [0, MaxKey)
		moveChunk(t, c, 0)
		moveChunk(t, c, 3)
	}
	onBoth := func() {
		t.Helper()
		owners := map[string]int{}
		for _, ch := range chunksOf(t, c) {
			owners[ch.Lookup("shard").StringValue()]++
		}
		if len(owners) != 2 {
			t.Fatalf("the collection's chunks are on %v, want both shards", owners)
		}
	}
	onBoth()

	projs := make([]*projection, parts)
	extra := []ferry.Option{ferry.SnapshotChunkSize(40), ferry.SnapshotPollInterval(20 * time.Millisecond)}
	if !request {
		extra = append(extra, ferry.StartAt(ferry.StartWithBackfill()))
	}
	for p := range parts {
		projs[p] = newProjection()
		start(t, e.client, projs[p].handle, e.opts(append(extra, ferry.Partition(p, parts))...)...)
	}
	var reqID string
	if request {
		for p := range parts {
			waitStartedPartition(t, e.store, p)
		}
		req, err := e.store.(checkpoint.SnapshotRequests).RequestSnapshot(ctx, checkpoint.SnapshotRequest{Stream: "s"})
		if err != nil {
			t.Fatal(err)
		}
		reqID = req.ID
	}
	ours := func(p ferry.SnapshotProgress) bool { return !request || p.Request == reqID }
	snapshotDone := func() bool {
		for p := range parts {
			cp, err := e.store.Load(ctx, "s", p)
			if err != nil {
				return false
			}
			if s, ok, _ := ferry.SnapshotOf(cp); !ok || !ours(s) || s.Finished.IsZero() {
				return false
			}
		}
		return true
	}
	// Writes while the snapshot runs, and a chunk migration once it has
	// delivered some documents.
	written := map[int32]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	next, writes, moved := int32(n), 0, false
	for !snapshotDone() {
		if !moved {
			var done int64
			for _, pr := range projs {
				_, total := pr.rowsOf()
				done += int64(total)
			}
			if done > n/4 {
				moveChunk(t, c, 1)
				onBoth()
				moved = true
			}
		}
		id := rng.Int32N(next)
		written[id] = true
		var err error
		switch rng.IntN(3) {
		case 0:
			_, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "g", Value: id % 4}}, bson.D{{Key: "g", Value: id % 4}, {Key: "v", Value: int32(1_000_000 + writes)}})
		case 1:
			_, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "g", Value: id % 4}})
		default:
			_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: next}, {Key: "v", Value: next}, {Key: "g", Value: next % 4}})
			next++
		}
		if err != nil {
			t.Fatal(err)
		}
		writes++
	}
	if !moved {
		t.Fatalf("the snapshot finished before a chunk could move (%d writes)", writes)
	}
	// The stream applies everything up to a last write.
	insert(t, c, bson.D{{Key: "_id", Value: int32(10_000_000)}, {Key: "v", Value: int32(1)}, {Key: "g", Value: int32(0)}})
	want := sourceDocs(t, c)
	poll.Until(t, 30*time.Second, func() error {
		got := map[int32]int32{}
		for _, pr := range projs {
			pr.mu.Lock()
			for id, v := range pr.docs {
				got[id] = v
			}
			pr.mu.Unlock()
		}
		var stale, resurrected, missing int
		for id, v := range got {
			w, ok := want[id]
			switch {
			case !ok:
				resurrected++
			case w != v:
				stale++
			}
		}
		for id := range want {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if stale+resurrected+missing > 0 {
			var ex []int32
			for id := range want {
				if _, ok := got[id]; !ok && len(ex) < 10 {
					ex = append(ex, id)
				}
			}
			var info []string
			for p, pr := range projs {
				_, total := pr.rowsOf()
				cp, _ := e.store.Load(ctx, "s", p)
				s, _, _ := ferry.SnapshotOf(cp)
				info = append(info, fmt.Sprintf("p%d rows %d snapshot %+v", p, total, s))
			}
			return fmt.Errorf("after %d writes: %d stale, %d resurrected, %d missing of %d (e.g. %v) %v", writes, stale, resurrected, missing, len(want), ex, info)
		}
		return nil
	})
	// Every document the test did not write was delivered by the snapshot
	// exactly once, by its own partition.
	rows := map[int32]int{}
	for _, pr := range projs {
		r, _ := pr.rowsOf()
		for id, k := range r {
			rows[id] += k
		}
	}
	var mode string
	for p := range parts {
		cp, err := e.store.Load(ctx, "s", p)
		if err != nil {
			t.Fatal(err)
		}
		s, _, _ := ferry.SnapshotOf(cp)
		mode = s.Mode
	}
	for id := range int32(n) {
		if !written[id] && rows[id] != 1 {
			t.Fatalf("document %d (not written during the snapshot) delivered %d times by the snapshot (mode %s)", id, rows[id], mode)
		}
	}
	wantMode := ferry.SnapshotByID
	if key[0].Value == "hashed" || hashedIndex {
		wantMode = ferry.SnapshotByHashedIndex
	}
	if mode != wantMode {
		t.Fatalf("snapshot mode %s, want %s", mode, wantMode)
	}
	t.Logf("mode %s: %d writes and a chunk migration during the snapshot; projection equals the source (%d documents)", mode, writes, len(want))
}

// waitStartedPartition is waitStarted for partition p.
func waitStartedPartition(t *testing.T, store checkpoint.Store, p int) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() error {
		cp, err := store.Load(context.Background(), "s", p)
		if err != nil || cp.Token == nil {
			return fmt.Errorf("partition %d wrote no checkpoint with a token yet (%v)", p, err)
		}
		return nil
	})
}

// TestSnapshotThroughMongosLargeDocuments: through a mongos, a span whose
// documents exceed one reply (16 MiB) is narrowed and read again: 48
// documents of 1 MiB on two shards ({_id: "hashed"}), with a chunk size
// that would take them all at once, are each delivered once, in chunks of
// at most one reply.
func TestSnapshotThroughMongosLargeDocuments(t *testing.T) {
	e := newMongosSnapshotEnv(t, 2)
	c := e.db.Collection("c")
	shardCollection(t, c, bson.D{{Key: "_id", Value: "hashed"}})
	// Four chunks, the shard listed first holding the upper of each half.
	for _, middle := range []int64{-1 << 62, 1 << 62} {
		if err := e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "split", Value: e.db.Name() + ".c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: middle}}}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	moveChunk(t, c, 0)
	moveChunk(t, c, 3)
	const n = 48
	pad := string(make([]byte, 1<<20))
	insertN(t, c, 0, n, func(int) bson.D { return bson.D{{Key: "pad", Value: pad}} })
	proj := newProjection()
	var largest, prevDone, prevChunks atomic.Int64
	hook := snapshotHookFunc(func(i ferry.SnapshotInfo) {
		if i.Progress.Chunks == prevChunks.Load()+1 {
			largest.Store(max(largest.Load(), i.Progress.Done-prevDone.Load()))
		}
		prevDone.Store(i.Progress.Done)
		prevChunks.Store(i.Progress.Chunks)
	})
	r := start(t, e.client, proj.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(1000), ferry.WithHooks(hook))...)
	done := waitSnapshot(t, e.store, "s", 0, "finished", finished)
	rows, total := proj.rowsOf()
	if total != n || len(rows) != n {
		t.Fatalf("%d rows for %d documents, want each once", total, n)
	}
	t.Logf("%d documents of 1 MiB in %d chunks, the largest %d", done.Done, done.Chunks, largest.Load())
	if done.Chunks < 3 || largest.Load() == 0 || largest.Load() > 16 {
		t.Fatalf("%d MiB read in %d chunks, the largest %d documents: a chunk held more than one 16 MiB reply", n, done.Chunks, largest.Load())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
