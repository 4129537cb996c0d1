package ferry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/version"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// insertNumbered inserts documents _id 0..n-1, each with a payload that
// names its _id, and returns the cluster time before them.
func insertNumbered(t *testing.T, client *mongo.Client, c *mongo.Collection, n int) bson.Timestamp {
	t.Helper()
	at := clusterTime(t, client)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "payload", Value: payloadOf(i)}}
	}
	if _, err := c.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return at
}

func payloadOf(i int) string { return strings.Repeat(fmt.Sprintf("<%d>", i), 20) }

// checkEvent fails unless raw is the insert of document i.
func checkEvent(t *testing.T, what string, raw bson.Raw, i int) {
	t.Helper()
	id, ok := raw.Lookup("documentKey", "_id").Int32OK()
	payload, _ := raw.Lookup("fullDocument", "payload").StringValueOK()
	if !ok || int(id) != i || payload != payloadOf(i) {
		t.Fatalf("%s %d changed after later reads: documentKey._id %v (%v), payload %.40q", what, i, id, ok, payload)
	}
}

// TestDriverRepliesStayPut: the driver reads each server reply into a
// buffer of its own and never writes it again, so bytes that alias an
// event of an earlier batch (ChangeStream.Current, not copied) still hold
// that event after later getMores, and no two batches share memory. Ferry
// hands handlers such aliases (see CopyEvents); this checks the behaviour
// it relies on with the driver this module builds with. If it fails after
// a driver upgrade, take the version out of aliasingDrivers.
func TestDriverRepliesStayPut(t *testing.T) {
	client, _ := emutest.Client(t)
	c := client.Database("ferry_alias").Collection("c")
	_ = c.Drop(context.Background())
	const n, batch = 60, 7
	at := insertNumbered(t, client, c, n)
	cs, err := c.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at).SetBatchSize(batch))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	type span struct{ lo, hi uintptr }
	var aliases []bson.Raw
	var spans []span
	for i := 0; i < n; i++ {
		if !cs.Next(context.Background()) {
			t.Fatalf("event %d: %v", i, cs.Err())
		}
		raw := cs.Current
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
		if i%batch == 0 {
			spans = append(spans, span{lo, lo})
		}
		s := &spans[len(spans)-1]
		s.hi = max(s.hi, lo+uintptr(len(raw)))
		aliases = append(aliases, raw)
	}
	if len(spans) < 5 {
		t.Fatalf("read %d batches, want several getMores", len(spans))
	}
	for i, raw := range aliases {
		checkEvent(t, "aliased event", raw, i)
	}
	for i, a := range spans {
		for j, b := range spans[:i] {
			if a.lo < b.hi && b.lo < a.hi {
				t.Fatalf("batch %d's events share memory with batch %d's: the driver (%s) reuses reply buffers", i, j, version.Driver)
			}
		}
	}
}

// TestDriverAliasable: events alias replies only on the driver versions
// whose source was read, and on the one this module builds with (which
// TestDriverRepliesStayPut checks).
func TestDriverAliasable(t *testing.T) {
	for v, want := range map[string]bool{
		"2.10.0": true, "2.10.3": true, "2.10.0-prerelease": true,
		"2.11.0": false, "2.9.2": false, "1.10.0": false, "3.10.0": false,
		"": false, "2": false, "x.10.0": false, "2.y.0": false,
	} {
		if got := ferry.DriverAliasable(v); got != want {
			t.Errorf("driverAliasable(%q) = %v, want %v", v, got, want)
		}
	}
	if !ferry.DriverAliasable(version.Driver) {
		t.Errorf("the driver this module builds with (%s) is not in aliasingDrivers: check it (TestDriverRepliesStayPut, and read its connection.read) and add it", version.Driver)
	}
}

// TestRetainedEventsStayIntact: a handler that keeps every event it is
// given (its bytes not copied) finds each one unchanged after the
// consumer has read many more server batches, with and without
// CopyEvents; by default, events of one batch share the reply's memory,
// with CopyEvents none does.
func TestRetainedEventsStayIntact(t *testing.T) {
	for _, copyEvents := range []bool{false, true} {
		t.Run(fmt.Sprintf("CopyEvents=%v", copyEvents), func(t *testing.T) {
			client, _ := emutest.Client(t)
			db := client.Database(fmt.Sprintf("ferry_retain_%v", copyEvents))
			_ = db.Drop(context.Background())
			const n = 300
			at := insertNumbered(t, client, db.Collection("c"), n)
			store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			rec := newRecorder()
			run := start(t, client, rec.handle, ferry.Stream("s"), ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store),
				ferry.StartAt(ferry.StartAtTime(at)), ferry.QueueLimit(16, 64<<20), ferry.Concurrency(1), ferry.OnPoison(ferry.PoisonStall), ferry.CopyEvents(copyEvents))
			evs := rec.waitFor(t, n)
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			shared := 0
			for i, ev := range evs {
				checkEvent(t, "retained event", ev.Raw, i)
				if id, _ := ev.DocumentKey.Lookup("_id").Int32OK(); int(id) != i {
					t.Fatalf("event %d: DocumentKey %v", i, ev.DocumentKey)
				}
				if i > 0 && within(ev.Raw, evs[i-1].Raw) {
					shared++
				}
			}
			switch {
			case copyEvents && shared > 0:
				t.Fatalf("with CopyEvents, %d events share their predecessor's memory", shared)
			case !copyEvents && shared < n/2:
				t.Fatalf("%d of %d events share their predecessor's reply, want most (batches of 8)", shared, n)
			}
		})
	}
}

// within reports whether b starts inside a's backing array, past a.
func within(b, a bson.Raw) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo+uintptr(len(a)) && p < lo+uintptr(cap(a))
}

// bufferEnd is the address just past the backing array of b: the events
// of one server reply share it, a copy has its own.
func bufferEnd(b bson.Raw) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(cap(b))
}

// TestAliasingBoundedWhenALaneLags: while one lane is held up, its queued
// events would each keep the server reply they came in; beyond a few such
// replies the consumer copies events instead, so a lane that lags cannot
// hold many replies (sixteen here without the bound) for the queue's
// hundred events; once it has caught up, every reference is released and
// events alias their replies again.
func TestAliasingBoundedWhenALaneLags(t *testing.T) {
	client, _ := emutest.Client(t)
	db := client.Database("ferry_alias_lag")
	_ = db.Drop(context.Background())
	const n, queue = 3000, 100
	at := insertNumbered(t, client, db.Collection("c"), n)
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	release := make(chan struct{})
	var others, lastOther atomic.Int64 // other lanes' events handled, the last one's _id
	rec := newRecorder()
	rec.fn = func(ctx context.Context, ev *ferry.Event) error {
		if ev.Lane() != 0 {
			others.Add(1)
			id, _ := ev.DocumentKey.Lookup("_id").Int32OK()
			for m := lastOther.Load(); int64(id) > m && !lastOther.CompareAndSwap(m, int64(id)); m = lastOther.Load() {
			}
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cons, err := ferry.NewConsumer(client, rec.handle, ferry.Stream("s"), ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store),
		ferry.StartAt(ferry.StartAtTime(at)), ferry.QueueLimit(queue, 64<<20), ferry.Concurrency(8), ferry.OnPoison(ferry.PoisonStall),
		ferry.CommitEvery(1, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- cons.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runErr })
	// Lane 0 (about an eighth of the documents) fills the queue once the
	// others have gone by: hundreds of events after its first.
	poll.Until(t, 20*time.Second, func() error {
		if st := cons.Status(); st.QueueEvents < queue {
			return fmt.Errorf("the queue holds %d events, want %d (%d of other lanes handled)", st.QueueEvents, queue, others.Load())
		}
		return nil
	})
	before := lastOther.Load()
	close(release)
	evs := rec.waitFor(t, n)
	// Lane 0's events before the last event the other lanes had handled
	// then were read before the release, so were all in the queue
	// together (the documents were inserted in _id order).
	var held []*ferry.Event
	for _, ev := range evs {
		if id, _ := ev.DocumentKey.Lookup("_id").Int32OK(); ev.Lane() == 0 && int64(id) < before {
			held = append(held, ev)
		}
	}
	if len(held) < queue/2 {
		t.Fatalf("only %d of lane 0's events were held before the release, want most of the queue's %d", len(held), queue)
	}
	perBuffer := map[uintptr]int{}
	for _, ev := range held {
		perBuffer[bufferEnd(ev.Raw)]++
	}
	replies, copies := 0, 0
	for _, k := range perBuffer {
		if k > 1 {
			replies++ // events of one reply
		} else {
			copies++
		}
	}
	if replies > ferry.MaxAliasedReplies || copies == 0 {
		t.Fatalf("lane 0's %d held events alias %d server replies and %d are copies; want at most %d replies, the rest copies",
			len(held), replies, copies, ferry.MaxAliasedReplies)
	}
	for _, ev := range evs {
		id, _ := ev.DocumentKey.Lookup("_id").Int32OK()
		checkEvent(t, "event", ev.Raw, int(id))
	}
	// Every reference was released: the events read now alias their
	// replies again.
	more := make([]any, 300)
	for i := range more {
		more[i] = bson.D{{Key: "_id", Value: int32(n + i)}, {Key: "payload", Value: payloadOf(n + i)}}
	}
	if _, err := db.Collection("c").InsertMany(context.Background(), more); err != nil {
		t.Fatal(err)
	}
	perBuffer = map[uintptr]int{}
	for _, ev := range rec.waitFor(t, n+len(more))[n:] {
		perBuffer[bufferEnd(ev.Raw)]++
	}
	alone := 0
	for _, k := range perBuffer {
		if k == 1 {
			alone++
		}
	}
	if alone > len(more)/2 {
		t.Fatalf("after the lane caught up, %d of %d new events are copies: references to replies were not released", alone, len(more))
	}
}
