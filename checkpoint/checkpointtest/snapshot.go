package checkpointtest

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

// progress builds a snapshot progress record like the ferry package's:
// which request, how far (a key of mixed types), how many chunks.
func progress(t *testing.T, chunk int) bson.Raw {
	return tokenDoc(t, bson.D{
		{Key: "request", Value: "65a1b2c3d4e5f60718293a4b"},
		{Key: "after", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "k", Value: int64(chunk)}, {Key: "a", Value: 1.5}}}}},
		{Key: "chunks", Value: int32(chunk)},
		{Key: "$filter", Value: bson.D{{Key: "$gt", Value: bson.DateTime(1)}}},
		{Key: "done", Value: false},
	})
}

// testSnapshotProgress: Snapshot is stored and returned byte for byte
// (by Save, Load and List), is a copy both ways, nil stays nil, and a
// Save without it clears it.
func testSnapshotProgress(t *testing.T, s checkpoint.Store) {
	// nil: a checkpoint saved without a snapshot has none.
	cp := mustSave(t, s, base(t, "orders", 0))
	if cp.Snapshot != nil {
		t.Fatalf("Save without a snapshot returned Snapshot %x", []byte(cp.Snapshot))
	}
	if got := mustLoad(t, s, "orders", 0); got.Snapshot != nil {
		t.Fatalf("Load of a checkpoint saved without a snapshot returned Snapshot %x", []byte(got.Snapshot))
	}

	// An odd document (a negative zero, a duplicate key, fields unsorted)
	// comes back byte for byte: never decoded and re-encoded.
	odd := []byte{
		0, 0, 0, 0, // length, set below
		0x01, 'z', 0, 0, 0, 0, 0, 0, 0, 0, 0x80, // -0.0
		0x10, 'a', 0, 1, 0, 0, 0,
		0x10, 'z', 0, 2, 0, 0, 0, // duplicate key "z", now an int32
		0,
	}
	odd[0] = byte(len(odd))
	for i, doc := range []bson.Raw{progress(t, 1), odd, progress(t, 2)} {
		original := bytes.Clone(doc)
		cp.Snapshot = doc
		saved := mustSave(t, s, cp)
		for j := range doc { // the caller may reuse its buffer after Save
			doc[j] = 0xEE
		}
		if !bytes.Equal(saved.Snapshot, original) {
			t.Fatalf("snapshot %d: Save returned %x, want %x", i, []byte(saved.Snapshot), original)
		}
		loaded := mustLoad(t, s, "orders", 0)
		if !bytes.Equal(loaded.Snapshot, original) {
			t.Fatalf("snapshot %d: Load returned %x, want %x", i, []byte(loaded.Snapshot), original)
		}
		same(t, "Load", loaded, saved)
		for j := range loaded.Snapshot { // nor does modifying what Load returned change the store
			loaded.Snapshot[j] = 0xDD
		}
		if again := mustLoad(t, s, "orders", 0); !bytes.Equal(again.Snapshot, original) {
			t.Fatalf("snapshot %d: modifying a loaded snapshot changed the stored one", i)
		}
		cp = saved
	}

	// List returns each partition's snapshot.
	other := base(t, "orders", 1)
	other.Snapshot = progress(t, 7)
	mustSave(t, s, other)
	mustSave(t, s, base(t, "orders", 2))
	list, err := s.List(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("List returned %d checkpoints, want 3", len(list))
	}
	for i, want := range []bson.Raw{progress(t, 2), progress(t, 7), nil} {
		if !bytes.Equal(list[i].Snapshot, want) || (want == nil) != (list[i].Snapshot == nil) {
			t.Fatalf("List entry %d: Snapshot %x, want %x", i, []byte(list[i].Snapshot), []byte(want))
		}
		same(t, "List entry", list[i], mustLoad(t, s, "orders", i))
	}

	// A Save without a snapshot clears it; an empty one is none too.
	for _, none := range []bson.Raw{nil, {}} {
		cp.Snapshot = none
		cp = mustSave(t, s, cp)
		if cp.Snapshot != nil {
			t.Fatalf("Save of Snapshot %#v returned %x, want nil", none, []byte(cp.Snapshot))
		}
		if got := mustLoad(t, s, "orders", 0); got.Snapshot != nil {
			t.Fatalf("Load after saving Snapshot %#v returned %x, want nil", none, []byte(got.Snapshot))
		}
	}
}

// testSnapshotProgressFenced: a chunk's progress is recorded by Save under
// the lease epoch, so a Save that loses the compare-and-set (a stale
// version, a zombie's lower epoch) does not store its snapshot.
func testSnapshotProgressFenced(t *testing.T, s checkpoint.Store) {
	cp := base(t, "orders", 0)
	cp.Epoch = 5
	cp.Snapshot = progress(t, 1)
	v1 := mustSave(t, s, cp)
	v1.Snapshot = progress(t, 2)
	v2 := mustSave(t, s, v1)

	stale := v1 // version 1, stored is 2
	stale.Snapshot = progress(t, 99)
	_, err := s.Save(t.Context(), stale)
	fenced(t, err, 2, 5)
	same(t, "Load after a fenced Save (stale version)", mustLoad(t, s, "orders", 0), v2)

	zombie := v2 // current version, lower epoch
	zombie.Epoch = 4
	zombie.Snapshot = progress(t, 98)
	_, err = s.Save(t.Context(), zombie)
	if fe := fenced(t, err, 2, 5); !fe.EpochLost() {
		t.Fatalf("EpochLost() = false for a lower epoch: %v", err)
	}
	zombie.Snapshot = nil // nor can a fenced Save clear it
	_, err = s.Save(t.Context(), zombie)
	fenced(t, err, 2, 5)
	same(t, "Load after a fenced Save (lower epoch)", mustLoad(t, s, "orders", 0), v2)

	// A new owner takes over with the snapshot it loaded, and goes on.
	next := mustLoad(t, s, "orders", 0)
	next.Epoch = 6
	next.Snapshot = progress(t, 3)
	next = mustSave(t, s, next)
	same(t, "Load after the new owner's Save", mustLoad(t, s, "orders", 0), next)
}
