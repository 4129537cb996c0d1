package mongostore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
)

// TestCorruptRecordNamed: a record damaged by hand makes Load and List
// fail with a *checkpoint.CorruptError that names the collection and the
// _id; Records lists it beside the readable ones, with what can still be
// read (version, epoch); Overwrite and Remove replace or delete it without
// decoding it, compare-and-set on the record as read.
func TestCorruptRecordNamed(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db)
	ctx := context.Background()
	for p := range 3 {
		cp := sample(t, "orders", p)
		cp.Epoch = 7
		if _, err := s.Save(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	// Another stream whose _ids share the prefix must not be listed.
	if _, err := s.Save(ctx, sample(t, "orders/x", 0)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("checkpoints")
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "orders/1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: "x"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "orders/2"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: "ten"}, {Key: "stream", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	name := db.Name() + `.checkpoints _id "orders/1"`
	_, err := s.Load(ctx, "orders", 1)
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, checkpoint.ErrCorrupt) || ce.Record != name || ce.Partition != 1 ||
		!strings.Contains(err.Error(), name+": field token has BSON type string") {
		t.Fatalf("Load of a corrupt record: %v; want a CorruptError naming %s", err, name)
	}
	if _, err := s.List(ctx, "orders"); !errors.As(err, &ce) || ce.Record != name {
		t.Fatalf("List with a corrupt record: %v; want a CorruptError naming %s", err, name)
	}

	recs, err := s.Records(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("Records: %d records, want 3 (the stream's, however damaged): %+v", len(recs), recs)
	}
	if recs[0].Corrupt != nil || recs[0].Checkpoint.Version != 1 {
		t.Errorf("record 0: %+v, want readable at version 1", recs[0])
	}
	if recs[1].Corrupt == nil || recs[1].Corrupt.Record != name || recs[1].Version != 1 || recs[1].Epoch != 7 {
		t.Errorf("record 1: corrupt %v, version %d, epoch %d; want corrupt naming %s, version 1 and epoch 7 still read",
			recs[1].Corrupt, recs[1].Version, recs[1].Epoch, name)
	}
	if recs[2].Corrupt == nil || recs[2].Partition != 2 || recs[2].Version != 0 || recs[2].Epoch != 7 {
		t.Errorf("record 2: %+v; want corrupt (version and stream damaged), found by its _id", recs[2])
	}

	// Overwrite is compare-and-set on the record as read.
	stale := recs[1]
	next := sample(t, "orders", 1)
	next.Version, next.Epoch = recs[1].Version, recs[1].Epoch
	saved, err := s.Overwrite(ctx, recs[1], next)
	if err != nil || saved.Version != 2 || saved.Epoch != 7 {
		t.Fatalf("Overwrite: %+v, %v; want version 2, epoch 7", saved, err)
	}
	if got, err := s.Load(ctx, "orders", 1); err != nil || got.Version != 2 || string(got.Token) != string(next.Token) {
		t.Fatalf("Load after Overwrite: %+v, %v", got, err)
	}
	if _, err := s.Overwrite(ctx, stale, next); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("Overwrite of a record that changed since it was read: %v, want ErrFenced", err)
	}
	if err := s.Remove(ctx, stale); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("Remove of a record that changed since it was read: %v, want ErrFenced", err)
	}
	if err := s.Remove(ctx, recs[2]); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := s.Load(ctx, "orders", 2); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load after Remove: %v, want ErrNotFound", err)
	}
	if list, err := s.List(ctx, "orders"); err != nil || len(list) != 2 {
		t.Fatalf("List after the repairs: %d, %v; want 2 readable checkpoints", len(list), err)
	}
}
