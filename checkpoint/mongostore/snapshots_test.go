package mongostore_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/internal/emutest"
)

// TestRecordWithoutSnapshot: a checkpoint written before the snapshot
// field existed (the document Save wrote then, inserted as it was) loads
// with Snapshot nil, is listed, and a Save over it adds the field.
func TestRecordWithoutSnapshot(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db)
	ctx := t.Context()
	tok := sample(t, "orders", 0).Token
	old := bson.D{
		{Key: "_id", Value: "orders/0"}, {Key: "stream", Value: "orders"}, {Key: "partition", Value: int64(0)},
		{Key: "version", Value: int64(4)}, {Key: "epoch", Value: int64(2)}, {Key: "token", Value: bson.Binary{Data: tok}},
		{Key: "identity", Value: "abc"}, {Key: "definition", Value: nil}, {Key: "clusterTime", Value: bson.Timestamp{T: 1700000000, I: 1}},
		{Key: "pendingSince", Value: nil}, {Key: "state", Value: ""}, {Key: "note", Value: ""},
		{Key: "updatedAt", Value: bson.DateTime(1700000000000)},
	}
	if _, err := db.Collection("checkpoints").InsertOne(ctx, old); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "orders", 0)
	if err != nil || got.Snapshot != nil || got.Version != 4 || !bytes.Equal(got.Token, tok) {
		t.Fatalf("Load of a record without snapshot = %+v, %v; want version 4, Snapshot nil", got, err)
	}
	if list, err := s.List(ctx, "orders"); err != nil || len(list) != 1 || list[0].Snapshot != nil {
		t.Fatalf("List of a record without snapshot = %+v, %v", list, err)
	}
	got.Snapshot, _ = bson.Marshal(bson.D{{Key: "chunks", Value: int32(1)}})
	saved, err := s.Save(ctx, got)
	if err != nil || saved.Version != 5 || !bytes.Equal(saved.Snapshot, got.Snapshot) {
		t.Fatalf("Save over a record without snapshot = %+v, %v", saved, err)
	}
}

// TestSnapshotRequestLayout pins the stored layout of a snapshot request
// that operators read: one document per stream in the snapshots
// collection, _id the stream.
func TestSnapshotRequestLayout(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db)
	filter, _ := bson.Marshal(bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{"paid"}}}}})
	req, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "shop.orders", Filter: filter, Note: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if len(req.ID) != 24 || strings.Trim(req.ID, "0123456789abcdef") != "" {
		t.Errorf("assigned ID %q, want an ObjectID's 24 hex digits", req.ID)
	}
	raw, err := db.Collection("snapshots").FindOne(t.Context(), bson.D{{Key: "_id", Value: "shop.orders"}}).Raw()
	if err != nil {
		t.Fatalf("document not found under _id shop.orders in collection snapshots: %v", err)
	}
	if sub, data, ok := raw.Lookup("filter").BinaryOK(); !ok || sub != 0 || !bytes.Equal(data, filter) {
		t.Fatalf("filter stored as %v, want BinData(0) of the raw filter", raw.Lookup("filter"))
	}
	elems, _ := raw.Elements()
	var fields []string
	for _, e := range elems {
		fields = append(fields, e.Key()+":"+e.Value().Type.String())
	}
	slices.Sort(fields)
	if got, want := strings.Join(fields, " "), "_id:string cancelled:boolean filter:binary id:string note:string requested:UTC datetime"; got != want {
		t.Errorf("stored fields %q, want %q", got, want)
	}
	if ms, _ := raw.Lookup("requested").DateTimeOK(); ms != req.Requested.UnixMilli() {
		t.Errorf("stored requested %d ms, RequestSnapshot returned %v", ms, req.Requested)
	}
	if err := s.CancelSnapshot(t.Context(), "shop.orders", req.ID); err != nil {
		t.Fatal(err)
	}
	raw, _ = db.Collection("snapshots").FindOne(t.Context(), bson.D{{Key: "_id", Value: "shop.orders"}}).Raw()
	if c, ok := raw.Lookup("cancelled").BooleanOK(); !ok || !c {
		t.Errorf("cancelled stored as %v after CancelSnapshot", raw.Lookup("cancelled"))
	}
	// Another collection, when told.
	other := newStore(t, db, mongostore.SnapshotsCollection("requests"))
	if _, err := other.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "x"}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection("requests").CountDocuments(t.Context(), bson.D{{Key: "_id", Value: "x"}}); err != nil || n != 1 {
		t.Fatalf("%d requests in the collection SnapshotsCollection named, %v; want 1", n, err)
	}
}

// TestSnapshotRequestedIsServerTime checks that Requested comes from the
// server's clock (emulator only: it moves the server's clock).
func TestSnapshotRequestedIsServerTime(t *testing.T) {
	client, srv := emutest.Client(t)
	if srv == nil {
		t.Skip("needs the emulator's clock control")
	}
	s := newStore(t, freshDB(t, client))
	first, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	const ahead = 10 * 24 * time.Hour
	srv.AdvanceClock(ahead)
	second, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if d := second.Requested.Sub(first.Requested); d < ahead {
		t.Fatalf("Requested moved by %v after the server clock moved ten days", d)
	}
}

// TestCorruptSnapshotRequestNamed: a request damaged by hand is a
// *checkpoint.CorruptError naming the collection and _id; a new request
// replaces it whole.
func TestCorruptSnapshotRequestNamed(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db)
	ctx := t.Context()
	if _, err := db.Collection("snapshots").InsertOne(ctx, bson.D{{Key: "_id", Value: "orders"}, {Key: "id", Value: 7}}); err != nil {
		t.Fatal(err)
	}
	name := db.Name() + `.snapshots _id "orders"`
	_, err := s.SnapshotRequest(ctx, "orders")
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) || ce.Record != name || !strings.Contains(err.Error(), name+": field id has BSON type 32-bit integer") {
		t.Fatalf("SnapshotRequest of a corrupt record: %v; want a CorruptError naming %s", err, name)
	}
	req, err := s.RequestSnapshot(ctx, checkpoint.SnapshotRequest{Stream: "orders"})
	if err != nil {
		t.Fatalf("RequestSnapshot over a corrupt record: %v", err)
	}
	if got, err := s.SnapshotRequest(ctx, "orders"); err != nil || got.ID != req.ID {
		t.Fatalf("SnapshotRequest after replacing a corrupt record = %+v, %v", got, err)
	}
}
