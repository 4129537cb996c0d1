package mongostore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
)

// TestSaveReplyLost: the server applies a Save (the first one, an upsert,
// and a later compare-and-set), then the connection drops before the reply
// (onPrimaryTransactionalWrite). The driver retries the findAndModify as a
// retryable write; the server recognises the retry and returns the
// document the first attempt produced. Run again, the compare-and-set
// would find the version it just wrote (ErrFenced), and the upsert a
// duplicate key (ErrFenced too): a false fence that would stop the
// partition although its checkpoint is saved.
func TestSaveReplyLost(t *testing.T) {
	uri, srv := emutest.URI(t)
	if srv == nil {
		t.Skipf("needs the emulator's onPrimaryTransactionalWrite fail point from Go; %s points at a real server", emutest.EnvURI)
	}
	var failed atomic.Int32
	mon := &event.CommandMonitor{Failed: func(_ context.Context, ev *event.CommandFailedEvent) {
		if ev.CommandName == "findAndModify" {
			failed.Add(1)
		}
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := freshDB(t, client)
	s := newStore(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := db.Collection("checkpoints").Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())

	cp := sample(t, "orders", 3)
	var saved checkpoint.Checkpoint
	for i, version := range []int64{0, 1} {
		srv.FailRetryableWrites(emutest.RetryableWriteFailPoint{Times: 1})
		cp.Version = version
		saved, err = s.Save(ctx, cp)
		if errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("Save of version %d whose reply was lost: %v; the server applied it, so it must not be fenced", version, err)
		}
		if err != nil {
			t.Fatalf("Save of version %d whose reply was lost: %v", version, err)
		}
		if saved.Version != version+1 {
			t.Fatalf("Save of version %d returned version %d, want %d", version, saved.Version, version+1)
		}
		if n := failed.Load(); n != int32(i+1) {
			t.Fatalf("%d findAndModify attempts failed after %d Saves, want %d (the fail point dropped each first reply)", n, i+1, i+1)
		}
	}
	got, err := s.Load(ctx, cp.Stream, cp.Partition)
	if err != nil || got.Version != 2 {
		t.Fatalf("Load = version %d, %v; want 2", got.Version, err)
	}
	// The two Saves are two writes, each logged once.
	for _, want := range []string{"insert", "update"} {
		if !cs.Next(ctx) {
			t.Fatalf("change stream: %v, want the %s of a Save", cs.Err(), want)
		}
		if op := cs.Current.Lookup("operationType").StringValue(); op != want {
			t.Fatalf("change event %s, want %s", op, want)
		}
	}
	if n, err := db.Collection("checkpoints").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("%d checkpoint documents, %v; want 1", n, err)
	}
	if cs.TryNext(ctx) {
		t.Fatalf("an extra change event %s: a retried Save was applied twice", cs.Current)
	}
}
