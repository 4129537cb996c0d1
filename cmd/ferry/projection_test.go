package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// docsOf returns a collection's documents by _id, rendered as Extended JSON.
func docsOf(t *testing.T, c *mongo.Collection, filter, projection bson.D) map[string]string {
	t.Helper()
	ctx := context.Background()
	opts := options.Find()
	if projection != nil {
		opts.SetProjection(projection)
	}
	cur, err := c.Find(ctx, filter, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	out := map[string]string{}
	for cur.Next(ctx) {
		out[cur.Current.Lookup("_id").String()] = cur.Current.String()
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// projectionDiff compares the projection's live documents with the source,
// document for document; "" means equal.
func projectionDiff(t *testing.T, source, target *mongo.Collection) string {
	t.Helper()
	src := docsOf(t, source, bson.D{}, nil)
	dst := docsOf(t, target, mongoproj.Live(), mongoproj.Hidden())
	var diffs []string
	for id, doc := range src {
		if dst[id] != doc {
			diffs = append(diffs, fmt.Sprintf("%s: source %s, projection %q", id, doc, dst[id]))
		}
	}
	for id, doc := range dst {
		if _, ok := src[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: only in the projection: %s", id, doc))
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "\n")
}

// TestRunMongoProjectionAfterHistoryLost runs the daemon with the mongodb
// sink in a two-partition group, stops it, changes the source while nobody
// reads and floods the oplog until both checkpoints have fallen off it.
// Restarted with on_history_lost: backfill, each partition rescans its
// slice and sweeps only its own documents: the projection ends equal to the
// source, document for document, deletes made during the outage included.
func TestRunMongoProjectionAfterHistoryLost(t *testing.T) {
	srv := mongotest.New(t, mongotest.OplogMaxEntries(3000))
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, full_document: updateLookup}
    group: {partitions: 2, lease_ttl: 2s}
    delivery: {mode: transactional}
    on_history_lost: backfill
    sink: {mongodb: {database: readmodel, collection: orders}}
`)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx := context.Background()
	_ = client.Database("readmodel").CreateCollection(ctx, "orders")
	src := client.Database("shop").Collection("orders")
	proj := client.Database("readmodel").Collection("orders")
	converged := func(run *running) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			run.alive(t)
			diff := projectionDiff(t, src, proj)
			if diff == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the projection differs from the source:\n%s", diff)
			}
			time.Sleep(10 * time.Millisecond) // polling interval
		}
	}

	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry_state", 2)
	var docs []any
	for i := range 60 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}})
	}
	if _, err := src.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	converged(run)
	run.stop(t)

	// The outage: deletes, updates and inserts nobody streams, then a
	// flood that pushes both checkpoints off the oplog.
	if _, err := src.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 20}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 40}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: -1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: 100}, {Key: "v", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	noise := client.Database("shop").Collection("noise")
	for range 4 {
		batch := make([]any, 1000)
		for i := range batch {
			batch[i] = bson.D{{Key: "n", Value: i}}
		}
		if _, err := noise.InsertMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}

	run = startRun(t, cfgPath)
	converged(run)
	// Changes after the backfill stream as usual.
	if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: 101}, {Key: "v", Value: 101}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteOne(ctx, bson.D{{Key: "_id", Value: 25}}); err != nil {
		t.Fatal(err)
	}
	converged(run)
	run.stop(t)
	logs := run.errOut.String()
	if n := strings.Count(logs, `"msg":"backfill started"`); n < 2 {
		t.Fatalf("%d backfills started, want one per partition (the history was lost on both):\n%s", n, logs)
	}
	n, _ := src.CountDocuments(ctx, bson.D{})
	t.Logf("projection == source (%d documents) after history lost on both partitions", n)
}
