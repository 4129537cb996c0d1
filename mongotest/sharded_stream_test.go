package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// rawStream drives a change stream through the mongos with raw commands,
// so a test sees each batch and its postBatchResumeToken.
type rawStream struct {
	t    *testing.T
	db   *mongo.Database
	coll string
	id   int64
	pbrt string
}

func openRaw(t *testing.T, db *mongo.Database, coll string, spec bson.D, stages ...bson.D) (*rawStream, []bson.Raw) {
	t.Helper()
	s, batch, err := tryOpenRaw(t, db, coll, spec, stages...)
	if err != nil {
		t.Fatalf("open a change stream on %s.%s: %v", db.Name(), coll, err)
	}
	return s, batch
}

func tryOpenRaw(t *testing.T, db *mongo.Database, coll string, spec bson.D, stages ...bson.D) (*rawStream, []bson.Raw, error) {
	t.Helper()
	pipeline := bson.A{bson.D{{Key: "$changeStream", Value: spec}}}
	for _, st := range stages {
		pipeline = append(pipeline, st)
	}
	var target any = coll
	if coll == "" {
		target = 1
	}
	var reply bson.Raw
	err := db.RunCommand(ctx(t), bson.D{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}}).Decode(&reply)
	if err != nil {
		return nil, nil, err
	}
	s := &rawStream{t: t, db: db, coll: coll}
	if coll == "" {
		s.coll = "$cmd.aggregate"
	}
	return s, s.take(reply, "firstBatch"), nil
}

func (s *rawStream) take(reply bson.Raw, key string) []bson.Raw {
	s.id = reply.Lookup("cursor", "id").Int64()
	s.pbrt = reply.Lookup("cursor", "postBatchResumeToken", "_data").StringValue()
	vals, _ := reply.Lookup("cursor", key).Array().Values()
	out := make([]bson.Raw, len(vals))
	for i, v := range vals {
		out[i] = v.Document()
	}
	return out
}

// next runs one getMore waiting at most wait.
func (s *rawStream) next(wait time.Duration) ([]bson.Raw, error) {
	var reply bson.Raw
	err := s.db.RunCommand(ctx(s.t), bson.D{{Key: "getMore", Value: s.id}, {Key: "collection", Value: s.coll},
		{Key: "maxTimeMS", Value: wait.Milliseconds()}}).Decode(&reply)
	if err != nil {
		return nil, err
	}
	return s.take(reply, "nextBatch"), nil
}

// collect reads events until it has n of them, failing after within.
func (s *rawStream) collect(n int, within time.Duration) []bson.Raw {
	s.t.Helper()
	var out []bson.Raw
	deadline := time.Now().Add(within)
	for len(out) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("after %v: %d of %d events", within, len(out), n)
		}
		batch, err := s.next(500 * time.Millisecond)
		if err != nil {
			s.t.Fatalf("getMore: %v", err)
		}
		out = append(out, batch...)
	}
	return out
}

func evData(ev bson.Raw) string { return ev.Lookup("_id", "_data").StringValue() }

// TestShardedChangeStreamMerge: a change stream through the mongos opens
// with an empty first batch, returns the events of both shards once each,
// in resume-token order, with documentKey {shard key, _id}, and resumes
// after any event or from a high-water mark, across the shards.
func TestShardedChangeStreamMerge(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("carts")
	shardCollection(t, client, "shop.carts", bson.D{{Key: "tenant", Value: "hashed"}})
	s, first := openRaw(t, db, "carts", bson.D{})
	if len(first) != 0 || s.pbrt == "" {
		t.Fatalf("first batch %d events, postBatchResumeToken %q; want none, and a token", len(first), s.pbrt)
	}
	insertEach(t, c, 0, 40, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}, {Key: "tenant", Value: i % 7}} })
	evs := s.collect(40, 20*time.Second)
	seen := map[int32]bool{}
	for i, ev := range evs {
		id := ev.Lookup("documentKey", "_id").Int32()
		if seen[id] {
			t.Fatalf("event %d: document %d seen twice", i, id)
		}
		seen[id] = true
		if i > 0 && evData(evs[i-1]) >= evData(ev) {
			t.Fatalf("events %d and %d out of token order", i-1, i)
		}
		keys, _ := ev.Lookup("documentKey").Document().Elements()
		if len(keys) != 2 || keys[0].Key() != "tenant" || keys[1].Key() != "_id" {
			t.Fatalf("event %d documentKey %s; want {tenant, _id}", i, ev.Lookup("documentKey"))
		}
	}
	// Both shards wrote some of them.
	perShard := 0
	for _, srv := range sc.Shards() {
		if len(shardDocs(t, srv, "shop", "carts")) > 0 {
			perShard++
		}
	}
	if perShard != 2 {
		t.Fatalf("the 40 documents are on %d shards; want both", perShard)
	}
	// Resume after event 9: events 10.. follow, once each.
	r, _ := openRaw(t, db, "carts", bson.D{{Key: "resumeAfter", Value: evs[9].Lookup("_id").Document()}})
	again := r.collect(30, 20*time.Second)
	for i, ev := range again {
		if evData(ev) != evData(evs[10+i]) {
			t.Fatalf("resumed event %d: token differs from the original stream's event %d", i, 10+i)
		}
	}
	// Resume from the high-water mark the idle stream reports: only what
	// comes after it.
	hwm := s.pbrt
	if _, err := s.next(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s.pbrt < hwm {
		t.Fatalf("postBatchResumeToken went back: %s then %s", hwm, s.pbrt)
	}
	h, _ := openRaw(t, db, "carts", bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: s.pbrt}}}})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 100}, {Key: "tenant", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	after := h.collect(1, 20*time.Second)
	if got := after[0].Lookup("documentKey", "_id").Int32(); got != 100 || len(after) != 1 {
		t.Fatalf("resumed from the high-water mark: %d events, first _id %d; want only 100", len(after), got)
	}
}

// TestShardedIdleShardHoldsBack: an event on one shard is not returned
// while the other shard has written nothing since (its token has not
// passed the event), and is once it writes.
func TestShardedIdleShardHoldsBack(t *testing.T) {
	client, _ := emulatedCluster(t, "", mongotest.NoopInterval(0))
	on0 := client.Database("alpha").Collection("c") // alpha's primary is shard0
	on1 := client.Database("beta").Collection("c")  // beta's is shard1
	for _, c := range []*mongo.Collection{on0, on1} {
		if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "setup"}}); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := openRaw(t, client.Database("admin"), "", bson.D{{Key: "allChangesForCluster", Value: true}})
	if _, err := on0.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		batch, err := s.next(700 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) != 0 {
			t.Fatalf("getMore %d returned %d events while shard1 is idle; want none (its token is behind the event)", i, len(batch))
		}
	}
	if _, err := on1.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	// shard1's write moves its token past alpha's event, which comes out;
	// beta's own event now waits for shard0.
	evs := s.collect(1, 10*time.Second)
	if len(evs) != 1 || evs[0].Lookup("ns", "db").StringValue() != "alpha" {
		t.Fatalf("after shard1 wrote: %d events, first %s; want alpha's alone", len(evs), evs[0].Lookup("ns"))
	}
	if _, err := on0.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	evs = s.collect(1, 10*time.Second)
	if len(evs) != 1 || evs[0].Lookup("ns", "db").StringValue() != "beta" {
		t.Fatalf("after shard0 wrote again: %d events, first %s; want beta's alone", len(evs), evs[0].Lookup("ns"))
	}
}

// TestShardedStreamErrors: showMigrationEvents is refused through the
// mongos (31123); a shard's error reaches the client wrapped, with its
// code and labels; a resume point gone from a shard's oplog fails with
// ChangeStreamHistoryLost (286); an event token the stream does not have
// fails with ChangeStreamFatalError (280).
func TestShardedStreamErrors(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond), mongotest.OplogMaxEntries(50))
	db := client.Database("shop")
	c := db.Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "_id", Value: "hashed"}})
	var ce mongo.CommandError
	_, _, err := tryOpenRaw(t, db, "orders", bson.D{{Key: "showMigrationEvents", Value: true}})
	if !errors.As(err, &ce) || ce.Code != 31123 {
		t.Errorf("showMigrationEvents through the mongos: %v; want 31123", err)
	}

	s, _ := openRaw(t, db, "orders", bson.D{})
	sc.Shards()[1].FailGetMoreAfterCursorCheckout(234, 1) // RetryChangeStream
	_, err = s.next(2 * time.Second)
	if !errors.As(err, &ce) || ce.Code != 234 || !strings.HasPrefix(ce.Message, "Error on remote shard "+sc.Shards()[1].Addr()+" :: caused by :: ") ||
		!ce.HasErrorLabel("ResumableChangeStreamError") {
		t.Errorf("a shard's getMore failing with RetryChangeStream: %v (labels %v); want 234, wrapped as the shard's, ResumableChangeStreamError", err, ce.Labels)
	}

	// A token from another collection's stream: not in this one.
	o, _ := openRaw(t, db, "other", bson.D{})
	if _, err := db.Collection("other").InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	foreign := o.collect(1, 10*time.Second)[0].Lookup("_id").Document()
	f, _ := openRaw(t, db, "orders", bson.D{{Key: "resumeAfter", Value: foreign}})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	until(t, 10*time.Second, func() error {
		_, err := f.next(300 * time.Millisecond)
		if errors.As(err, &ce) && ce.Code == 280 {
			return nil
		}
		return fmt.Errorf("getMore after resuming from a token the stream lacks: %v; want 280", err)
	})

	// An old token, then enough writes to push it out of the shards' oplogs.
	early := foreign
	insertEach(t, c, 0, 200, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}} })
	_, _, err = tryOpenRaw(t, db, "other", bson.D{{Key: "resumeAfter", Value: early}})
	if !errors.As(err, &ce) || ce.Code != 286 || !strings.Contains(ce.Message, "Error on remote shard") {
		t.Errorf("resuming past the shards' oplogs: %v; want ChangeStreamHistoryLost (286) from a remote shard", err)
	}
}

// TestShardedStreamAddShard: a shard added while a cluster-wide stream is
// open (a config.shards insert) joins the stream: a database created on it
// shows its events.
func TestShardedStreamAddShard(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	s, _ := openRaw(t, client.Database("admin"), "", bson.D{{Key: "allChangesForCluster", Value: true}})
	var added struct {
		ShardAdded string `bson:"shardAdded"`
	}
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "addShard", Value: "new"}}).Decode(&added); err != nil || added.ShardAdded != "shard2" {
		t.Fatalf("addShard: %+v (%v); want shard2", added, err)
	}
	adminCommand(t, client, bson.D{{Key: "enableSharding", Value: "gamma"}, {Key: "primaryShard", Value: "shard2"}})
	if _, err := client.Database("gamma").Collection("c").InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := len(shardDocs(t, sc.Shards()[2], "gamma", "c")); got != 1 {
		t.Fatalf("the new shard holds %d documents of gamma.c; want 1", got)
	}
	var evs []bson.Raw
	until(t, 20*time.Second, func() error {
		batch, err := s.next(300 * time.Millisecond)
		if err != nil {
			return err
		}
		for _, ev := range batch {
			if ev.Lookup("operationType").StringValue() == "insert" {
				evs = append(evs, ev)
			}
		}
		if len(evs) == 0 {
			return errors.New("no insert event from the new shard yet")
		}
		return nil
	})
	if evs[0].Lookup("ns", "db").StringValue() != "gamma" {
		t.Fatalf("event %s; want gamma.c's insert", evs[0])
	}
}

// TestShardedTransactionCommitsPerShard: a transaction over both shards
// shows, through the mongos, one event per write with its lsid and
// txnNumber, each shard's part at a cluster time of its own.
func TestShardedTransactionCommitsPerShard(t *testing.T) {
	client, _ := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "_id", Value: "hashed"}})
	s, _ := openRaw(t, db, "orders", bson.D{})
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	_, err = sess.WithTransaction(ctx(t), func(sctx context.Context) (any, error) {
		for i := 0; i < 10; i++ {
			if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs := s.collect(10, 20*time.Second)
	times := map[string]bool{}
	for _, ev := range evs {
		if _, ok := ev.Lookup("lsid").DocumentOK(); !ok || ev.Lookup("txnNumber").Type == 0 {
			t.Fatalf("event %s lacks lsid or txnNumber", ev)
		}
		times[ev.Lookup("clusterTime").String()] = true
	}
	if len(times) != 2 {
		t.Fatalf("the transaction's 10 events carry %d cluster times; want 2, one per shard", len(times))
	}
}

// countOps counts a stream's events by operationType.
func countOps(evs []bson.Raw) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		out[ev.Lookup("operationType").StringValue()]++
	}
	return out
}

// TestShardedMigrationInvisible: a chunk migration (split, then the
// moveChunk command) writes fromMigrate inserts on the recipient and
// deletes on the donor that no change stream through the mongos shows;
// writes after it go to the new owner. A shard's own stream shows them
// only with showMigrationEvents.
func TestShardedMigrationInvisible(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("items")
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}})
	s, _ := openRaw(t, db, "items", bson.D{})
	shard1 := connectClient(t, options.Client().ApplyURI(sc.Shards()[1].URI())).Database("shop")
	plain, _ := openRaw(t, shard1, "items", bson.D{})
	migr, _ := openRaw(t, shard1, "items", bson.D{{Key: "showMigrationEvents", Value: true}})
	insertEach(t, c, 0, 20, func(i int) bson.D { return bson.D{{Key: "k", Value: i}} })
	adminCommand(t, client, bson.D{{Key: "split", Value: "shop.items"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 10}}}})
	adminCommand(t, client, bson.D{{Key: "moveChunk", Value: "shop.items"}, {Key: "find", Value: bson.D{{Key: "k", Value: 15}}}, {Key: "to", Value: "shard1"}})
	if n := len(shardDocs(t, sc.Shards()[1], "shop", "items")); n != 10 {
		t.Fatalf("shard1 holds %d documents after the move; want k 10..19", n)
	}
	insertEach(t, c, 20, 30, func(i int) bson.D { return bson.D{{Key: "k", Value: i}} })
	for _, k := range []int{5, 15} {
		if _, err := c.UpdateOne(ctx(t), bson.D{{Key: "k", Value: k}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(shardDocs(t, sc.Shards()[1], "shop", "items")); n != 20 {
		t.Fatalf("shard1 holds %d documents; want k 10..29", n)
	}
	evs := s.collect(32, 20*time.Second)
	if ops := countOps(evs); ops["insert"] != 30 || ops["update"] != 2 || len(ops) != 2 {
		t.Fatalf("the stream through the mongos: %v; want 30 inserts and 2 updates, nothing of the migration", ops)
	}
	// Nothing more comes (the migration's writes stay hidden).
	if more, err := s.next(600 * time.Millisecond); err != nil || len(more) != 0 {
		t.Fatalf("after the 32 events: %d more (%v)", len(more), err)
	}
	if got := countOps(migr.collect(21, 10*time.Second)); got["insert"] != 20 || got["update"] != 1 {
		t.Fatalf("shard1's stream with showMigrationEvents: %v; want the 10 migrated inserts, the 10 new ones and k 15's update", got)
	}
	if got := countOps(plain.collect(11, 10*time.Second)); got["insert"] != 10 || got["update"] != 1 {
		t.Fatalf("shard1's own stream: %v; want only the 10 new inserts and k 15's update", got)
	}
}

// TestShardedBalancerAndRemoveShard: the balancer spreads a collection
// that starts on one shard, its migrations invisible to a stream through
// the mongos; removing a shard drains it (its documents stay readable)
// and a stream resumed from before the removal fails with 286.
func TestShardedBalancerAndRemoveShard(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond), mongotest.BalancerInterval(50*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("items")
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}})
	s, _ := openRaw(t, db, "items", bson.D{})
	insertEach(t, c, 0, 100, func(i int) bson.D { return bson.D{{Key: "k", Value: i}} })
	until(t, 20*time.Second, func() error {
		n := len(shardDocs(t, sc.Shards()[1], "shop", "items"))
		if n < 30 {
			return fmt.Errorf("shard1 holds %d of 100 documents", n)
		}
		return nil
	})
	evs := s.collect(100, 20*time.Second)
	if ops := countOps(evs); ops["insert"] != 100 || len(ops) != 1 {
		t.Fatalf("the stream through the mongos while the balancer ran: %v; want exactly the 100 inserts", ops)
	}
	before := evs[0].Lookup("_id").Document()
	if err := sc.RemoveShard("shard0"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.CountDocuments(ctx(t), bson.D{}); err != nil || n != 100 {
		t.Fatalf("after removing shard0: %d documents (%v); want 100", n, err)
	}
	_, _, err := tryOpenRaw(t, db, "items", bson.D{{Key: "resumeAfter", Value: before}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 286 {
		t.Fatalf("resuming from before the removal: %v; want ChangeStreamHistoryLost (286)", err)
	}
}

// TestShardedExpandedAndImages: through the mongos, a sharded collection
// with pre- and post-images enabled (on every shard's copy) gives
// fullDocumentBeforeChange and fullDocument from both shards; an event
// over 16 MiB is split into fragments by $changeStreamSplitLargeEvent and a
// stream resumed from the first continues with the second;
// showExpandedEvents shows shardCollection, after the createIndexes of
// the hashed shard key's index it makes on the empty collection (as
// jstests/change_streams/shard_collection_event.js allows), and
// reshardCollection (with the new UUID, which later events carry).
func TestShardedExpandedAndImages(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	if err := db.CreateCollection(ctx(t), "items", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	c := db.Collection("items")
	s, _ := openRaw(t, db, "items", bson.D{{Key: "showExpandedEvents", Value: true}, {Key: "fullDocument", Value: "required"}, {Key: "fullDocumentBeforeChange", Value: "required"}})
	shardCollection(t, client, "shop.items", bson.D{{Key: "_id", Value: "hashed"}})
	insertEach(t, c, 0, 6, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}} })
	if _, err := c.UpdateMany(ctx(t), bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	evs := s.collect(14, 20*time.Second)
	if op := evs[0].Lookup("operationType").StringValue(); op != "createIndexes" || evs[0].Lookup("operationDescription", "indexes", "0", "key", "_id").StringValue() != "hashed" {
		t.Fatalf("first event %s; want createIndexes of {_id: \"hashed\"}", evs[0])
	}
	evs = evs[1:]
	if op := evs[0].Lookup("operationType").StringValue(); op != "shardCollection" {
		t.Fatalf("second event %s; want shardCollection", op)
	}
	if k := evs[0].Lookup("operationDescription", "shardKey", "_id").StringValue(); k != "hashed" {
		t.Fatalf("shardCollection operationDescription %s; want shardKey {_id: hashed}", evs[0].Lookup("operationDescription"))
	}
	oldUUID := evs[0].Lookup("collectionUUID")
	for _, ev := range evs[7:] {
		if ev.Lookup("operationType").StringValue() != "update" || ev.Lookup("fullDocumentBeforeChange", "v").Int32() != 0 || ev.Lookup("fullDocument", "v").Int32() != 1 {
			t.Fatalf("update event %s; want pre-image v 0 and post-image v 1", ev)
		}
	}
	for i, srv := range sc.Shards() {
		if len(shardDocs(t, srv, "shop", "items")) == 0 {
			t.Fatalf("shard %d holds none of the documents; the images must come from both", i)
		}
	}

	// reshardCollection: an event with the new UUID, which the next
	// events carry.
	adminCommand(t, client, bson.D{{Key: "reshardCollection", Value: "shop.items"}, {Key: "key", Value: bson.D{{Key: "v", Value: 1}}}})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 100}, {Key: "v", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	evs = s.collect(2, 20*time.Second)
	re := evs[0]
	if re.Lookup("operationType").StringValue() != "reshardCollection" || re.Lookup("operationDescription", "oldShardKey", "_id").StringValue() != "hashed" {
		t.Fatalf("event after reshardCollection %s; want reshardCollection with oldShardKey {_id: hashed}", re)
	}
	newUUID := re.Lookup("operationDescription", "reshardUUID")
	if newUUID.Equal(oldUUID) || !evs[1].Lookup("collectionUUID").Equal(newUUID) {
		t.Fatalf("reshardUUID %s (old %s), next event's collectionUUID %s; want the new UUID on the next event", newUUID, oldUUID, evs[1].Lookup("collectionUUID"))
	}
	if keys, _ := evs[1].Lookup("documentKey").Document().Elements(); len(keys) != 2 || keys[0].Key() != "v" {
		t.Fatalf("documentKey after resharding %s; want {v, _id}", evs[1].Lookup("documentKey"))
	}

	// An event over 16 MiB, split.
	big := strings.Repeat("a", 10<<20)
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 200}, {Key: "v", Value: 7}, {Key: "big", Value: big}}); err != nil {
		t.Fatal(err)
	}
	sp, _ := openRaw(t, db, "items", bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}}, bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}})
	if _, err := c.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: 200}, {Key: "v", Value: 7}}, bson.D{{Key: "$set", Value: bson.D{{Key: "big", Value: strings.Repeat("b", 10<<20)}}}}); err != nil {
		t.Fatal(err)
	}
	frags := sp.collect(2, 20*time.Second)
	if f := frags[0].Lookup("splitEvent", "fragment").Int32(); f != 1 || frags[1].Lookup("splitEvent", "fragment").Int32() != 2 {
		t.Fatalf("fragments %s, %s; want 1 and 2 of 2", frags[0].Lookup("splitEvent"), frags[1].Lookup("splitEvent"))
	}
	rs, _ := openRaw(t, db, "items", bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}, {Key: "resumeAfter", Value: frags[0].Lookup("_id").Document()}},
		bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}})
	if got := rs.collect(1, 20*time.Second)[0]; got.Lookup("splitEvent", "fragment").Int32() != 2 || evData(got) != evData(frags[1]) {
		t.Fatalf("resumed from fragment 1: %s; want fragment 2", got.Lookup("splitEvent"))
	}
}

// TestShardedBalancerStop: balancerStop stops the balancer's rounds (it
// returns once a round in progress has ended) and config.settings says
// so; balancerStatus reports the mode; balancerStart starts the rounds
// again, and the balancer then spreads what piled up on one shard.
func TestShardedBalancerStop(t *testing.T) {
	client, sc := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond), mongotest.BalancerInterval(20*time.Millisecond))
	admin := client.Database("admin")
	status := func() bson.Raw {
		t.Helper()
		var st bson.Raw
		if err := admin.RunCommand(ctx(t), bson.D{{Key: "balancerStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if mode := status().Lookup("mode").StringValue(); mode != "full" {
		t.Errorf("balancerStatus mode %q with the balancer running; want full", mode)
	}
	adminCommand(t, client, bson.D{{Key: "balancerStop", Value: 1}})
	if st := status(); st.Lookup("mode").StringValue() != "off" || st.Lookup("inBalancerRound").Boolean() {
		t.Errorf("balancerStatus after balancerStop: %v; want mode off, not in a round", st)
	}
	var settings bson.M
	if err := client.Database("config").Collection("settings").FindOne(ctx(t), bson.D{{Key: "_id", Value: "balancer"}}).Decode(&settings); err != nil ||
		settings["mode"] != "off" || settings["stopped"] != true {
		t.Errorf("config.settings balancer after balancerStop: %v (%v); want mode off, stopped", settings, err)
	}
	c := client.Database("shop").Collection("items")
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}}) // one chunk, on shard0
	insertEach(t, c, 0, 100, func(i int) bson.D { return bson.D{{Key: "k", Value: i}} })
	// 25 of the balancer's 20 ms ticks: a running balancer moves a range
	// at the first of them.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		if n := len(shardDocs(t, sc.Shards()[1], "shop", "items")); n != 0 {
			t.Fatalf("shard1 holds %d documents while the balancer is stopped; want 0", n)
		}
	}
	adminCommand(t, client, bson.D{{Key: "balancerStart", Value: 1}})
	until(t, 20*time.Second, func() error {
		if n := len(shardDocs(t, sc.Shards()[1], "shop", "items")); n < 30 {
			return fmt.Errorf("shard1 holds %d of 100 documents after balancerStart", n)
		}
		return nil
	})
	if mode := status().Lookup("mode").StringValue(); mode != "full" {
		t.Errorf("balancerStatus mode %q after balancerStart; want full", mode)
	}
}

// TestShardedResumedFirstBatchToken: a stream opened through the mongos
// (resumed after an event, or from a time) with changes already in the
// shards' oplogs returns an empty first batch whose postBatchResumeToken
// does not pass those changes: a client that resumes from it (a driver
// after an error, a consumer that checkpointed it) still gets every one.
// A mongos opens its shard cursors with batchSize 0, so its first
// postBatchResumeToken is the resume point.
func TestShardedResumedFirstBatchToken(t *testing.T) {
	client, _ := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("carts")
	shardCollection(t, client, "shop.carts", bson.D{{Key: "_id", Value: "hashed"}})
	s, _ := openRaw(t, db, "carts", bson.D{})
	insertEach(t, c, 0, 20, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}} })
	evs := s.collect(20, 20*time.Second)
	for _, start := range []bson.D{
		{{Key: "resumeAfter", Value: evs[4].Lookup("_id").Document()}},
		{{Key: "startAtOperationTime", Value: func() bson.Timestamp {
			t, i := evs[5].Lookup("clusterTime").Timestamp()
			return bson.Timestamp{T: t, I: i}
		}()}},
	} {
		r, first := openRaw(t, db, "carts", start)
		if len(first) != 0 {
			t.Fatalf("%s: first batch has %d events; want none", start[0].Key, len(first))
		}
		if r.pbrt >= evData(evs[5]) {
			t.Errorf("%s: the first batch's postBatchResumeToken %s passes event 5 (%s), which it did not return", start[0].Key, r.pbrt, evData(evs[5]))
		}
		again, _ := openRaw(t, db, "carts", bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: r.pbrt}}}})
		got := again.collect(15, 20*time.Second)
		if evData(got[0]) != evData(evs[5]) {
			t.Errorf("%s, then resumed from its first postBatchResumeToken: first event %s; want event 5 %s", start[0].Key, evData(got[0]), evData(evs[5]))
		}
	}
}
