package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestShardedHello: the driver sees the mongos as a mongos (topology
// Sharded), hello says what a mongos says (isdbgrid, no setName, no
// hosts, the limits, logicalSessionTimeoutMinutes, topologyVersion), and
// the driver's streaming monitor's awaitable hello waits instead of
// spinning.
func TestShardedHello(t *testing.T) {
	sc := mongotest.NewSharded(t, 2)
	var mu sync.Mutex
	var kinds []string
	var awaited []time.Duration
	mon := &event.ServerMonitor{
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			mu.Lock()
			kinds = append(kinds, e.NewDescription.Kind)
			mu.Unlock()
		},
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			if e.Awaited {
				mu.Lock()
				awaited = append(awaited, e.Duration)
				mu.Unlock()
			}
		},
	}
	client := connectClient(t, options.Client().ApplyURI(sc.URI()).SetServerMonitor(mon).SetHeartbeatInterval(500*time.Millisecond))
	var hello bson.M
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello["msg"] != "isdbgrid" || hello["isWritablePrimary"] != true {
		t.Errorf("hello: msg %v, isWritablePrimary %v; want isdbgrid, true", hello["msg"], hello["isWritablePrimary"])
	}
	for _, absent := range []string{"setName", "hosts", "primary", "secondary"} {
		if v, ok := hello[absent]; ok {
			t.Errorf("hello has %s = %v; a mongos sends none", absent, v)
		}
	}
	for _, present := range []string{"topologyVersion", "maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize", "localTime", "connectionId", "minWireVersion", "maxWireVersion"} {
		if _, ok := hello[present]; !ok {
			t.Errorf("hello lacks %s", present)
		}
	}
	if hello["logicalSessionTimeoutMinutes"] != int32(30) {
		t.Errorf("hello logicalSessionTimeoutMinutes %v, want 30", hello["logicalSessionTimeoutMinutes"])
	}
	until(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		sharded := false
		for _, k := range kinds {
			sharded = sharded || k == "Sharded"
		}
		if !sharded {
			return fmt.Errorf("topology kinds %v; want Sharded", kinds)
		}
		if len(awaited) == 0 {
			return errors.New("no awaited heartbeat has succeeded yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if awaited[0] < 400*time.Millisecond {
		t.Errorf("an awaited heartbeat took %v; the mongos should hold it for maxAwaitTimeMS (500 ms)", awaited[0])
	}
}

// shardDocs returns the documents of db.coll stored on a shard, read from
// the shard itself.
func shardDocs(t *testing.T, srv *mongotest.Server, db, coll string) []bson.M {
	t.Helper()
	c := connectClient(t, options.Client().ApplyURI(srv.URI()))
	cur, err := c.Database(db).Collection(coll).Find(ctx(t), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.M
	if err := cur.All(ctx(t), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShardedTransactionAcrossShards: each database lives on its primary
// shard (the one with the fewest databases when it is created), and a
// transaction through the mongos writes to both shards, or to neither
// when it aborts.
func TestShardedTransactionAcrossShards(t *testing.T) {
	sc := mongotest.NewSharded(t, 2)
	client := connectClient(t, options.Client().ApplyURI(sc.URI()))
	a := client.Database("alpha").Collection("c")
	b := client.Database("beta").Collection("c")
	for _, c := range []*mongo.Collection{a, b} {
		if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	var dbs []bson.M
	cur, err := client.Database("config").Collection("databases").Find(ctx(t), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx(t), &dbs); err != nil {
		t.Fatal(err)
	}
	if len(dbs) != 2 || dbs[0]["_id"] != "alpha" || dbs[0]["primary"] != "shard0" || dbs[1]["_id"] != "beta" || dbs[1]["primary"] != "shard1" {
		t.Fatalf("config.databases %v; want alpha on shard0, beta on shard1", dbs)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	_, err = sess.WithTransaction(ctx(t), func(sc context.Context) (any, error) {
		if _, err := a.InsertOne(sc, bson.D{{Key: "_id", Value: 1}}); err != nil {
			return nil, err
		}
		_, err := b.InsertOne(sc, bson.D{{Key: "_id", Value: 1}})
		return nil, err
	})
	if err != nil {
		t.Fatalf("transaction across shards: %v", err)
	}
	shards := sc.Shards()
	if got := shardDocs(t, shards[0], "alpha", "c"); len(got) != 2 {
		t.Errorf("shard0 has alpha.c %v; want _id 0 and 1", got)
	}
	if got := shardDocs(t, shards[1], "beta", "c"); len(got) != 2 {
		t.Errorf("shard1 has beta.c %v; want _id 0 and 1", got)
	}
	// An aborted transaction leaves nothing on either shard.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx(t), sess)
	if _, err := a.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.AbortTransaction(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*mongo.Collection{a, b} {
		if n, err := c.CountDocuments(ctx(t), bson.D{}); err != nil || n != 2 {
			t.Errorf("%s after an aborted transaction: %d documents (%v); want 2", c.Database().Name(), n, err)
		}
	}
}

// TestShardedRetryableWrite: a retryable write whose reply a shard loses
// (onPrimaryTransactionalWrite closes its connection after the write) is
// retried by the driver through the mongos and applied once.
func TestShardedRetryableWrite(t *testing.T) {
	sc := mongotest.NewSharded(t, 2)
	var mu sync.Mutex
	inserts := 0
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "insert" {
			mu.Lock()
			inserts++
			mu.Unlock()
		}
	}}
	client := connectClient(t, options.Client().ApplyURI(sc.URI()).SetMonitor(mon))
	c := client.Database("alpha").Collection("c")
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sc.Shards()[0].FailRetryableWrites(mongotest.RetryableWriteFailPoint{Times: 1})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("retryable insert through the mongos: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if inserts != 3 {
		t.Errorf("%d inserts sent; want 3 (the second retried once)", inserts)
	}
	if got := shardDocs(t, sc.Shards()[0], "alpha", "c"); len(got) != 2 {
		t.Errorf("shard0 has %v; want _id 0 and 1, each once", got)
	}
}

// TestShardedStateChangeError: a "not primary" error from the mongos
// carries no topologyVersion (a mongos attaches none), so the driver marks
// it Unknown; its streaming monitor's awaitable hello is answered at once,
// so the retried write goes through without waiting out the 10 s
// heartbeat. A statement of a transaction returns a recoveryToken.
func TestShardedStateChangeError(t *testing.T) {
	sc := mongotest.NewSharded(t, 1)
	client := connectClient(t, options.Client().ApplyURI(sc.URI()))
	admin := client.Database("admin")
	sc.Mongos().FailCommand(mongotest.FailPoint{Commands: []string{"ping"}, Times: 1, ErrorCode: 10107})
	var ce mongo.CommandError
	err := admin.RunCommand(ctx(t), bson.D{{Key: "ping", Value: 1}}).Err()
	if !errors.As(err, &ce) || ce.Code != 10107 {
		t.Fatalf("ping: %v; want NotWritablePrimary", err)
	}
	if tv, err := ce.Raw.LookupErr("topologyVersion"); err == nil {
		t.Errorf("the mongos' NotWritablePrimary carries topologyVersion %s; a mongos sends none", tv)
	}
	c := client.Database("alpha").Collection("c")
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sc.Mongos().FailCommand(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: 10107})
	start := time.Now()
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert retried after NotWritablePrimary: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the retried insert took %v; the mongos should answer the monitor's awaitable hello at once", d)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	var reply bson.Raw
	err = client.Database("alpha").RunCommand(mongo.NewSessionContext(ctx(t), sess),
		bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}}).Decode(&reply)
	if err != nil {
		t.Fatal(err)
	}
	if shard, _ := reply.Lookup("recoveryToken", "recoveryShardId").StringValueOK(); shard != "shard0" {
		t.Errorf("the statement's reply %s; want recoveryToken {recoveryShardId: shard0}", reply)
	}
	if err := sess.AbortTransaction(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestShardedTwoMongoses: with Mongoses(2) the URI lists both; each mongos
// routes to the same shards, but a cursor belongs to the mongos that
// opened it (a getMore on the other fails with CursorNotFound).
func TestShardedTwoMongoses(t *testing.T) {
	sc := mongotest.NewSharded(t, 2, mongotest.Mongoses(2))
	ms := sc.Mongoses()
	if len(ms) != 2 || sc.URI() != "mongodb://"+ms[0].Addr()+","+ms[1].Addr()+"/" {
		t.Fatalf("URI %s, mongoses %d; want both hosts", sc.URI(), len(ms))
	}
	first := connectClient(t, options.Client().ApplyURI("mongodb://"+ms[0].Addr()+"/?directConnection=true"))
	second := connectClient(t, options.Client().ApplyURI("mongodb://"+ms[1].Addr()+"/?directConnection=true"))
	c := first.Database("alpha").Collection("c")
	docs := make([]any, 5)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := c.InsertMany(ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	if n, err := second.Database("alpha").Collection("c").CountDocuments(ctx(t), bson.D{}); err != nil || n != 5 {
		t.Fatalf("the second mongos counts %d (%v); want the 5 documents the first inserted", n, err)
	}
	var reply bson.Raw
	if err := first.Database("alpha").RunCommand(ctx(t), bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}}).Decode(&reply); err != nil {
		t.Fatal(err)
	}
	id := reply.Lookup("cursor", "id").Int64()
	err := second.Database("alpha").RunCommand(ctx(t), bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 43 {
		t.Fatalf("getMore of the first mongos' cursor on the second: %v; want CursorNotFound (43)", err)
	}
	if err := first.Database("alpha").RunCommand(ctx(t), bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err(); err != nil {
		t.Fatalf("getMore on the mongos that opened the cursor: %v", err)
	}
}
