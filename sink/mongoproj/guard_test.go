package mongoproj_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// env is a target collection and a connected sink writing to it.
type env struct {
	client *mongo.Client
	target *mongo.Collection
	s      *mongoproj.Sink
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client, _ := emutest.Client(t)
	target := client.Database("mongoproj_test").Collection(collName(t))
	_ = target.Drop(context.Background())
	s, err := mongoproj.New(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return &env{client: client, target: target, s: s}
}

// change builds a change event of op on document id at clusterTime
// (t, i), with a resume token that sorts like (t, i, opIndex).
func change(op string, id int, doc bson.D, t, i uint32, opIndex int) *ferry.Event {
	ts := bson.Timestamp{T: t, I: i}
	token := bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X2B%04X0463", t, i, opIndex)}}
	ev := bson.D{
		{Key: "_id", Value: token},
		{Key: "operationType", Value: op},
		{Key: "clusterTime", Value: ts},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(id)}}},
	}
	if doc != nil {
		ev = append(ev, bson.E{Key: "fullDocument", Value: append(bson.D{{Key: "_id", Value: int32(id)}}, doc...)})
	}
	raw, err := bson.Marshal(ev)
	if err != nil {
		panic(err) // static input
	}
	out, err := ferry.ParseEvent(raw, 0, 1)
	if err != nil {
		panic(err)
	}
	return out
}

func (e *env) write(t *testing.T, evs ...*ferry.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := e.s.Write(context.Background(), []*ferry.Event{ev}); err != nil {
			t.Fatalf("Write(%s): %v", ev.OperationType, err)
		}
	}
}

// doc reads document id from the target (bookkeeping hidden); nil if
// missing or a tombstone.
func (e *env) doc(t *testing.T, id int) bson.D {
	t.Helper()
	filter := append(bson.D{{Key: "_id", Value: int32(id)}}, mongoproj.Live()...)
	var d bson.D
	err := e.target.FindOne(context.Background(), filter, options.FindOne().SetProjection(mongoproj.Hidden())).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func v(n int) bson.D { return bson.D{{Key: "v", Value: int32(n)}} }

func wantV(t *testing.T, got bson.D, n int) {
	t.Helper()
	if len(got) != 2 || lookupD(got, "v") != int32(n) {
		t.Fatalf("document = %v, want v: %d", got, n)
	}
}

func TestNewerWinsOverOlder(t *testing.T) {
	e := newEnv(t)
	e.write(t, change("insert", 1, v(1), 100, 1, 0), change("update", 1, v(3), 300, 1, 0))
	// Older events arrive late: update, insert, replace, and an older
	// delete: none changes the newer document.
	e.write(t, change("update", 1, v(2), 200, 1, 0), change("insert", 1, v(1), 100, 1, 0),
		change("replace", 1, v(9), 299, 7, 0), change("delete", 1, nil, 250, 1, 0))
	wantV(t, e.doc(t, 1), 3)
	// Same clusterTime: the resume token (txnOpIndex) orders them.
	e.write(t, change("update", 1, v(5), 400, 1, 2), change("update", 1, v(4), 400, 1, 1))
	wantV(t, e.doc(t, 1), 5)
	// Replaying the current event is harmless.
	e.write(t, change("update", 1, v(5), 400, 1, 2))
	wantV(t, e.doc(t, 1), 5)
	e.write(t, change("update", 1, v(6), 400, 2, 0))
	wantV(t, e.doc(t, 1), 6)
}

func TestDeleteThenOlderReplayDoesNotResurrect(t *testing.T) {
	e := newEnv(t)
	e.write(t, change("insert", 1, v(1), 100, 1, 0), change("delete", 1, nil, 200, 1, 0))
	if d := e.doc(t, 1); d != nil {
		t.Fatalf("after delete: %v, want no live document", d)
	}
	e.write(t, change("insert", 1, v(1), 100, 1, 0), change("update", 1, v(2), 150, 1, 0))
	if d := e.doc(t, 1); d != nil {
		t.Fatalf("older replay after delete resurrected %v", d)
	}
	// A delete of a document never seen leaves a tombstone too, so the
	// late insert stays dead.
	e.write(t, change("delete", 2, nil, 500, 1, 0), change("insert", 2, v(1), 400, 1, 0))
	if d := e.doc(t, 2); d != nil {
		t.Fatalf("insert older than a delete applied: %v", d)
	}
	// A newer insert brings it back.
	e.write(t, change("insert", 1, v(7), 300, 1, 0))
	wantV(t, e.doc(t, 1), 7)
	n, err := e.target.CountDocuments(context.Background(), mongoproj.Live())
	if err != nil || n != 1 {
		t.Fatalf("live documents = %d, %v; want 1", n, err)
	}
	// Tombstones are purged on request.
	purged, err := e.s.PurgeTombstones(context.Background(), time.Now().Add(time.Hour))
	if err != nil || purged != 1 {
		t.Fatalf("PurgeTombstones = %d, %v; want 1", purged, err)
	}
}

func TestUpdateWithoutFullDocument(t *testing.T) {
	e := newEnv(t)
	ev := change("update", 1, nil, 100, 1, 0)
	err := sink.Errors(e.s.Write(context.Background(), []*ferry.Event{ev}), 1)[0]
	if err == nil || sink.IsRetryable(err) || !errorsContain(err, "updateLookup") {
		t.Fatalf("update without fullDocument: %v, want a permanent error naming updateLookup", err)
	}
	// fullDocument: null (the lookup found nothing) is skipped.
	raw, _ := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AA"}}}, {Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 5, I: 1}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "fullDocument", Value: nil},
	})
	nullEv, err := ferry.ParseEvent(raw, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, nullEv)
	if n, _ := e.target.CountDocuments(context.Background(), bson.D{}); n != 0 {
		t.Fatalf("an update with a null fullDocument wrote %d documents", n)
	}
	// Control events are ignored.
	e.write(t, change("drop", 0, nil, 600, 1, 0))
}

func errorsContain(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

func TestTransactional(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := func(commit bool, evs ...*ferry.Event) {
		t.Helper()
		sess, err := e.client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(ctx)
		if err := sess.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, sess)
		if err := e.s.Write(sctx, evs); err != nil {
			t.Fatalf("Write in a transaction: %v", err)
		}
		if commit {
			err = sess.CommitTransaction(sctx)
		} else {
			err = sess.AbortTransaction(sctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run(false, change("insert", 1, v(1), 100, 1, 0), change("insert", 2, v(1), 100, 1, 1))
	if n, err := e.target.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("after an aborted transaction: %d documents (%v), want 0", n, err)
	}
	run(true, change("insert", 1, v(1), 100, 1, 0), change("update", 1, v(2), 100, 1, 1))
	wantV(t, e.doc(t, 1), 2)
	// A replay of the committed events in a new transaction changes
	// nothing.
	run(true, change("insert", 1, v(1), 100, 1, 0))
	wantV(t, e.doc(t, 1), 2)
}

func TestNewValidates(t *testing.T) {
	if _, err := mongoproj.New(nil); !errors.Is(err, mongoproj.ErrInvalidOption) {
		t.Fatalf("New(nil) = %v, want ErrInvalidOption", err)
	}
	// Every problem named at once; no server is contacted.
	e := newEnv(t)
	_, err := mongoproj.New(e.target.Database().Client().Database("a.b").Collection("system.x"), mongoproj.NoIndex(), nil)
	if want := `mongoproj: invalid option: target: "a.b" is not a valid MongoDB database name (at most 63 bytes, none of / \ . space " $ * < > : | ? NUL); ` +
		`target: the system. prefix is reserved, got "system.x"; nil option: option 2 of 2 is nil (leave it out)`; err == nil || err.Error() != want {
		t.Errorf("New = %v, want %q", err, want)
	}
}

// TestBatchStopsAtFirstWriteError writes a batch as one ordered bulk write
// in which the server rejects one statement (a unique index the document
// violates): the events before it are applied and reported delivered, it
// fails, and the later ones, of other documents too, are reported not
// attempted (retryable) and are not applied. Once the cause is gone,
// writing them again applies them.
func TestBatchStopsAtFirstWriteError(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.target.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "u", Value: 1}}, Options: options.Index().SetUnique(true).SetName("u_1"),
	}); err != nil {
		t.Fatal(err)
	}
	u := func(n int) bson.D { return bson.D{{Key: "u", Value: int32(n)}} }
	batch := []*ferry.Event{
		change("insert", 1, u(1), 100, 1, 0),
		change("insert", 2, u(2), 100, 2, 0),
		change("insert", 3, u(1), 100, 3, 0), // duplicate u: rejected
		change("insert", 4, u(4), 100, 4, 0),
		change("update", 1, u(5), 100, 5, 0),
	}
	errs := sink.Errors(e.s.Write(ctx, batch), len(batch))
	for i, want := range []string{"delivered", "delivered", "failed", "not attempted", "not attempted"} {
		switch got := errs[i]; {
		case want == "delivered" && got != nil:
			t.Errorf("event %d: %v, want delivered", i, got)
		case want != "delivered" && (got == nil || !sink.IsRetryable(got)):
			t.Errorf("event %d: %v, want a retryable failure (%s)", i, got, want)
		case want == "not attempted" && !strings.Contains(got.Error(), "not attempted"):
			t.Errorf("event %d: %v, want 'not attempted'", i, got)
		}
	}
	if e.doc(t, 1) == nil || e.doc(t, 2) == nil || e.doc(t, 3) != nil || e.doc(t, 4) != nil {
		t.Fatalf("after the batch: documents 1..4 = %v %v %v %v; want 1 and 2 only", e.doc(t, 1), e.doc(t, 2), e.doc(t, 3), e.doc(t, 4))
	}
	if got := lookupD(e.doc(t, 1), "u"); got != int32(1) {
		t.Fatalf("document 1 has u %v: the update after the failure was applied", got)
	}
	if err := e.target.Indexes().DropOne(ctx, "u_1"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Write(ctx, batch[2:]); err != nil {
		t.Fatalf("writing the failed events again: %v", err)
	}
	if e.doc(t, 3) == nil || e.doc(t, 4) == nil || lookupD(e.doc(t, 1), "u") != int32(5) {
		t.Fatalf("after the retry: documents %v %v %v", e.doc(t, 1), e.doc(t, 3), e.doc(t, 4))
	}
}

// scanned builds a backfill event of document id, as a concurrent scan
// with the given marker and start hands it over.
func scanned(t *testing.T, id, n int, marker bson.Timestamp, started time.Time) *ferry.Event {
	t.Helper()
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: int32(id)}, {Key: "v", Value: int32(n)}})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(id)}})
	return &ferry.Event{OperationType: ferry.OperationBackfill, Namespace: ferry.Namespace{DB: "shop", Coll: "orders"},
		DocumentKey: key, FullDocument: doc, Raw: doc, Token: key, Epoch: 1, Backfill: true,
		ScanStarted: started, ScanMarker: marker}
}

// TestConcurrentScanKeepsNewerStreamedChanges: while a backfill scan runs
// with the stream applied from its marker, a scanned copy never overwrites
// what a streamed change since the scan began wrote (it may be older than
// that change), but it does replace anything else: an older change, and a
// stamp the projection held from before the scan (even one with a later
// clusterTime, as after a restore of the source).
func TestConcurrentScanKeepsNewerStreamedChanges(t *testing.T) {
	e := newEnv(t)
	marker := bson.Timestamp{T: 200, I: 1}
	// Document 1: changed after the marker, applied before its scanned copy.
	started := time.Now().Add(-time.Minute)
	e.write(t, change("update", 1, v(5), 201, 1, 0))
	e.write(t, scanned(t, 1, 4, marker, started))
	wantV(t, e.doc(t, 1), 5)
	// Document 2: last changed before the marker: the scanned copy wins.
	e.write(t, change("update", 2, v(1), 150, 1, 0))
	e.write(t, scanned(t, 2, 2, marker, started))
	wantV(t, e.doc(t, 2), 2)
	// Document 3: a stamp after the marker but written before the scan
	// began (a projection ahead of a restored source): the scan wins.
	e.write(t, change("update", 3, v(9), 300, 1, 0))
	e.write(t, scanned(t, 3, 3, marker, time.Now().Add(time.Minute)))
	wantV(t, e.doc(t, 3), 3)
	// Document 4: deleted after the marker: the tombstone stays.
	e.write(t, change("insert", 4, v(1), 100, 1, 0), change("delete", 4, nil, 202, 1, 0))
	e.write(t, scanned(t, 4, 1, marker, started))
	if d := e.doc(t, 4); d != nil {
		t.Fatalf("a scanned copy resurrected a document deleted after the marker: %v", d)
	}
}
