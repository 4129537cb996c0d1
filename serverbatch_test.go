package ferry_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/emutest"
)

// batchLog records the batchSize of each change-stream aggregate and
// getMore a client sends, and the events in each reply.
type batchLog struct {
	mu      sync.Mutex
	asked   []int32 // batchSize per command, 0 when absent
	largest int     // the most events one reply carried
}

func (l *batchLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			var size bson.RawValue
			switch e.CommandName {
			case "aggregate":
				if !strings.Contains(e.Command.String(), "$changeStream") {
					return
				}
				size = e.Command.Lookup("cursor", "batchSize")
			case "getMore":
				size = e.Command.Lookup("batchSize")
			default:
				return
			}
			n, _ := size.Int32OK()
			l.mu.Lock()
			l.asked = append(l.asked, n)
			l.mu.Unlock()
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.CommandName != "aggregate" && e.CommandName != "getMore" {
				return
			}
			n := 0
			for _, key := range []string{"firstBatch", "nextBatch"} {
				if arr, ok := e.Reply.Lookup("cursor", key).ArrayOK(); ok {
					vals, _ := arr.Values()
					n = len(vals)
				}
			}
			l.mu.Lock()
			l.largest = max(l.largest, n)
			l.mu.Unlock()
		},
	}
}

// TestServerBatchesFollowTheQueue: the consumer asks the server for
// batches of a quarter of its queue's event limit, so the driver's
// replies — each read whole before any of its events is taken, and kept
// while any of its events is in the queue — are bounded by the queue too,
// not by the server's 16 MiB.
func TestServerBatchesFollowTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []ferry.Option
		limit int32
	}{
		{"small queue", []ferry.Option{ferry.QueueLimit(40, 64<<20)}, 10},
		{"default queue", nil, 1000},
		{"queue of one", []ferry.Option{ferry.QueueLimit(1, 64<<20)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uri, _ := emutest.URI(t)
			log := &batchLog{}
			client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(log.monitor()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
			db := client.Database("ferry_serverbatch")
			_ = db.Drop(context.Background())
			at := clusterTime(t, client)
			const backlog = 2500
			docs := make([]any, backlog)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}}
			}
			if _, err := db.Collection("c").InsertMany(context.Background(), docs); err != nil {
				t.Fatal(err)
			}
			store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			rec := newRecorder()
			opts := append([]ferry.Option{ferry.Stream("s"), ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store),
				ferry.StartAt(ferry.StartAtTime(at)), ferry.OnPoison(ferry.PoisonStall)}, tc.opts...)
			run := start(t, client, rec.handle, opts...)
			rec.waitFor(t, backlog)
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.asked) < 2 {
				t.Fatalf("saw %d change-stream commands, want the aggregate and getMores", len(log.asked))
			}
			for i, n := range log.asked {
				if n != tc.limit {
					t.Fatalf("command %d asked for batchSize %d, want %d (asked: %v)", i, n, tc.limit, log.asked)
				}
			}
			if log.largest == 0 || log.largest > int(tc.limit) {
				t.Fatalf("the largest reply carried %d events, want 1 to %d", log.largest, tc.limit)
			}
		})
	}
}
