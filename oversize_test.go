package ferry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
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
	eventually(t, 10*time.Second, func() string { return "the oversize event was not dead-lettered" }, func() bool {
		list, _ := e.dlq.List(context.Background(), "s", 0)
		entries = entries[:0]
		for _, en := range list {
			entries = append(entries, deadletterEntry{key: en.DocumentKey.Lookup("_id").Int32(), op: en.Operation, body: len(en.Event), err: en.Error})
		}
		return len(entries) == 1
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
