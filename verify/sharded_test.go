package verify_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/verify"
)

// shardByRegion shards ns on {region: 1} with the regions from "m" on
// ("us") on another shard than those before ("eu"), through the mongos.
func shardByRegion(t *testing.T, client *mongo.Client, db, coll string) {
	t.Helper()
	ctx := context.Background()
	ns := db + "." + coll
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		raw, err := client.Database("admin").RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%s: %v", cmd[0].Key, err)
		}
		return raw
	}
	_ = client.Database("admin").RunCommand(ctx, bson.D{{Key: "enableSharding", Value: db}}).Err()
	run(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "region", Value: 1}}}})
	run(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "region", Value: "m"}}}})
	var meta struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&meta); err != nil {
		t.Fatal(err)
	}
	var chunk struct {
		Shard string `bson:"shard"`
	}
	if err := client.Database("config").Collection("chunks").FindOne(ctx, bson.D{{Key: "uuid", Value: meta.UUID},
		{Key: "min.region", Value: "m"}}).Decode(&chunk); err != nil {
		t.Fatalf("the chunk from region m: %v", err)
	}
	cur, err := client.Database("config").Collection("shards").Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: chunk.Shard}}}})
	if err != nil {
		t.Fatal(err)
	}
	var others []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &others); err != nil || len(others) == 0 {
		t.Fatalf("no other shard than %s (%v)", chunk.Shard, err)
	}
	run(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "region", Value: "us"}}}, {Key: "to", Value: others[0].ID}})
}

// TestProjectionShardedSameID: on a collection sharded on {region: 1},
// {region: "eu", _id: 1} and {region: "us", _id: 1} live on two shards;
// the mongodb sink projects them as two documents, keyed by documentKey,
// and the projection diff matches each source document with its own
// (a clean projection is clean, one stale and one missing document are
// named by their documentKeys); the window re-read counts every change of
// both.
func TestProjectionShardedSameID(t *testing.T) {
	client, _ := emutest.ShardedClient(t, 2, emutest.NoopInterval(200*time.Millisecond))
	ctx := context.Background()
	for _, db := range []string{"shopv", "readv", "ferryv"} {
		_ = client.Database(db).Drop(ctx)
	}
	shardByRegion(t, client, "shopv", "orders")
	source := client.Database("shopv").Collection("orders")
	target := client.Database("readv").Collection("orders")
	state := client.Database("ferryv")
	cps, err := mongostore.New(state)
	if err != nil {
		t.Fatal(err)
	}
	dlq := deadletter.NewMongo(state, "dlq")
	s, err := mongoproj.New(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	applied := map[string]bool{}
	h := sink.Handler(s)
	opts := []ferry.Option{ferry.Stream("orders"), ferry.WatchCollection("shopv", "orders"), ferry.Checkpoints(cps), ferry.DeadLetters(dlq),
		ferry.FullDocument("updateLookup"), ferry.CommitEvery(1, 20*time.Millisecond), ferry.MaxAwaitTime(50 * time.Millisecond)}
	c, err := ferry.NewConsumer(client, func(ctx context.Context, ev *ferry.Event) error {
		if err := h(ctx, ev); err != nil {
			return err
		}
		mu.Lock()
		applied[ev.ID()] = true
		mu.Unlock()
		return nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("consumer: %v", err)
		}
	}()
	poll.Until(t, 20*time.Second, func() error {
		cp, err := cps.Load(ctx, "orders", 0)
		if err != nil || cp.Token == nil {
			return fmt.Errorf("no checkpoint yet (%v)", err)
		}
		return nil
	})
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	for _, d := range []bson.D{
		{{Key: "_id", Value: 1}, {Key: "region", Value: "eu"}, {Key: "total", Value: 10}},
		{{Key: "_id", Value: 1}, {Key: "region", Value: "us"}, {Key: "total", Value: 20}},
		{{Key: "_id", Value: 2}, {Key: "region", Value: "eu"}, {Key: "total", Value: 30}},
	} {
		if _, err := source.InsertOne(sctx, d); err != nil {
			t.Fatal(err)
		}
	}
	from := *sess.OperationTime()
	if _, err := source.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: "us"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "total", Value: 21}}}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(applied) < 4 {
			return fmt.Errorf("%d of 4 changes applied", len(applied))
		}
		return nil
	})
	r, err := verify.Projection(ctx, source, target, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clean() || r.Source != 3 || r.Target != 3 {
		t.Fatalf("%v (missing %v, extra %v, stale %v); want 3 documents each side, clean", r, r.MissingIDs, r.ExtraIDs, r.StaleIDs)
	}

	// The window re-read counts each document's changes (the consumer
	// has no ledger: they are pending or unverifiable, none merged).
	rep, err := verify.Stream(ctx, verify.Config{Client: client, Stream: "orders", Options: opts[1:2],
		Checkpoints: cps, DeadLetters: dlq, From: bson.Timestamp{T: from.T - 1}, FromOplogStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 4 || rep.Missing != 0 {
		t.Errorf("%v; want the 4 changes of the 3 documents, none missing", rep)
	}

	// The projection of {region: "us", _id: 1} goes stale, that of
	// {region: "eu", _id: 2} missing: each is named by its documentKey.
	us := bson.D{{Key: "region", Value: "us"}, {Key: "_id", Value: int32(1)}}
	eu2 := bson.D{{Key: "region", Value: "eu"}, {Key: "_id", Value: int32(2)}}
	if _, err := target.UpdateOne(ctx, bson.D{{Key: "_id", Value: us}}, bson.D{{Key: "$set", Value: bson.D{{Key: "total", Value: 0}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := target.DeleteOne(ctx, bson.D{{Key: "_id", Value: eu2}}); err != nil {
		t.Fatal(err)
	}
	r, err = verify.Projection(ctx, source, target, 5)
	if err != nil {
		t.Fatal(err)
	}
	name := func(ids []bson.RawValue) string {
		if len(ids) != 1 {
			return fmt.Sprint(ids)
		}
		return ids[0].String()
	}
	wantUS, wantEU2 := rawKey(t, us), rawKey(t, eu2)
	if r.Source != 3 || r.Target != 2 || r.Stale != 1 || r.Missing != 1 || r.Extra != 0 ||
		name(r.StaleIDs) != wantUS || name(r.MissingIDs) != wantEU2 {
		t.Errorf("after spoiling the projection: %v, stale %s, missing %s; want stale %s and missing %s",
			r, name(r.StaleIDs), name(r.MissingIDs), wantUS, wantEU2)
	}
}

func rawKey(t *testing.T, d bson.D) string {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: b}.String()
}
