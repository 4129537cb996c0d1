package boltstore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
)

// oldFile writes a state file as the store wrote it before snapshots: only
// the checkpoints bucket, holding one record of stream orders partition 0
// without the snapshot field.
func oldFile(t *testing.T, tok []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ferry.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := append([]byte("orders\x00"), make([]byte, 8)...)
	binary.BigEndian.PutUint64(key[7:], 0)
	rec, _ := bson.Marshal(bson.D{
		{Key: "stream", Value: "orders"}, {Key: "partition", Value: int64(0)}, {Key: "version", Value: int64(4)},
		{Key: "epoch", Value: int64(3)}, {Key: "token", Value: bson.Binary{Data: tok}}, {Key: "identity", Value: ""},
		{Key: "definition", Value: nil}, {Key: "clusterTime", Value: nil}, {Key: "pendingSince", Value: nil},
		{Key: "state", Value: ""}, {Key: "note", Value: ""}, {Key: "updatedAt", Value: bson.DateTime(1700000000000)},
	})
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("checkpoints"))
		if err != nil {
			return err
		}
		return b.Put(key, rec)
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOldFile: a file written before snapshots opens; its record loads
// with Snapshot nil and takes one at the next Save; snapshot requests work.
func TestOldFile(t *testing.T) {
	tok := sample("orders", 0).Token
	s, err := boltstore.Open(oldFile(t, tok))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(t.Context(), "orders", 0)
	if err != nil || got.Snapshot != nil || got.Version != 4 || !bytes.Equal(got.Token, tok) {
		t.Fatalf("Load of a record without snapshot = %+v, %v; want version 4, Snapshot nil", got, err)
	}
	if list, err := s.List(t.Context(), "orders"); err != nil || len(list) != 1 || list[0].Snapshot != nil {
		t.Fatalf("List of a record without snapshot = %+v, %v", list, err)
	}
	got.Snapshot, _ = bson.Marshal(bson.D{{Key: "chunks", Value: int32(1)}})
	saved, err := s.Save(t.Context(), got)
	if err != nil || saved.Version != 5 || !bytes.Equal(saved.Snapshot, got.Snapshot) {
		t.Fatalf("Save over a record without snapshot = %+v, %v", saved, err)
	}
	if _, err := s.SnapshotRequest(t.Context(), "orders"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("SnapshotRequest in an old file: %v, want ErrNotFound", err)
	}
	if _, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders"}); err != nil {
		t.Fatalf("RequestSnapshot in an old file: %v", err)
	}
}

// TestSnapshotRequestsSurviveReopen: requests are in the file, with the
// Clock's time.
func TestSnapshotRequestsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	now := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	s, err := boltstore.Open(path, boltstore.Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	req, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders", Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Truncate(time.Millisecond); !req.Requested.Equal(want) {
		t.Fatalf("Requested = %v, want the clock's %v", req.Requested, want)
	}
	if err := s.CancelSnapshot(t.Context(), "orders", req.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.SnapshotRequest(t.Context(), "orders")
	if err != nil || got.ID != req.ID || !got.Cancelled || !got.Requested.Equal(req.Requested) || got.Note != "n" {
		t.Fatalf("after reopening: %+v, %v; want %+v cancelled", got, err, req)
	}
}

// TestCorruptSnapshotRequestNamed: a request damaged by hand is a
// *checkpoint.CorruptError naming the file and key; a new request
// replaces it.
func TestCorruptSnapshotRequestNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := bson.Marshal(bson.D{{Key: "id", Value: int32(7)}})
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("snapshots")).Put([]byte("orders"), bad) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := path + ` bucket snapshots key "orders"`
	_, err = s.SnapshotRequest(t.Context(), "orders")
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) || ce.Record != want || !strings.Contains(err.Error(), "field id has BSON type") {
		t.Fatalf("SnapshotRequest of a corrupt record: %v; want a CorruptError naming %s", err, want)
	}
	if err := s.CancelSnapshot(t.Context(), "orders", "x"); !errors.As(err, &ce) {
		t.Fatalf("CancelSnapshot of a corrupt record: %v; want a CorruptError", err)
	}
	req, err := s.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders"})
	if err != nil {
		t.Fatalf("RequestSnapshot over a corrupt record: %v", err)
	}
	if got, err := s.SnapshotRequest(t.Context(), "orders"); err != nil || got.ID != req.ID {
		t.Fatalf("SnapshotRequest after replacing a corrupt record = %+v, %v", got, err)
	}
}
