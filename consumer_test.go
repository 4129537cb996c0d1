package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/leakcheck"
	"github.com/ferry-io/ferry/internal/poll"
)

// env is one test's MongoDB (emulator or $FERRY_TEST_MONGODB_URI), client,
// source database and stores.
type env struct {
	t      *testing.T
	srv    *emutest.Server
	client *mongo.Client
	db     *mongo.Database
	store  checkpoint.Store
	dlq    *deadletter.Mongo
}

func newEnv(t *testing.T, opts ...emutest.Option) *env {
	t.Helper()
	client, srv := emutest.Client(t, opts...)
	return envOn(t, client, srv)
}

// envOn is the test's env on client (srv: the emulator, nil against a
// real server): a fresh database named for the test, a bolt checkpoint
// store and a dead-letter collection beside it.
func envOn(t *testing.T, client *mongo.Client, srv *emutest.Server) *env {
	t.Helper()
	name := envDBName(t)
	db := client.Database(name)
	_ = db.Drop(context.Background())
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &env{t: t, srv: srv, client: client, db: db, store: store, dlq: deadletter.NewMongo(client.Database(name+"_state"), "dlq")}
}

// envDBName is the test's database name (at most 50 bytes).
func envDBName(t *testing.T) string {
	name := "ferry_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 50 {
		name = name[:50]
	}
	return name
}

// useMongoStore switches the env's checkpoint store to MongoDB (the state
// database beside the source).
func (e *env) useMongoStore() {
	s, err := mongostore.New(e.client.Database(e.db.Name() + "_state"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = s
}

// eachStore runs f once per checkpoint store implementation.
func eachStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("bolt", func(t *testing.T) { f(t, newEnv(t)) })
	t.Run("mongo", func(t *testing.T) {
		e := newEnv(t)
		e.useMongoStore()
		f(t, e)
	})
}

func (e *env) opts(extra ...ferry.Option) []ferry.Option {
	base := []ferry.Option{
		ferry.Stream("s"),
		ferry.WatchCollection(e.db.Name(), "c"),
		ferry.Checkpoints(e.store),
		ferry.DeadLetters(e.dlq),
		ferry.CommitEvery(1, 20*time.Millisecond),
		ferry.MaxAwaitTime(50 * time.Millisecond),
		ferry.Retry(3, time.Millisecond, 5*time.Millisecond),
	}
	if os.Getenv("FERRY_TEST_LOG") != "" {
		// The consumer's log on stderr, for a failing test.
		base = append(base, ferry.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	return append(base, extra...)
}

// recorder is a handler that records every call.
type recorder struct {
	mu     sync.Mutex
	events []*ferry.Event
	notify chan struct{}
	fn     func(ctx context.Context, ev *ferry.Event) error
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) handle(ctx context.Context, ev *ferry.Event) error {
	if r.fn != nil {
		if err := r.fn(ctx, ev); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) snapshot() []*ferry.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*ferry.Event(nil), r.events...)
}

// waitFor waits until the recorder holds at least n events.
func (r *recorder) waitFor(t *testing.T, n int) []*ferry.Event {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		if evs := r.snapshot(); len(evs) >= n {
			return evs
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			t.Fatalf("handled %d events, want %d", len(r.snapshot()), n)
		}
	}
}

// running is a consumer running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, client *mongo.Client, h ferry.Handler, opts ...ferry.Option) *running {
	t.Helper()
	_, r := startConsumer(t, client, h, opts...)
	return r
}

// startConsumer is start, also returning the consumer.
func startConsumer(t *testing.T, client *mongo.Client, h ferry.Handler, opts ...ferry.Option) (*ferry.Consumer, *running) {
	t.Helper()
	c, err := ferry.NewConsumer(client, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, runInBackground(t, c)
}

// runInBackground runs c until the returned running is stopped, or the
// test ends.
func runInBackground(t *testing.T, c *ferry.Consumer) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the consumer and returns Run's result.
func (r *running) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

// wait returns Run's result when it stops by itself.
func (r *running) wait(t *testing.T) error {
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop")
		return nil
	}
}

func insert(t *testing.T, c *mongo.Collection, docs ...bson.D) {
	t.Helper()
	for _, d := range docs {
		if _, err := c.InsertOne(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// waitStarted waits until the consumer wrote its first checkpoint, so
// writes after it are seen.
func waitStarted(t *testing.T, store checkpoint.Store) checkpoint.Checkpoint {
	t.Helper()
	var cp checkpoint.Checkpoint
	poll.Until(t, 20*time.Second, func() error {
		var err error
		if cp, err = store.Load(context.Background(), "s", 0); err != nil {
			return fmt.Errorf("no checkpoint written: %w", err)
		}
		if cp.Token == nil {
			return errors.New("no checkpoint with a token written")
		}
		return nil
	})
	return cp
}

func TestMain(m *testing.M) {
	if maybeChild() {
		return
	}
	// No goroutine may outlive the tests: not the consumer's (Run waits
	// for all of them), not the emulator's, not the driver's.
	leakcheck.VerifyTestMain(m)
}

func TestDeliversEachChangeOnce(t *testing.T) {
	e := newEnv(t, emutest.TTLMonitorInterval(10*time.Millisecond))
	rec := newRecorder()
	c := e.db.Collection("c")
	if _, err := c.Indexes().CreateOne(context.Background(), mongo.IndexModel{Keys: bson.D{{Key: "exp", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		t.Fatal(err)
	}
	start(t, e.client, rec.handle, e.opts(ferry.Concurrency(1))...)
	waitStarted(t, e.store)
	ctx := context.Background()
	insert(t, c, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 1}})
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "w", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"insert", "update", "replace", "delete"}
	if e.srv != nil {
		insert(t, c, bson.D{{Key: "_id", Value: "ttl"}, {Key: "exp", Value: e.srv.Now().Add(time.Minute)}})
		e.srv.AdvanceClock(2 * time.Minute)
		want = append(want, "insert", "delete")
	}
	evs := rec.waitFor(t, len(want))
	for i, ev := range evs[:len(want)] {
		if ev.OperationType != want[i] {
			t.Fatalf("event %d is %s, want %s", i, ev.OperationType, want[i])
		}
		if ev.ID() != ferry.EventID(ev.Token) || len(ev.ID()) != 64 {
			t.Fatalf("event id %q is not the sha256 of the token", ev.ID())
		}
		if ev.Namespace.Coll != "c" || ev.DocumentKey == nil || ev.ClusterTime.T == 0 || ev.WallTime.IsZero() {
			t.Fatalf("event %d lacks fields: %+v", i, ev)
		}
	}
	if v, err := evs[1].UpdateDescription.LookupErr("updatedFields", "v"); err != nil || v.Int32() != 2 {
		t.Fatalf("update event's updateDescription = %v, want updatedFields.v = 2", evs[1].UpdateDescription)
	}
	if evs[0].FullDocument == nil || evs[2].FullDocument == nil {
		t.Fatal("insert or replace event without fullDocument")
	}
	if evs[3].FullDocument != nil {
		t.Fatal("delete event with a fullDocument")
	}
	if e.srv != nil && evs[5].DocumentKey.Lookup("_id").StringValue() != "ttl" {
		t.Fatalf("TTL expiry delivered as %v", evs[5].DocumentKey)
	}
	// Exactly once: nothing more arrives.
	if evs := rec.snapshot(); len(evs) != len(want) {
		t.Fatalf("handled %d events, want %d", len(evs), len(want))
	}
}

func TestSameIDInTwoCollections(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	start(t, e.client, rec.handle, e.opts(ferry.WatchDatabase(e.db.Name()))...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("a"), bson.D{{Key: "_id", Value: 1}})
	insert(t, e.db.Collection("b"), bson.D{{Key: "_id", Value: 1}})
	evs := rec.waitFor(t, 2)
	if evs[0].ID() == evs[1].ID() || evs[0].Namespace == evs[1].Namespace {
		t.Fatalf("events for _id 1 in two collections collided: %v / %v", evs[0].Namespace, evs[1].Namespace)
	}
}

func TestPipelineChangingIDIsRefused(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.Pipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}))...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "x", Value: 1}})
	err := r.wait(t)
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(280) {
		t.Fatalf("Run = %v, want the server's ChangeStreamFatalError (280)", err)
	}
}

func TestResumesFromCheckpoint(t *testing.T) { eachStore(t, testResumesFromCheckpoint) }

func testResumesFromCheckpoint(t *testing.T, e *env) {
	c := e.db.Collection("c")
	rec := newRecorder()
	r := start(t, e.client, rec.handle, e.opts()...)
	waitStarted(t, e.store)
	for i := range 10 {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	rec.waitFor(t, 10)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	rec2 := newRecorder()
	start(t, e.client, rec2.handle, e.opts()...)
	evs := rec2.waitFor(t, 10)
	if got := sortedIDs(evs); fmt.Sprint(got) != fmt.Sprint(seq(10, 20)) {
		t.Fatalf("after restart the handler saw %v, want %v (no gap, no replay after a graceful stop)", got, seq(10, 20))
	}
}

func TestIdentityChangeIsRefused(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	waitStarted(t, e.store)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c, err := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}))...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background())
	if !errors.Is(err, ferry.ErrIdentityChanged) || !strings.Contains(err.Error(), "pipeline") {
		t.Fatalf("Run with a changed pipeline = %v, want ErrIdentityChanged naming the pipeline", err)
	}
}

// TestIdentityChangeSaysWhatChanged: the refusal names each part that
// changed with its old and new values as an operator reads them (relaxed
// Extended JSON: 2, not {"$numberInt":"2"}).
func TestIdentityChangeSaysWhatChanged(t *testing.T) {
	e := newEnv(t)
	first := e.opts(ferry.Partition(0, 2), ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "n", Value: int32(1)}}}}))
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, first...)
	waitStarted(t, e.store)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c, err := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.Partition(0, 4), ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "n", Value: int32(2)}}}}))...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background())
	f, ok := ferry.AsFailure(err)
	if !errors.Is(err, ferry.ErrIdentityChanged) || !ok {
		t.Fatalf("Run with a changed definition = %v, want ErrIdentityChanged", err)
	}
	for _, want := range []string{`pipeline was [{"$match":{"n":1}}], is now [{"$match":{"n":2}}]`, "partitions was 2, is now 4"} {
		if !strings.Contains(f.Detail, want) {
			t.Errorf("the failure's detail does not say %s:\n%s", want, f.Detail)
		}
	}
	if strings.Contains(err.Error(), "$numberInt") {
		t.Errorf("the error shows canonical Extended JSON: %v", err)
	}
}

// TestPoisonEventsAreDeadLettered: events that keep failing while the
// handler accepts other events (a writer keeps inserting them) are poison:
// after MaxAttempts counted attempts they go to the dead-letter store, with
// their error, attempts and the event; the others are applied once.
func TestPoisonEventsAreDeadLettered(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	var mu sync.Mutex
	attempts := map[int32]int{}
	rec.fn = func(_ context.Context, ev *ferry.Event) error {
		id := ev.DocumentKey.Lookup("_id").Int32()
		mu.Lock()
		attempts[id]++
		mu.Unlock()
		switch id {
		case 1:
			return errors.New("always fails")
		case 2:
			panic("handler bug")
		}
		return nil
	}
	start(t, e.client, rec.handle, e.opts()...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	stopWriting := keepWriting(t, e.db.Collection("c"), 100)
	var entries []deadletter.Entry
	poll.Until(t, 20*time.Second, func() error {
		var err error
		entries, err = e.dlq.List(context.Background(), "s", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			return fmt.Errorf("%d dead letters, want 2", len(entries))
		}
		return nil
	})
	written := stopWriting()
	for _, en := range entries {
		// 3 counted attempts; an attempt counts only when some other event
		// succeeded since the previous one, so there may be more.
		if en.Attempts < 3 || en.Error == "" || en.Event == nil {
			t.Fatalf("dead-letter entry %+v: want at least 3 attempts, the error and the event", en)
		}
	}
	if !strings.Contains(entries[0].Error+entries[1].Error, "panicked") {
		t.Fatal("a handler panic was not recorded as an error")
	}
	rec.waitFor(t, written)
	mu.Lock()
	defer mu.Unlock()
	for id, n := range attempts {
		if id >= 100 && n != 1 {
			t.Fatalf("document %d was attempted %d times, want once", id, n)
		}
	}
}

// keepWriting inserts documents with _id from first on, one every few
// milliseconds, until the returned function is called; that returns how
// many it inserted.
func keepWriting(t *testing.T, c *mongo.Collection, first int32) func() int {
	t.Helper()
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- n
				return
			case <-tick.C:
			}
			if _, err := c.InsertOne(context.Background(), bson.D{{Key: "_id", Value: first + int32(n)}}); err != nil {
				t.Error(err)
				done <- n
				return
			}
			n++
		}
	}()
	var once sync.Once
	var n int
	stopFn := func() int {
		once.Do(func() { close(stop); n = <-done })
		return n
	}
	t.Cleanup(func() { stopFn() })
	return stopFn
}

// TestPoisonStall: with PoisonStall, an event the sink rejects stops the
// partition at it: the checkpoint stays before it, marked stalled.
func TestPoisonStall(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, func(_ context.Context, ev *ferry.Event) error { return ferry.Permanent(errors.New("rejected")) },
		e.opts(ferry.OnPoison(ferry.PoisonStall))...)
	before := waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	err := r.wait(t)
	if !errors.Is(err, ferry.ErrStalled) {
		t.Fatalf("Run = %v, want ErrStalled", err)
	}
	if f, ok := ferry.AsFailure(err); !ok || f.Class != ferry.FailStalled || !f.Clears {
		t.Fatalf("AsFailure(%v) = %+v, %v; want a stalled failure that can clear", err, f, ok)
	}
	cp, err := e.store.Load(context.Background(), "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if cp.State != checkpoint.StateStalled || string(cp.Token) != string(before.Token) {
		t.Fatalf("checkpoint after a stall: state %q, token moved %v; want stalled at the token before the event", cp.State, string(cp.Token) != string(before.Token))
	}
}

func TestNetworkDropNoLossNoGap(t *testing.T) { eachStore(t, testNetworkDropNoLossNoGap) }

func testNetworkDropNoLossNoGap(t *testing.T, e *env) {
	rec := newRecorder()
	start(t, e.client, rec.handle, e.opts()...)
	waitStarted(t, e.store)
	c := e.db.Collection("c")
	insert(t, c, bson.D{{Key: "_id", Value: 0}})
	rec.waitFor(t, 1)
	err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 3}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "closeConnection", Value: true}}},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
	defer e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	// The writes come from another client (another process, in real life):
	// a dropped connection clears the consumer's connection pool, which
	// must not fail the writer.
	uri := os.Getenv(emutest.EnvURI)
	if e.srv != nil {
		uri = e.srv.URI()
	}
	writer, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Disconnect(context.Background())
	wc := writer.Database(e.db.Name()).Collection("c")
	for i := 1; i < 20; i++ {
		insert(t, wc, bson.D{{Key: "_id", Value: i}})
	}
	evs := rec.waitFor(t, 20)
	if got := sortedIDs(evs); fmt.Sprint(got) != fmt.Sprint(seq(0, 20)) {
		t.Fatalf("handled %v across dropped connections, want %v (no loss, no gap, no duplicate)", got, seq(0, 20))
	}
}

func TestQuietStreamCheckpointAdvances(t *testing.T) {
	e := newEnv(t)
	start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	first := waitStarted(t, e.store)
	// Writes elsewhere move the server's postBatchResumeToken; the quiet
	// stream's checkpoint follows.
	insert(t, e.db.Collection("other"), bson.D{{Key: "x", Value: 1}})
	poll.Until(t, 20*time.Second, func() error {
		cp, err := e.store.Load(context.Background(), "s", 0)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Version > first.Version && string(cp.Token) != string(first.Token) {
			return nil
		}
		return fmt.Errorf("checkpoint of a quiet stream did not advance: version %d, want > %d with a new token", cp.Version, first.Version)
	})
}

func TestInvalidate(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	insert(t, c, bson.D{{Key: "_id", Value: 0}})
	rec := newRecorder()
	r := start(t, e.client, rec.handle, e.opts()...)
	waitStarted(t, e.store)
	if err := c.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t); !errors.Is(err, ferry.ErrInvalidated) {
		t.Fatalf("Run after drop = %v, want ErrInvalidated", err)
	}
	cp, _ := e.store.Load(context.Background(), "s", 0)
	if cp.State != checkpoint.StateInvalidated {
		t.Fatalf("checkpoint state = %q, want invalidated", cp.State)
	}
	if evs := rec.snapshot(); len(evs) != 1 || evs[0].OperationType != "drop" {
		t.Fatalf("handled %v, want the drop event only", evs)
	}
	// With InvalidateRestart the consumer continues after the invalidate.
	rec2 := newRecorder()
	start(t, e.client, rec2.handle, e.opts(ferry.OnInvalidate(ferry.InvalidateRestart))...)
	insert(t, c, bson.D{{Key: "_id", Value: "after"}})
	evs := rec2.waitFor(t, 1)
	if evs[0].OperationType != "insert" || evs[0].DocumentKey.Lookup("_id").StringValue() != "after" {
		t.Fatalf("after restart: %s %v, want the insert into the re-created collection", evs[0].OperationType, evs[0].DocumentKey)
	}
}

func TestHistoryLost(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(30))
	if e.srv == nil {
		t.Skip("needs the emulator's small oplog")
	}
	c := e.db.Collection("c")
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	waitStarted(t, e.store)
	insert(t, c, bson.D{{Key: "_id", Value: 0}, {Key: "v", Value: 0}})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 60; i++ {
		insert(t, c, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}})
	}
	if _, err := c.DeleteMany(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	// Policy fail: stop, mark needs-backfill, explain.
	c1, _ := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	err := c1.Run(context.Background())
	if !errors.Is(err, ferry.ErrHistoryLost) || !strings.Contains(err.Error(), "backfill") {
		t.Fatalf("Run = %v, want ErrHistoryLost explaining how to recover", err)
	}
	cp, _ := e.store.Load(context.Background(), "s", 0)
	if cp.State != checkpoint.StateNeedsBackfill {
		t.Fatalf("checkpoint state %q, want needs-backfill", cp.State)
	}
	// Policy backfill: a projection maintained by the handler converges on
	// the source, deletes included (through the sweeper).
	// The projection lives on another server: its writes must not roll
	// the source's deliberately tiny oplog.
	sinkClient, _ := emutest.Client(t) // a second emulator (the test runs only on the emulator)
	proj := sinkClient.Database("sink").Collection("projection")
	project := func(ctx context.Context, ev *ferry.Event) error {
		id := ev.DocumentKey.Lookup("_id")
		switch ev.OperationType {
		case "insert", "replace", "update", "backfill":
			doc := bson.D{}
			if err := bson.Unmarshal(ev.FullDocument, &doc); err != nil {
				return err
			}
			doc = append(doc, bson.E{Key: "_seenAt", Value: time.Now()})
			_, err := proj.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, doc, options.Replace().SetUpsert(true))
			return err
		case "delete":
			_, err := proj.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
			return err
		}
		return nil
	}
	// Leftovers of documents deleted while the history was lost.
	old := time.Unix(0, 0)
	insert(t, proj, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "stale"}, {Key: "_seenAt", Value: old}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: "stale"}, {Key: "_seenAt", Value: old}})
	sweepStart := time.Now()
	sweeper := func(ctx context.Context, _ time.Time) error {
		_, err := proj.DeleteMany(ctx, bson.D{{Key: "_seenAt", Value: bson.D{{Key: "$lt", Value: sweepStart}}}})
		return err
	}
	rec := newRecorder()
	rec.fn = project
	start(t, e.client, rec.handle, e.opts(ferry.OnHistoryLost(ferry.HistoryLostBackfill), ferry.WithSweeper(sweeper))...)
	rec.waitFor(t, 56)
	insert(t, c, bson.D{{Key: "_id", Value: 100}, {Key: "v", Value: 100}})
	rec.waitFor(t, 57)
	// With a sweeper the stream is applied while the scan runs: the
	// backfill (and its sweep) is over once the checkpoint is running again.
	poll.Until(t, 20*time.Second, func() error {
		cp, err := e.store.Load(context.Background(), "s", 0)
		if err != nil {
			return err
		}
		if cp.State != checkpoint.StateRunning || cp.Token == nil {
			return fmt.Errorf("the checkpoint never left needs-backfill: state %q", cp.State)
		}
		// The stream runs beside the recovery snapshot: it is over (its
		// sweep included) when the checkpoint says it finished.
		if p, ok, err := ferry.SnapshotOf(cp); err != nil || !ok || p.Reason != ferry.SnapshotForHistoryLost || p.Finished.IsZero() {
			return fmt.Errorf("recovery snapshot %+v %v (%v), want a finished history-lost one", p, ok, err)
		}
		return nil
	})
	if !sameDocs(t, c, proj) {
		t.Fatal("projection differs from the source after the backfill")
	}
}

// sameDocs compares two collections document by document (ignoring the
// projection's bookkeeping field).
func sameDocs(t *testing.T, a, b *mongo.Collection) bool {
	t.Helper()
	read := func(c *mongo.Collection) map[string]string {
		cur, err := c.Find(context.Background(), bson.D{}, options.Find().SetProjection(bson.D{{Key: "_seenAt", Value: 0}}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for cur.Next(context.Background()) {
			out[cur.Current.Lookup("_id").String()] = cur.Current.String()
		}
		return out
	}
	x, y := read(a), read(b)
	if len(x) != len(y) {
		t.Logf("source has %d documents, projection %d", len(x), len(y))
		for k := range x {
			if _, ok := y[k]; !ok {
				t.Logf("missing from the projection: %s", k)
			}
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				t.Logf("extra in the projection: %s", k)
			}
		}
		return false
	}
	for k, v := range x {
		if y[k] != v {
			t.Logf("document %s: source %s, projection %s", k, v, y[k])
			return false
		}
	}
	return true
}

func sortedIDs(evs []*ferry.Event) []int {
	var out []int
	for _, ev := range evs {
		out = append(out, int(ev.DocumentKey.Lookup("_id").Int32()))
	}
	sort.Ints(out)
	return out
}

// seq returns from, from+1, …, to-1.
func seq[T int | int32](from, to T) []T {
	var out []T
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestNewEpochFencesOldOwner: a consumer started with a higher lease epoch
// claims the checkpoint at once, so the old owner's next checkpoint write is
// rejected (ErrFenced) and it stops.
func TestNewEpochFencesOldOwner(t *testing.T) {
	e := newEnv(t)
	e.useMongoStore()
	old := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts(ferry.Epoch(1))...)
	waitStarted(t, e.store)
	rec := newRecorder()
	start(t, e.client, rec.handle, e.opts(ferry.Epoch(2))...)
	poll.Until(t, 20*time.Second, func() error {
		cp, err := e.store.Load(context.Background(), "s", 0)
		if err != nil {
			return fmt.Errorf("the new owner did not claim the checkpoint: %w", err)
		}
		if cp.Epoch != 2 {
			return fmt.Errorf("the new owner did not claim the checkpoint: epoch %d, want 2", cp.Epoch)
		}
		return nil
	})
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	if err := old.wait(t); !errors.Is(err, ferry.ErrFenced) {
		t.Fatalf("old owner: %v, want ErrFenced", err)
	}
	rec.waitFor(t, 1)
}
