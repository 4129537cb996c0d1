package verify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/verify"
)

// BenchmarkWindow re-reads a window of 10,000 changes, all applied (a
// ledger entry each, the checkpoints after them), from an hour before the
// oplog's start — the oplog's start is found, the window read from it, the
// ledger asked — and reports seconds per 10k events (s/10k-events), with
// one partition and with four (each partition's stream reads every change
// of the oplog).
//
//	go test -run '^$' -bench BenchmarkWindow ./verify/
func BenchmarkWindow(b *testing.B) {
	const events = 10_000
	e := newEnv(b)
	ctx := context.Background()
	first := e.write(func(ctx context.Context) error {
		_, err := e.orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "o-0"}})
		return err
	})
	for k := 0; k < events/1000; k++ {
		docs := make([]any, 0, 1000)
		for i := max(k*1000, 1); i < (k+1)*1000; i++ {
			docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}, {Key: "v", Value: i}})
		}
		if _, err := e.orders.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	ids, end := eventIDs(b, e.orders, first, events)
	for _, parts := range []int{1, 4} {
		stream := fmt.Sprintf("bench-%d", parts)
		if err := e.ledger.RecordMany(ctx, stream, ids, 0, 1); err != nil {
			b.Fatal(err)
		}
		for p := range parts {
			if _, err := e.cps.Save(ctx, checkpoint.Checkpoint{Stream: stream, Partition: p, Token: end, Epoch: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			cfg := e.config(bson.Timestamp{T: first.T - 3600})
			cfg.Stream, cfg.Partitions, cfg.FromOplogStart = stream, parts, true
			cfg.Options = []ferry.Option{ferry.WatchCollection("shop", "orders")}
			start := time.Now()
			for b.Loop() {
				r, err := verify.Stream(ctx, cfg)
				if err != nil || r.Events != events || r.Applied != events || !r.OK() {
					b.Fatalf("%v (failure %q), %v; want %d events, all applied", r, r.Failure, err, events)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N)*10_000/events, "s/10k-events")
		})
	}
}

// eventIDs reads the n changes of coll from first on and returns their
// event ids and a resume token after them.
func eventIDs(b *testing.B, coll *mongo.Collection, first bson.Timestamp, n int) ([]string, bson.Raw) {
	ctx := context.Background()
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&first))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)
	ids := make([]string, 0, n)
	for len(ids) < n && cs.Next(ctx) {
		ev, err := ferry.ParseEvent(cs.Current, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, ev.ID())
	}
	if len(ids) != n {
		b.Fatalf("read %d changes, want %d: %v", len(ids), n, cs.Err())
	}
	// The position after them: the stream's token once it has none left.
	for cs.TryNext(ctx) {
		b.Fatal("a change after the writes")
	}
	return ids, append(bson.Raw(nil), cs.ResumeToken()...)
}
