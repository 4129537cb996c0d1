package mongoproj_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// counter wraps the sink's handler and counts distinct events it applied.
type counter struct {
	h      ferry.Handler
	mu     sync.Mutex
	done   map[string]bool
	bf     int
	notify chan struct{}
}

func newCounter(s sink.Sink) *counter {
	return &counter{h: sink.Handler(s), done: map[string]bool{}, notify: make(chan struct{}, 1)}
}

func (c *counter) handle(ctx context.Context, ev *ferry.Event) error {
	if err := c.h(ctx, ev); err != nil {
		return err
	}
	c.mu.Lock()
	if !c.done[ev.ID()] {
		c.done[ev.ID()] = true
		if ev.Backfill {
			c.bf++
		}
	}
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until at least n distinct events were applied.
func (c *counter) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got := len(c.done)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			t.Fatalf("applied %d events, want %d", got, n)
		}
	}
}

// running is a consumer run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, client *mongo.Client, h ferry.Handler, opts ...ferry.Option) *running {
	t.Helper()
	c, err := ferry.NewConsumer(client, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("consumer: %v", err)
	}
	r.done <- nil // a second stop returns at once
}

// sameDocs reports whether the projection equals the source, document for
// document, ignoring tombstones and the hidden field.
func sameDocs(t *testing.T, source, target *mongo.Collection) bool {
	t.Helper()
	read := func(c *mongo.Collection, filter, proj bson.D) map[string]string {
		opts := options.Find()
		if proj != nil {
			opts.SetProjection(proj)
		}
		cur, err := c.Find(context.Background(), filter, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close(context.Background())
		out := map[string]string{}
		for cur.Next(context.Background()) {
			out[cur.Current.Lookup("_id").String()] = cur.Current.String()
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	src := read(source, bson.D{}, nil)
	dst := read(target, mongoproj.Live(), mongoproj.Hidden())
	same := len(src) == len(dst)
	for k, v := range src {
		if dst[k] != v {
			t.Logf("document %s: source %s, projection %q", k, v, dst[k])
			same = false
		}
	}
	for k, v := range dst {
		if _, ok := src[k]; !ok {
			t.Logf("extra in the projection: %s", v)
			same = false
		}
	}
	return same
}

func consumerOpts(t *testing.T, source *mongo.Collection, extra ...ferry.Option) []ferry.Option {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return append([]ferry.Option{
		ferry.Stream("proj"),
		ferry.WatchCollection(source.Database().Name(), source.Name()),
		ferry.FullDocument("updateLookup"),
		ferry.Checkpoints(store),
		ferry.CommitEvery(5, 20*time.Millisecond),
		ferry.MaxAwaitTime(50 * time.Millisecond),
		ferry.Concurrency(4),
		ferry.Retry(5, time.Millisecond, 10*time.Millisecond),
		ferry.OnPoison(ferry.PoisonStall), // a poisoned event stalls the test visibly
	}, extra...)
}

// mutate applies n random inserts, updates, replaces and deletes to source
// and returns how many change events they produce.
func mutate(t *testing.T, rng *rand.Rand, source *mongo.Collection, present map[int32]bool, n int) int {
	t.Helper()
	ctx := context.Background()
	events := 0
	for range n {
		id := int32(rng.IntN(15))
		var err error
		switch {
		case !present[id]:
			_, err = source.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: int32(0)}, {Key: "tag", Value: "new"}})
			present[id] = true
		case rng.IntN(4) == 0:
			_, err = source.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
			present[id] = false
		case rng.IntN(3) == 0:
			_, err = source.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "r", Value: rng.Int32()}})
		default:
			_, err = source.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{
				{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}},
				{Key: "$set", Value: bson.D{{Key: "sub", Value: bson.D{{Key: "x", Value: rng.Int32()}}}}},
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		events++
	}
	return events
}

func TestConsumerProjectionEqualsSource(t *testing.T) {
	e := newEnv(t)
	source := e.client.Database("mongoproj_src").Collection(collName(t))
	_ = source.Drop(context.Background())
	if err := source.Database().CreateCollection(context.Background(), source.Name()); err != nil {
		t.Fatal(err)
	}
	opts := consumerOpts(t, source)
	cnt := newCounter(e.s)
	rng := rand.New(rand.NewPCG(7, 11))
	present := map[int32]bool{}

	// Start from the current time, so no change below is missed however
	// late the stream opens.
	opts = append(opts, ferry.StartAt(ferry.StartAtTime(operationTime(t, e.client))))
	r1 := run(t, e.client, cnt.handle, opts...)
	want := mutate(t, rng, source, present, 120)
	cnt.waitFor(t, want)
	// Kill it (its checkpoint may lag, so the next run replays) and
	// change the source while nobody reads.
	r1.stop(t)
	want += mutate(t, rng, source, present, 80)
	run(t, e.client, cnt.handle, opts...)
	cnt.waitFor(t, want)
	if !sameDocs(t, source, e.target) {
		t.Fatal("projection differs from the source")
	}
}

// operationTime returns the server's current operation time.
func operationTime(t *testing.T, client *mongo.Client) bson.Timestamp {
	t.Helper()
	raw, err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	tt, i, ok := raw.Lookup("operationTime").TimestampOK()
	if !ok {
		t.Fatalf("ping reply has no operationTime: %s", raw)
	}
	return bson.Timestamp{T: tt, I: i}
}

func TestBackfillAndSweepConverge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	source := e.client.Database("mongoproj_src").Collection(collName(t))
	_ = source.Drop(ctx)
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: int32(i)}})
	}
	if _, err := source.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// What the projection held before the history was lost: a stale
	// version of 1, a tombstone of 2 (deleted, then re-inserted unseen)
	// with a clusterTime from the future, and 50, 51 deleted unseen
	// (51 never stamped by the sink).
	old := time.Unix(0, 0)
	stale := []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: "stale"},
			{Key: mongoproj.Field, Value: bson.D{{Key: "ct", Value: bson.Timestamp{T: 10, I: 1}}, {Key: "tok", Value: "82"}, {Key: "at", Value: old}}}},
		bson.D{{Key: "_id", Value: int32(2)},
			{Key: mongoproj.Field, Value: bson.D{{Key: "ct", Value: bson.Timestamp{T: 4e9, I: 1}}, {Key: "tok", Value: "82FF"}, {Key: "at", Value: old}, {Key: "del", Value: true}}}},
		bson.D{{Key: "_id", Value: int32(50)}, {Key: "v", Value: int32(50)},
			{Key: mongoproj.Field, Value: bson.D{{Key: "ct", Value: bson.Timestamp{T: 10, I: 2}}, {Key: "tok", Value: "83"}, {Key: "at", Value: old}}}},
		bson.D{{Key: "_id", Value: int32(51)}, {Key: "v", Value: int32(51)}},
	}
	if _, err := e.target.InsertMany(ctx, stale); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter(e.s)
	run(t, e.client, cnt.handle, consumerOpts(t, source,
		ferry.StartAt(ferry.StartWithBackfill()), ferry.WithSweeper(e.s.Sweep))...)
	cnt.waitFor(t, len(docs))
	// A change made during or after the backfill is streamed (with a
	// sweeper the stream is applied while the scan runs).
	if _, err := source.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(3)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "after"}}}}); err != nil {
		t.Fatal(err)
	}
	cnt.waitFor(t, len(docs)+1)
	if cnt.bf != len(docs) {
		t.Errorf("backfill events = %d, want %d", cnt.bf, len(docs))
	}
	// The sweep runs once the scan's events are applied: wait for it.
	poll.Until(t, 20*time.Second, func() error {
		if n, err := e.target.CountDocuments(ctx, bson.D{}); err != nil || n != int64(len(docs)) {
			return fmt.Errorf("target holds %d documents (%v), want %d: the sweep left leftovers or tombstones", n, err, len(docs))
		}
		return nil
	})
	if !sameDocs(t, source, e.target) {
		t.Fatal("projection differs from the source after backfill and sweep")
	}
}
