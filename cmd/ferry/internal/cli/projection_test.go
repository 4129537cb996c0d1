package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/poll"
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
	env := newProjectionEnv(t, "on_history_lost: backfill", "", mongotest.OplogMaxEntries(3000))
	cfgPath, client := env.cfgPath, env.client
	ctx := context.Background()
	src, proj := env.src, env.proj
	converged := func(run *running) {
		t.Helper()
		poll.Until(t, 30*time.Second, run.converged(t, src, proj))
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
	if n := strings.Count(logs, `"msg":"snapshot started"`); n < 2 {
		t.Fatalf("%d backfills started, want one per partition (the history was lost on both):\n%s", n, logs)
	}
	n, _ := src.CountDocuments(ctx, bson.D{})
	t.Logf("projection == source (%d documents) after history lost on both partitions", n)
}

// metricValue reads one sample from the daemon's /metrics ("" if absent).
func metricValue(t *testing.T, run *running, sample string) string {
	t.Helper()
	resp, err := http.Get("http://" + run.addr(t) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestRunMongoProjectionForcedReplay: the daemon applies changes to the
// projection in transactional mode; then, as if it had crashed after its
// transactions committed and before its checkpoints, its checkpoints are
// rewound to where they started and it runs again. Every change is
// delivered a second time, and every redelivery is absorbed by the ledger:
// no projection document is written again (their write times stay), the
// ledger holds one entry per change, and ferry_ledger_duplicates_total
// counts the replays.
func TestRunMongoProjectionForcedReplay(t *testing.T) {
	env := newProjectionEnv(t, "", "")
	cfgPath, client := env.cfgPath, env.client
	ctx := context.Background()
	src, proj := env.src, env.proj
	cps := client.Database("ferry_state").Collection("checkpoints")
	ledger := client.Database("ferry_state").Collection("ledger")

	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry_state", 2)
	// The start positions the replay goes back to.
	type position struct{ id, token bson.RawValue }
	var start []position
	cur, err := cps.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		start = append(start, position{cur.Current.Lookup("_id"), cur.Current.Lookup("token")})
	}
	if err := cur.Err(); err != nil || len(start) != 2 {
		t.Fatalf("start checkpoints: %d (%v)", len(start), err)
	}
	const inserts, updates, deletes = 30, 15, 5
	for i := range inserts {
		if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range updates {
		if _, err := src.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range deletes {
		if _, err := src.DeleteOne(ctx, bson.D{{Key: "_id", Value: inserts - 1 - i}}); err != nil {
			t.Fatal(err)
		}
	}
	const changes = inserts + updates + deletes
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if n, _ := ledger.CountDocuments(ctx, bson.D{}); n != changes {
			return fmt.Errorf("%d ledger entries, want %d", n, changes)
		}
		if diff := projectionDiff(t, src, proj); diff != "" {
			return fmt.Errorf("projection differs from the source: %s", diff)
		}
		return nil
	})
	run.stop(t)
	written := docsOf(t, proj, bson.D{}, nil) // every document with its _ferry stamp (write time included)

	// The crash: the checkpoints never moved past the start.
	for _, p := range start {
		res, err := cps.UpdateOne(ctx, bson.D{{Key: "_id", Value: p.id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: p.token}}}})
		if err != nil || res.MatchedCount != 1 {
			t.Fatalf("rewinding checkpoint %s: %v (%d matched)", p.id, err, res.MatchedCount)
		}
	}
	run = startRun(t, cfgPath)
	var dups string
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if dups = metricValue(t, run, `ferry_ledger_duplicates_total{stream="orders"}`); dups != fmt.Sprint(changes) {
			return fmt.Errorf("ferry_ledger_duplicates_total = %s, want %d", dups, changes)
		}
		return nil
	})
	run.stop(t)
	n, _ := ledger.CountDocuments(ctx, bson.D{})
	after := docsOf(t, proj, bson.D{}, nil)
	rewritten := 0
	for id, doc := range written {
		if after[id] != doc {
			rewritten++
			t.Errorf("document %s written again by the replay:\n before %s\n after  %s", id, doc, after[id])
		}
	}
	fmt.Printf("mongoproj forced replay (transactional): %d changes delivered twice; ledger holds %d entries, %s duplicates absorbed, %d projection documents written again\n",
		changes, n, dups, rewritten)
	if n != changes || len(after) != len(written) {
		t.Fatalf("ledger holds %d entries (want %d); projection %d documents (want %d)", n, changes, len(after), len(written))
	}
	if d := projectionDiff(t, src, proj); d != "" {
		t.Fatalf("the projection differs from the source after the replay:\n%s", d)
	}
}

// projectionEnv is an emulator and a daemon configuration whose one stream,
// "orders", projects shop.orders into readmodel.orders (mongodb sink) in a
// two-partition transactional group, with the state in ferry_state.
type projectionEnv struct {
	srv       *mongotest.Server
	cfgPath   string
	client    *mongo.Client
	src, proj *mongo.Collection
}

// newProjectionEnv starts the emulator (with opts) and writes the
// configuration; streamExtra is added to the stream (one "key: value" line)
// and sinkExtra to the mongodb sink's flow mapping (", key: value").
func newProjectionEnv(t *testing.T, streamExtra, sinkExtra string, opts ...mongotest.Option) *projectionEnv {
	t.Helper()
	srv, client := emulator(t, opts...)
	if streamExtra != "" {
		streamExtra = "\n    " + streamExtra
	}
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, full_document: updateLookup}
    group: {partitions: 2, lease_ttl: 2s}
    delivery: {mode: transactional}`+streamExtra+`
    sink: {mongodb: {database: readmodel, collection: orders`+sinkExtra+`}}
`)
	// Collections written inside transactions exist beforehand.
	_ = client.Database("readmodel").CreateCollection(context.Background(), "orders")
	return &projectionEnv{srv: srv, cfgPath: cfgPath, client: client,
		src: client.Database("shop").Collection("orders"), proj: client.Database("readmodel").Collection("orders")}
}

// TestBackfillFinishesWhileItsWritesRollTheOplog: a backfill whose own
// writes (ledger and projection, in the source's oplog: the state store is
// the source's cluster) push its start marker off a small oplog, with
// writes continuing. The sequential backfill then restarted for ever (15
// further backfills in the 60 s after the projection had converged, status
// needs-backfill, lag growing); streaming from the marker while the scan
// runs, each partition backfills once, the checkpoints are running again,
// and the projection equals the source.
func TestBackfillFinishesWhileItsWritesRollTheOplog(t *testing.T) {
	env := newProjectionEnv(t, "on_history_lost: backfill", "", mongotest.OplogMaxEntries(400))
	// No takeover happens here: a longer lease keeps a loaded machine's
	// slow renewals (measured: i/o timeouts with lease_ttl 2s at a load
	// average of 20) from handing the partitions off mid-backfill, which
	// restarts the scan — that is not what this test is about.
	cfg, err := os.ReadFile(env.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env.cfgPath, []byte(strings.Replace(string(cfg), "lease_ttl: 2s", "lease_ttl: 15s", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := startRun(t, env.cfgPath)
	run.waitStarted(t, env.client, "ferry_state", 2)
	run.stop(t)
	// The source has far more documents than the oplog has room for their
	// backfill writes; the checkpoints are pushed off the oplog.
	var docs []any
	for i := range 1500 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}})
	}
	if _, err := env.src.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Writes go on during the backfill.
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = env.src.UpdateOne(ctx, bson.D{{Key: "_id", Value: i % 1500}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: i}}}})
			time.Sleep(2 * time.Millisecond) // a steady write rate, not synchronisation
		}
	}()
	run = startRun(t, env.cfgPath)
	cps := env.client.Database("ferry_state").Collection("checkpoints")
	// 1,500 transactional backfill writes: seconds alone, much longer on a
	// loaded machine, so a generous deadline (not a sleep).
	poll.Until(t, 2*time.Minute, func() error {
		run.alive(t)
		n, _ := cps.CountDocuments(ctx, bson.D{{Key: "stream", Value: "orders"}, {Key: "state", Value: ""}, {Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		finished := strings.Count(run.errOut.String(), `"msg":"snapshot finished"`)
		if n != 2 || finished != 2 {
			return fmt.Errorf("%d of 2 checkpoints running, %d of 2 backfills finished, %d started; log tail:\n%s",
				n, finished, strings.Count(run.errOut.String(), `"msg":"snapshot started"`), tail(run.errOut.String(), 3000))
		}
		return nil
	})
	// The writes go on for a while after the backfill: a backfill whose
	// marker fell off would fail and start again meanwhile.
	marker := len(run.errOut.String())
	time.Sleep(3 * time.Second) // the window observed, not synchronisation
	close(stop)
	<-writerDone
	if later := run.errOut.String()[marker:]; strings.Contains(later, `"msg":"snapshot started"`) || strings.Contains(later, "history-lost") {
		t.Fatalf("the snapshot started again after it had finished:\n%s", later)
	}
	poll.Until(t, 30*time.Second, run.converged(t, env.src, env.proj))
	run.stop(t)
	if n := strings.Count(run.errOut.String(), `"msg":"snapshot started"`); n > 2 {
		t.Fatalf("%d backfills started for 2 partitions: the backfill restarted", n)
	}
}
