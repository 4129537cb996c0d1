package mongotest_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkLedgerLoad puts on the emulator the load of Ferry's idempotent
// mode, one event at a time through the whole path: a writer inserts 1 KiB
// documents in batches of 100, a change stream reads them, and for each
// batch the ledger (already holding 10,000 entries) is asked which of the
// batch's events it has seen, with one find {_id: {$in: ids}}, and records
// them with one unordered insertMany. The cost is per event. The entries
// are package ledger's: an _id of the stream's name and a 64-character
// event id, the event id, partition, epoch and appliedAt fields, and the
// TTL index on appliedAt.
func BenchmarkLedgerLoad(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	ledger := c.Database().Collection(c.Name() + "_ledger")
	if _, err := ledger.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "appliedAt", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(86400)}); err != nil {
		b.Fatal(err)
	}
	entry := func(event string, at int) bson.D {
		return bson.D{{Key: "_id", Value: "orders/" + event}, {Key: "stream", Value: "orders"}, {Key: "event", Value: event},
			{Key: "partition", Value: int64(0)}, {Key: "epoch", Value: int64(1)}, {Key: "appliedAt", Value: bson.DateTime(at)}}
	}
	const prefill = 10_000
	for i := 0; i < prefill; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000; j++ {
			docs = append(docs, entry(fmt.Sprintf("%064x", j), j))
		}
		if _, err := ledger.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	cs, err := c.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)
	const batch = 100
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		docs := make([]any, n)
		for j := range docs {
			docs[j] = kibDoc(i + j)
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
		ids := make(bson.A, 0, n)
		for len(ids) < n {
			if !cs.Next(ctx) {
				b.Fatal(cs.Err())
			}
			ids = append(ids, fmt.Sprintf("orders/%064x", prefill+i+len(ids)))
		}
		cur, err := ledger.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
			options.Find().SetProjection(bson.D{{Key: "event", Value: 1}}))
		if err != nil {
			b.Fatal(err)
		}
		var seen []bson.Raw
		if err := cur.All(ctx, &seen); err != nil {
			b.Fatal(err)
		}
		if len(seen) != 0 {
			b.Fatalf("the ledger has seen %d of a batch of new events", len(seen))
		}
		recs := make([]any, n)
		for j, id := range ids {
			recs[j] = entry(id.(string)[len("orders/"):], i+j)
		}
		if _, err := ledger.InsertMany(ctx, recs, options.InsertMany().SetOrdered(false)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu.report(b, b.N, "event")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/event")
}

// BenchmarkConcurrentStreams measures change events per second delivered to
// four change streams on one collection, each with its own client, while a
// writer inserts 1 KiB documents in batches of 100: the shape of four Ferry
// partitions in one process. The rate counts every stream's events.
func BenchmarkConcurrentStreams(b *testing.B) {
	c, uri := benchClientURI(b)
	ctx := context.Background()
	const streams = 4
	var css []*mongo.ChangeStream
	for s := 0; s < streams; s++ {
		cl, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
		cs, err := cl.Database(c.Database().Name()).Collection(c.Name()).Watch(ctx, mongo.Pipeline{})
		if err != nil {
			b.Fatal(err)
		}
		css = append(css, cs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	var wg sync.WaitGroup
	errs := make(chan error, streams+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < b.N; i += 100 {
			docs := make([]any, 0, 100)
			for j := i; j < i+100 && j < b.N; j++ {
				docs = append(docs, kibDoc(j))
			}
			if _, err := c.InsertMany(ctx, docs); err != nil {
				errs <- err
				return
			}
		}
	}()
	for _, cs := range css {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cs.Close(ctx)
			for i := 0; i < b.N; i++ {
				if !cs.Next(ctx) {
					errs <- fmt.Errorf("stream ended after %d of %d events: %v", i, b.N, cs.Err())
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu.report(b, streams*b.N, "event")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(streams*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkWriteLatencyWhileStreamsCatchUp measures single inserts (into
// another collection) while four change streams, each with its own client,
// read a 20,000-event backlog of 1 KiB documents over and over, as four
// partitions catching up do. It reports the inserts' median, 99th
// percentile and worst latency: a write waits for the engine lock, which a
// change-stream getMore used to hold while it built a whole batch (up to
// 16 MiB of events).
func BenchmarkWriteLatencyWhileStreamsCatchUp(b *testing.B) {
	c, uri := benchClientURI(b)
	ctx := context.Background()
	var ping bson.Raw
	if err := c.Database().RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Decode(&ping); err != nil {
		b.Fatal(err)
	}
	t, i := ping.Lookup("operationTime").Timestamp()
	start := bson.Timestamp{T: t, I: i + 1}
	const backlog = 20_000
	for i := 0; i < backlog; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000; j++ {
			docs = append(docs, kibDoc(j))
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for s := 0; s < 4; s++ {
		cl, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
		coll := cl.Database(c.Database().Name()).Collection(c.Name())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&start))
				if err != nil {
					errs <- err
					return
				}
				for n := 0; n < backlog; n++ {
					if !cs.Next(ctx) {
						errs <- fmt.Errorf("stream ended after %d events: %v", n, cs.Err())
						_ = cs.Close(ctx)
						return
					}
					select {
					case <-done:
						_ = cs.Close(ctx)
						return
					default:
					}
				}
				_ = cs.Close(ctx)
			}
		}()
	}
	other := c.Database().Collection(c.Name() + "_w")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
