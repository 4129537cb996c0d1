package deadletter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
)

func TestMongoStore(t *testing.T) {
	client, _ := emutest.Client(t)
	db := client.Database("dlq_test")
	_ = db.Drop(context.Background())
	s := deadletter.NewMongo(db, "")
	ctx := context.Background()
	raw, _ := bson.Marshal(bson.D{{Key: "operationType", Value: "insert"}})
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1}})
	e := deadletter.Entry{Stream: "s", EventID: "e1", Kind: deadletter.KindChange, Operation: "insert", Namespace: "d.c",
		DocumentKey: key, Event: raw, Error: "boom", Attempts: 3, FirstAt: t0, LastAt: t0}
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	// Putting the same event again keeps one entry with the latest error.
	e.Error, e.Attempts, e.LastAt = "boom again", 5, t0.Add(time.Second)
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, deadletter.Entry{Stream: "other", EventID: "e2", FirstAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Error != "boom again" || got[0].Attempts != 5 || !got[0].FirstAt.Equal(t0) || string(got[0].Event) != string(raw) ||
		got[0].Kind != deadletter.KindChange || string(got[0].DocumentKey) != string(key) {
		t.Fatalf("List = %+v", got)
	}
	// An entry without an event, kind or documentKey lists with none.
	if other, err := s.List(ctx, "other", 0); err != nil || len(other) != 1 || other[0].Event != nil || other[0].Kind != "" || other[0].DocumentKey != nil {
		t.Fatalf("List(other) = %+v, %v", other, err)
	}
	if err := s.Put(ctx, deadletter.Entry{Stream: "s"}); err == nil {
		t.Fatal("Put without an event id succeeded")
	}
	if err := s.Delete(ctx, "s", "e1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "s", "e1"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
}

// TestNewMongoNilDatabase: NewMongo returns no error (it checks nothing),
// so a nil database is reported by the methods, with the fix, not by a
// panic (before, NewMongo panicked).
func TestNewMongoNilDatabase(t *testing.T) {
	s := deadletter.NewMongo(nil, "dlq")
	ctx := context.Background()
	if err := s.Put(ctx, deadletter.Entry{Stream: "s", EventID: "e"}); !errors.Is(err, deadletter.ErrNoDatabase) {
		t.Errorf("Put = %v, want ErrNoDatabase", err)
	}
	if _, err := s.List(ctx, "s", 0); !errors.Is(err, deadletter.ErrNoDatabase) {
		t.Errorf("List = %v, want ErrNoDatabase", err)
	}
	if err := s.Delete(ctx, "s", "e"); !errors.Is(err, deadletter.ErrNoDatabase) {
		t.Errorf("Delete = %v, want ErrNoDatabase", err)
	}
}
