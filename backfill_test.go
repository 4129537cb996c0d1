package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestStopDuringBackfill stops a consumer while its backfill scan has events
// in the lanes that cannot finish: the handler blocks until its context
// ends, so the drain deadline abandons them. Run returns (the scan lets go
// of the abandoned events instead of waiting for them forever), the
// checkpoint still says needs-backfill, and the next run repeats the scan
// and completes it.
func TestStopDuringBackfill(t *testing.T) {
	e := newEnv(t)
	src := e.db.Collection("c")
	for i := range 40 {
		insert(t, src, bson.D{{Key: "_id", Value: i}})
	}
	blocked := make(chan struct{}, 64)
	stuck := func(ctx context.Context, ev *ferry.Event) error {
		if ev.Backfill {
			blocked <- struct{}{}
			<-ctx.Done() // a sink that never answers
			return ctx.Err()
		}
		return nil
	}
	r := start(t, e.client, stuck, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.Concurrency(2),
		ferry.DrainTimeout(100*time.Millisecond))...)
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("no backfill event reached the handler")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop(t) }()
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after a stop during the backfill: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after a stop during the backfill: the scan waits for abandoned events")
	}
	cps, err := e.store.List(context.Background(), "s")
	if err != nil || len(cps) != 1 {
		t.Fatalf("checkpoints after the interrupted snapshot = %+v (%v)", cps, err)
	}
	if p, ok, err := ferry.SnapshotOf(cps[0]); err != nil || !ok || !p.Running() || p.Done != 0 {
		t.Fatalf("snapshot after the interrupted chunk = %+v %v (%v), want one in progress with nothing done", p, ok, err)
	}
	// The next run repeats the scan and completes it.
	applied := make(chan struct{}, 64)
	r = start(t, e.client, func(_ context.Context, ev *ferry.Event) error {
		if ev.Backfill {
			applied <- struct{}{}
		}
		return nil
	}, e.opts(ferry.StartAt(ferry.StartWithBackfill()))...)
	for i := range 40 {
		select {
		case <-applied:
		case <-time.After(20 * time.Second):
			t.Fatalf("the repeated backfill applied %d of 40 documents", i)
		}
	}
	poll.Until(t, 20*time.Second, func() error {
		cps, err := e.store.List(context.Background(), "s")
		if err == nil && len(cps) == 1 && cps[0].State == checkpoint.StateRunning && cps[0].Token != nil {
			if p, ok, _ := ferry.SnapshotOf(cps[0]); ok && !p.Finished.IsZero() && p.Done == 40 {
				return nil
			}
		}
		return fmt.Errorf("checkpoint after the repeated backfill = %+v (%v), want running with a token", cps, err)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillDocumentKeyOnShardedCollection: on a sharded collection a
// change's documentKey is the shard key's fields in order, then _id, and
// a backfill event carries the same one (read from config.collections, as
// mongos serves it): {region, _id}, {"a.b", _id} for a dotted shard key,
// and {_id} alone for a document without the shard key field (the server
// leaves a missing field out). The emulator is not sharded: the test
// writes the config.collections entry mongos would hold.
func TestBackfillDocumentKeyOnShardedCollection(t *testing.T) {
	e := newEnv(t)
	if e.srv == nil {
		t.Skip("writes config.collections, which a real deployment owns")
	}
	ctx := context.Background()
	cfgColl := e.client.Database("config").Collection("collections")
	for _, d := range []bson.D{
		{{Key: "_id", Value: e.db.Name() + ".c"}, {Key: "key", Value: bson.D{{Key: "region", Value: 1}}}},
		{{Key: "_id", Value: e.db.Name() + ".d"}, {Key: "key", Value: bson.D{{Key: "a.b", Value: "hashed"}, {Key: "_id", Value: 1}}}},
	} {
		if _, err := cfgColl.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = cfgColl.DeleteMany(context.Background(), bson.D{}) })
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: "eu"}, {Key: "v", Value: 1}})
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 2}})
	insert(t, e.db.Collection("d"), bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: bson.D{{Key: "b", Value: 7}}}})
	rec := newRecorder()
	r := start(t, e.client, rec.handle, append(e.opts(ferry.StartAt(ferry.StartWithBackfill())), ferry.WatchDatabase(e.db.Name()))...)
	got := map[string]string{}
	for _, ev := range rec.waitFor(t, 3) {
		if ev.Backfill {
			got[ev.Namespace.Coll+"/"+ev.DocumentKey.Lookup("_id").String()] = ev.DocumentKey.String()
		}
	}
	want := map[string]string{
		`c/{"$numberInt":"1"}`: `{"region": "eu","_id": {"$numberInt":"1"}}`,
		`c/{"$numberInt":"2"}`: `{"_id": {"$numberInt":"2"}}`,
		`d/{"$numberInt":"3"}`: `{"a.b": {"$numberInt":"7"},"_id": {"$numberInt":"3"}}`,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("backfill documentKey of %s = %s, want %s", k, got[k], w)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillStreamsFromItsMarkerAtOnce: with a sweeper, the backfill's
// stream must read from its start marker as soon as the marker is taken;
// whatever else the backfill asks the server first (the server's time for
// the sweep, closing a cursor) may be slow, and meanwhile a busy oplog
// rolls past the marker. Here the server answers the consumer's hello and
// killCursors a second late while other writes roll a 60-entry oplog in
// about 100 ms. The backfill took its marker from one stream, closed it,
// read the server's time and opened the stream again at the marker: the
// marker was gone by then, twice, and the stream failed (history-lost).
// Now the marker's own stream is kept open and read at once, and the
// backfill ends.
func TestBackfillStreamsFromItsMarkerAtOnce(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(60))
	if e.srv == nil {
		t.Skip("needs the emulator's small oplog and fail points")
	}
	ctx := context.Background()
	src := e.db.Collection("c")
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	waitStarted(t, e.store)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i := range 100 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := src.InsertMany(ctx, docs); err != nil { // the checkpoint falls off the oplog
		t.Fatal(err)
	}
	const app = "backfiller"
	client, err := mongo.Connect(options.Client().ApplyURI(e.srv.URI()).SetAppName(app))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	if err := client.Ping(ctx, nil); err != nil { // connected before the fail point slows the handshake
		t.Fatal(err)
	}
	noise := stopNoise(t, e.db.Collection("noise"))
	defer noise()
	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"hello", "killCursors"}, BlockFor: time.Second, AppName: app})
	defer e.srv.ClearFailPoints()
	var swept atomic.Bool
	sweeper := func(context.Context, time.Time) error { swept.Store(true); return nil }
	var logs lockedBuffer
	rec := newRecorder()
	r = start(t, client, rec.handle, e.opts(ferry.OnHistoryLost(ferry.HistoryLostBackfill), ferry.WithSweeper(sweeper),
		ferry.Logger(slog.New(slog.NewTextHandler(&logs, nil))))...)
	failed := make(chan error, 1)
	go func() { failed <- r.wait(t) }()
	deadline := time.After(30 * time.Second)
	for {
		cp, err := e.store.Load(ctx, "s", 0)
		if err == nil && cp.State == checkpoint.StateRunning && swept.Load() {
			break
		}
		select {
		case err := <-failed:
			t.Fatalf("Run = %v; the backfill never ended (%d backfills):\n%s", err, strings.Count(logs.String(), "snapshot started"), logs.String())
		case <-deadline:
			t.Fatalf("the checkpoint never left needs-backfill in 30 s (%d backfills)", strings.Count(logs.String(), "snapshot started"))
		case <-time.After(20 * time.Millisecond):
		}
	}
	// One recovery: the checkpoint's history was lost once, the marker's
	// never.
	if n := strings.Count(logs.String(), "resume token no longer in the oplog"); n != 1 || strings.Contains(logs.String(), "start marker left the oplog") {
		t.Errorf("%d recoveries from lost history, want 1:\n%s", n, logs.String())
	}
	scanned := map[int32]bool{}
	for _, ev := range rec.snapshot() {
		if ev.Backfill {
			scanned[ev.DocumentKey.Lookup("_id").Int32()] = true
		}
	}
	if len(scanned) != 100 {
		t.Errorf("the scan handed on %d of 100 documents", len(scanned))
	}
}
