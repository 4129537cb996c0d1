package group_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/emutest"
)

// BenchmarkPartitionScaling applies b.N events with a 1 ms handler (one lane
// per partition, so partitions are the only parallelism) through one
// partition on one member, then through four partitions across four
// members, in one run, and reports both rates and their ratio.
func BenchmarkPartitionScaling(b *testing.B) {
	rates := map[int]float64{}
	for _, partitions := range []int{1, 4} {
		uri, _ := emutest.URI(b)
		client, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("scale%d_%d", partitions, time.Now().UnixNano())
		src, state := client.Database(name), client.Database(name+"_state")
		sess, _ := client.StartSession()
		_ = src.RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err()
		at := *sess.OperationTime()
		sess.EndSession(context.Background())
		for i := 0; i < b.N; i += 500 {
			var docs []any
			for j := i; j < i+500 && j < b.N; j++ {
				docs = append(docs, bson.D{{Key: "_id", Value: j}})
			}
			if _, err := src.Collection("c").InsertMany(context.Background(), docs); err != nil {
				b.Fatal(err)
			}
		}
		var applied atomic.Int64
		done := make(chan struct{})
		handler := func(context.Context, *ferry.Event) error {
			time.Sleep(time.Millisecond)
			if applied.Add(1) == int64(b.N) {
				close(done)
			}
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, partitions)
		start := time.Now()
		for m := range partitions {
			g, err := group.New(client, handler, group.Name("bench"), group.Partitions(partitions),
				group.MemberID(fmt.Sprint("m", m)), group.StateDatabase(state), group.RebalanceInterval(50*time.Millisecond),
				group.ConsumerOptions(ferry.WatchCollection(src.Name(), "c"), ferry.StartAt(ferry.StartAtTime(at)),
					ferry.Concurrency(1), ferry.MaxAwaitTime(50*time.Millisecond)))
			if err != nil {
				b.Fatal(err)
			}
			go func() { errs <- g.Run(ctx) }()
		}
		<-done
		rates[partitions] = float64(b.N) / time.Since(start).Seconds()
		cancel()
		for range partitions {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		_ = client.Disconnect(context.Background())
	}
	b.ReportMetric(rates[1], "events/s-1-partition")
	b.ReportMetric(rates[4], "events/s-4-partitions")
	b.ReportMetric(rates[4]/rates[1], "ratio")
}
