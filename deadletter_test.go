package ferry_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/deadletter"
)

// sameEvent fails the test unless got is the event want, as a handler and
// a sink see it.
func sameEvent(t *testing.T, got, want *ferry.Event) {
	t.Helper()
	if got.ID() != want.ID() {
		t.Errorf("ID = %s, want %s", got.ID(), want.ID())
	}
	if got.OperationType != want.OperationType || got.Backfill != want.Backfill {
		t.Errorf("operation %q (backfill %v), want %q (backfill %v)", got.OperationType, got.Backfill, want.OperationType, want.Backfill)
	}
	if got.Namespace != want.Namespace {
		t.Errorf("namespace %v, want %v", got.Namespace, want.Namespace)
	}
	if got.Partition != want.Partition || got.Epoch != want.Epoch {
		t.Errorf("partition %d epoch %d, want %d %d", got.Partition, got.Epoch, want.Partition, want.Epoch)
	}
	wantTime := want.ClusterTime
	if want.Backfill {
		// A snapshot row's cluster time (the time its chunk was read at)
		// is not recorded: a replayed row has none, so a version guard
		// never lets it overwrite a newer change.
		wantTime = bson.Timestamp{}
	}
	if got.ClusterTime != wantTime || !got.WallTime.Equal(want.WallTime) {
		t.Errorf("clusterTime %v wallTime %v, want %v %v", got.ClusterTime, got.WallTime, want.ClusterTime, want.WallTime)
	}
	for _, f := range []struct {
		name      string
		got, want bson.Raw
	}{
		{"Token", got.Token, want.Token},
		{"DocumentKey", got.DocumentKey, want.DocumentKey},
		{"FullDocument", got.FullDocument, want.FullDocument},
		{"FullDocumentBeforeChange", got.FullDocumentBeforeChange, want.FullDocumentBeforeChange},
		{"UpdateDescription", got.UpdateDescription, want.UpdateDescription},
		{"Raw", got.Raw, want.Raw},
	} {
		if !bytes.Equal(f.got, f.want) || (f.got == nil) != (f.want == nil) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

func marshal(t *testing.T, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeadLetterRoundTrip: an event dead-lettered into the MongoDB store
// and read back is rebuilt as the same event (id, operation, namespace,
// documentKey, documents, Raw): backfill events with an ObjectId and with
// a document _id, and a change event. Entries written before Kind and
// DocumentKey were recorded rebuild the same event.
func TestDeadLetterRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	marker := marshal(t, bson.D{{Key: "_data", Value: "8266A1B2C3000000012B0429296E1404"}})
	ns := ferry.Namespace{DB: "shop", Coll: "orders.archive"} // a collection name may hold a dot
	oid := bson.NewObjectID()
	backfill := func(doc bson.D) *ferry.Event {
		ev, err := ferry.NewBackfillEvent(ns, marshal(t, doc), marker, 3, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	token := marshal(t, bson.D{{Key: "_data", Value: "8266A1B2C4000000022B0429296E1405"}})
	change, err := ferry.ParseEvent(marshal(t, bson.D{
		{Key: "_id", Value: token},
		{Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1700000000, I: 2}},
		{Key: "wallTime", Value: bson.DateTime(1700000000123)},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: oid}}},
		{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "v", Value: 2}}}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: oid}, {Key: "v", Value: 2}}},
	}), 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ev   *ferry.Event
	}{
		{"backfill ObjectId _id", backfill(bson.D{{Key: "_id", Value: oid}, {Key: "v", Value: 1}})},
		{"backfill document _id", backfill(bson.D{
			{Key: "_id", Value: bson.D{{Key: "_data", Value: "looks like a token"}, {Key: "n", Value: 1}}},
			{Key: "operationType", Value: "insert"}, // a source field, not a change event's
			{Key: "v", Value: 1},
		})},
		{"change event", change},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream := "roundtrip" + string(rune('a'+i))
			t0 := time.Now().Truncate(time.Millisecond)
			entry := ferry.DeadLetterEntry(stream, c.ev, errors.New("400 Bad Request"), 2, t0, t0)
			if entry.EventID != c.ev.ID() || entry.Namespace != c.ev.Namespace.String() || entry.Operation != c.ev.OperationType {
				t.Fatalf("entry %+v does not describe the event", entry)
			}
			if err := e.dlq.Put(ctx, entry); err != nil {
				t.Fatal(err)
			}
			list, err := e.dlq.List(ctx, stream, 0)
			if err != nil || len(list) != 1 {
				t.Fatalf("List = %v, %v", list, err)
			}
			stored := list[0]
			wantKind := deadletter.KindChange
			if c.ev.Backfill {
				wantKind = deadletter.KindBackfill
			}
			if stored.Kind != wantKind || !bytes.Equal(stored.DocumentKey, c.ev.DocumentKey) {
				t.Fatalf("stored kind %q documentKey %v, want %q %v", stored.Kind, stored.DocumentKey, wantKind, c.ev.DocumentKey)
			}
			got, err := ferry.DeadLetterEvent(stored)
			if err != nil {
				t.Fatal(err)
			}
			sameEvent(t, got, c.ev)
			// An entry written before Kind and DocumentKey were recorded.
			old := stored
			old.Kind, old.DocumentKey = "", nil
			if err := e.dlq.Put(ctx, old); err != nil {
				t.Fatal(err)
			}
			list, err = e.dlq.List(ctx, stream, 0)
			if err != nil || len(list) != 1 || list[0].Kind != "" || list[0].DocumentKey != nil {
				t.Fatalf("List of the old-style entry = %+v, %v", list, err)
			}
			got, err = ferry.DeadLetterEvent(list[0])
			if err != nil {
				t.Fatal(err)
			}
			sameEvent(t, got, c.ev)
			if c.ev.Backfill {
				// What replay did before: read the document as a change
				// event. It fails or yields another event id.
				if p, err := ferry.ParseEvent(stored.Event, 3, 7); err == nil && p.ID() == c.ev.ID() {
					t.Fatal("ParseEvent reads a backfill document as its event: the test does not show the bug")
				}
			}
		})
	}
}

// TestDeadLetterEventErrors: an entry that cannot be rebuilt yields an
// error naming the entry (its _id in the dlq collection) and the way out;
// never a panic, never a made-up event.
func TestDeadLetterEventErrors(t *testing.T) {
	doc := marshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 1}})
	noID := marshal(t, bson.D{{Key: "v", Value: 1}})
	otherKey := marshal(t, bson.D{{Key: "_id", Value: 2}})
	base := deadletter.Entry{Stream: "orders", EventID: "e1", Kind: deadletter.KindBackfill, Operation: "backfill",
		Namespace: "shop.orders", Event: doc}
	for _, c := range []struct {
		name string
		edit func(e *deadletter.Entry)
		want string
	}{
		{"no document", func(e *deadletter.Entry) { e.Event = nil }, "holds no document"},
		{"malformed document", func(e *deadletter.Entry) { e.Event = doc[:len(doc)-3] }, "malformed"},
		{"document without _id", func(e *deadletter.Entry) { e.Event = noID }, "no _id"},
		{"namespace without collection", func(e *deadletter.Entry) { e.Namespace = "shop" }, "not db.collection"},
		{"documentKey of another document", func(e *deadletter.Entry) { e.DocumentKey = otherKey }, "does not match"},
		{"old entry without a document", func(e *deadletter.Entry) { e.Kind, e.Event = "", nil }, "holds no document"},
		{"unknown kind", func(e *deadletter.Entry) { e.Kind = "snapshot" }, "does not know"},
		{"change event that is not one", func(e *deadletter.Entry) { e.Kind, e.Operation = deadletter.KindChange, "insert" }, "not a resume token"},
		{"change entry without an event", func(e *deadletter.Entry) { e.Kind, e.Event = deadletter.KindChange, nil }, "holds no change event"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := base
			c.edit(&e)
			ev, err := ferry.DeadLetterEvent(e)
			if err == nil {
				t.Fatalf("DeadLetterEvent = %+v, want an error", ev)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"orders/e1"`) || !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not name the entry and say %q", msg, c.want)
			}
			if c.name != "unknown kind" && !strings.Contains(msg, `deleteOne({_id: "orders/e1"})`) {
				t.Fatalf("error %q does not say how to remove the entry", msg)
			}
		})
	}
}

// TestBackfillDeadLetterReplaysSameEvent: backfill events the handler
// rejects land in the dead-letter store, and each entry is rebuilt as the
// very event the handler saw.
func TestBackfillDeadLetterReplaysSameEvent(t *testing.T) {
	e := newEnv(t)
	src := e.db.Collection("c")
	oid := bson.NewObjectID()
	insert(t, src,
		bson.D{{Key: "_id", Value: oid}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "tenant", Value: "a"}, {Key: "n", Value: 1}}}, {Key: "v", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: 3}})
	var mu sync.Mutex
	seen := map[string]*ferry.Event{}
	rejected := make(chan struct{}, 3)
	handle := func(_ context.Context, ev *ferry.Event) error {
		if !ev.Backfill || ev.DocumentKey.Lookup("_id").Type == bson.TypeInt32 {
			return nil
		}
		mu.Lock()
		seen[ev.ID()] = ev
		mu.Unlock()
		rejected <- struct{}{}
		return ferry.Permanent(errors.New("receiver said 400"))
	}
	r := start(t, e.client, handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()))...)
	for range 2 {
		select {
		case <-rejected:
		case <-time.After(20 * time.Second):
			t.Fatal("the backfill events did not reach the handler")
		}
	}
	// Stopping drains: each rejected event is dead-lettered before Run
	// returns.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	entries, err := e.dlq.List(context.Background(), "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("%d dead letters, want the 2 rejected backfill events", len(entries))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, en := range entries {
		want := seen[en.EventID]
		if want == nil {
			t.Fatalf("entry %s is not an event the handler saw", en.EventID)
		}
		if en.Kind != deadletter.KindBackfill || en.Operation != "backfill" || en.Namespace != e.db.Name()+".c" {
			t.Fatalf("entry %+v", en)
		}
		got, err := ferry.DeadLetterEvent(en)
		if err != nil {
			t.Fatal(err)
		}
		sameEvent(t, got, want)
	}
}
