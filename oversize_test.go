package ferry_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// oversizeRun makes an event the server cannot return: a ~27 MB update
// (9 MB each of updateDescription, fullDocument and fullDocumentBeforeChange)
// on a stream that does not split large events (SplitLargeEvents(false):
// as on servers before 7.0), between two small inserts.
func oversizeRun(t *testing.T, policy ferry.OversizePolicy) (*env, *recorder, *running) {
	t.Helper()
	e := newEnv(t)
	if e.srv == nil {
		t.Skip("needs the emulator (a real server needs ~30 MB of images)")
	}
	update := bigUpdate(t, e)
	rec := newRecorder()
	r := start(t, e.client, rec.handle, e.opts(ferry.OnOversize(policy), ferry.SplitLargeEvents(false),
		ferry.FullDocument("updateLookup"), ferry.FullDocumentBeforeChange("whenAvailable"))...)
	waitStarted(t, e.store)
	c := e.db.Collection("c")
	insert(t, c, bson.D{{Key: "_id", Value: 10}, {Key: "v", Value: "small"}})
	update() // document 1
	insert(t, c, bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: "small"}})
	return e, rec, r
}

// TestOversizeFail: by default an event the server cannot return stops Run
// with an event-too-large failure that does not clear by itself.
func TestOversizeFail(t *testing.T) {
	_, rec, r := oversizeRun(t, ferry.OversizeFail)
	err := r.wait(t)
	f, ok := ferry.AsFailure(err)
	if !ok || f.Class != ferry.FailEventTooLarge || f.Clears {
		t.Fatalf("Run = %v; AsFailure = %+v, %v: want event-too-large", err, f, ok)
	}
	for _, ev := range rec.snapshot() {
		if id := ev.DocumentKey.Lookup("_id").Int32(); id != 10 {
			t.Fatalf("document %d delivered: nothing after the oversize event may be", id)
		}
	}
}

// TestOversizeDeadLetter: the event goes to the dead-letter store with its
// documentKey and operation and no body; the events around it are
// delivered whole.
func TestOversizeDeadLetter(t *testing.T) {
	e, rec, _ := oversizeRun(t, ferry.OversizeDeadLetter)
	evs := rec.waitFor(t, 2)
	for _, ev := range evs {
		if ev.FullDocument == nil || ev.DocumentKey.Lookup("_id").Int32() == 1 {
			t.Fatalf("delivered %s of %v (fullDocument %v): want documents 1 and 3, whole", ev.OperationType, ev.DocumentKey, ev.FullDocument != nil)
		}
	}
	var entries []deadletterEntry
	poll.Until(t, 10*time.Second, func() error {
		list, err := e.dlq.List(context.Background(), "s", 0)
		if err != nil {
			return err
		}
		entries = entries[:0]
		for _, en := range list {
			entries = append(entries, deadletterEntry{key: en.DocumentKey.Lookup("_id").Int32(), op: en.Operation, body: len(en.Event), err: en.Error})
		}
		if len(entries) != 1 {
			return fmt.Errorf("the oversize event was not dead-lettered: %d dead letters, want 1", len(entries))
		}
		return nil
	})
	if en := entries[0]; en.key != 1 || en.op != "update" || en.body != 0 || !strings.Contains(en.err, "too large") {
		t.Fatalf("dead letter %+v: want document 1's update, no body, the reason", en)
	}
}

type deadletterEntry struct {
	key  int32
	op   string
	body int
	err  string
}

// TestOversizeDropImages: the event is delivered without its fullDocument,
// marked ImagesDropped; the events around it keep theirs.
func TestOversizeDropImages(t *testing.T) {
	_, rec, _ := oversizeRun(t, ferry.OversizeDropImages)
	evs := rec.waitFor(t, 3)
	for _, ev := range evs {
		id := ev.DocumentKey.Lookup("_id").Int32()
		switch {
		case id == 1 && (!ev.ImagesDropped || ev.FullDocument != nil || ev.FullDocumentBeforeChange != nil || ev.OperationType != "update" ||
			ev.Raw.Lookup("updateDescription").Type == 0):
			t.Fatalf("the oversize event: ImagesDropped %v, fullDocument %v, op %s; want the update delivered without its images", ev.ImagesDropped, ev.FullDocument != nil, ev.OperationType)
		case id != 1 && (ev.ImagesDropped || ev.FullDocument == nil):
			t.Fatalf("document %d lost its fullDocument: only the oversize event may", id)
		}
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
}

// TestRecoveryOutlastsTheOplogWindow: a recovery snapshot slower than the
// oplog window (a slow handler, a 60-entry oplog rolled by writes every
// millisecond, 200 documents in chunks of 20) finishes: the stream goes on
// beside it, held back for one chunk read at most, so the oplog only has
// to hold the stream's own window. Before (a scan that blocked the stream
// behind its start marker), the marker left the oplog and the recovery
// could never finish: the stream failed after two rounds.
func TestRecoveryOutlastsTheOplogWindow(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(60))
	if e.srv == nil {
		t.Skip("needs the emulator's small oplog")
	}
	ctx := context.Background()
	c := e.db.Collection("c")
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	waitStarted(t, e.store)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for i := range 200 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil { // the checkpoint falls off the oplog
		t.Fatal(err)
	}
	noise := stopNoise(t, e.db.Collection("noise"))
	defer noise()
	var mu sync.Mutex
	rows := map[int32]bool{}
	slow := func(_ context.Context, ev *ferry.Event) error {
		time.Sleep(2 * time.Millisecond) // a slow sink: the scenario, not synchronisation
		if ev.Backfill {
			mu.Lock()
			rows[ev.DocumentKey.Lookup("_id").Int32()] = true
			mu.Unlock()
		}
		return nil
	}
	var logs lockedBuffer
	r = start(t, e.client, slow, e.opts(ferry.OnHistoryLost(ferry.HistoryLostBackfill), ferry.Concurrency(1),
		ferry.SnapshotChunkSize(20), ferry.Logger(slog.New(slog.NewTextHandler(&logs, nil))))...)
	p := waitSnapshot(t, e.store, "s", 0, "a finished recovery", func(p ferry.SnapshotProgress) bool {
		return p.Reason == ferry.SnapshotForHistoryLost && finished(p)
	})
	took := p.Finished.Sub(p.Started)
	mu.Lock()
	got := len(rows)
	mu.Unlock()
	if got != 200 || p.Done < 200 {
		t.Fatalf("the recovery delivered %d of 200 documents (snapshot %+v)", got, p)
	}
	t.Logf("recovery of 200 documents took %v beside a 60-entry oplog rolled every millisecond; history lost %d times",
		took.Round(time.Millisecond), strings.Count(logs.String(), "resume token no longer in the oplog"))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// stopNoise writes to coll every millisecond until the returned function
// is called: it keeps the small oplog rolling.
func stopNoise(t *testing.T, coll *mongo.Collection) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = coll.InsertOne(context.Background(), bson.D{{Key: "n", Value: i}})
			time.Sleep(time.Millisecond) // a steady write rate
		}
	}()
	var once sync.Once
	f := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(f)
	return f
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
