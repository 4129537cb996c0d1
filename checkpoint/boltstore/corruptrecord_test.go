package boltstore_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
)

// TestCorruptRecordNamed: a record whose token is a string (written into
// the file by hand) makes Load and List fail with a
// *checkpoint.CorruptError naming the file and the key, and what is
// wrong.
func TestCorruptRecordNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(t.Context(), sample("orders", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte("orders\x00"), make([]byte, 8)...)
	binary.BigEndian.PutUint64(key[7:], 1)
	bad, _ := bson.Marshal(bson.D{{Key: "stream", Value: "orders"}, {Key: "partition", Value: int64(1)}, {Key: "token", Value: "x"}})
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("checkpoints")).Put(key, bad) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := path + ` bucket checkpoints key ("orders", 1)`
	for what, err := range map[string]error{
		"Load": func() error { _, err := s.Load(t.Context(), "orders", 1); return err }(),
		"List": func() error { _, err := s.List(t.Context(), "orders"); return err }(),
	} {
		var ce *checkpoint.CorruptError
		if !errors.As(err, &ce) || ce.Record != want || ce.Partition != 1 || !strings.Contains(err.Error(), "field token has BSON type string") {
			t.Errorf("%s of a corrupt record: %v; want a CorruptError naming %s", what, err, want)
		}
	}
}
