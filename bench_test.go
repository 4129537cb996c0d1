package ferry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
)

func kib(i int) bson.D {
	return bson.D{{Key: "_id", Value: i}, {Key: "payload", Value: strings.Repeat("p", 1000)}}
}

func backlog(b *testing.B, c *mongo.Collection, n int) {
	for i := 0; i < n; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000 && j < n; j++ {
			docs = append(docs, kib(j))
		}
		if _, err := c.InsertMany(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
	}
}

func startOp(b *testing.B, client *mongo.Client) bson.Timestamp {
	sess, err := client.StartSession()
	if err != nil {
		b.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := client.Database("admin").RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		b.Fatal(err)
	}
	return *sess.OperationTime()
}

// BenchmarkConsumerVsRawStream reads the same backlog of b.N 1 KiB change
// events twice in one run: with a plain `for stream.Next()` loop, and
// through a Ferry consumer with a no-op handler and batched checkpoints. It
// reports both rates and their ratio (ferry/raw).
func BenchmarkConsumerVsRawStream(b *testing.B) {
	client, _ := emutest.Client(b)
	db := client.Database(fmt.Sprintf("bench_%d", time.Now().UnixNano()))
	c := db.Collection("c")
	at := startOp(b, client)
	backlog(b, c, b.N)
	// One untimed pass first, so both timed passes find the server's
	// per-entry encodings warm.
	warm, err := c.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if !warm.Next(context.Background()) {
			b.Fatal(warm.Err())
		}
	}
	warm.Close(context.Background())
	b.ResetTimer()
	// Alternate the two readers three times and compare medians: one pass
	// each is at the mercy of the 2-core machine's noise.
	var raws, ferries []float64
	for round := range 3 {
		raws = append(raws, float64(b.N)/rawPass(b, c, at).Seconds())
		ferries = append(ferries, float64(b.N)/ferryPass(b, client, db, at, round).Seconds())
	}
	b.StopTimer()
	rawRate, ferryRate := median(raws), median(ferries)
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(ferryRate, "ferry-events/s")
	b.ReportMetric(ferryRate/rawRate, "ratio")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// rawPass reads b.N events with a plain driver loop.
func rawPass(b *testing.B, c *mongo.Collection, at bson.Timestamp) time.Duration {
	start := time.Now()
	cs, err := c.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(context.Background())
	for i := 0; i < b.N; i++ {
		if !cs.Next(context.Background()) {
			b.Fatal(cs.Err())
		}
	}
	return time.Since(start)
}

// ferryPass reads b.N events through a consumer with a no-op handler.
func ferryPass(b *testing.B, client *mongo.Client, db *mongo.Database, at bson.Timestamp, round int) time.Duration {
	store, err := boltstore.Open(filepath.Join(b.TempDir(), fmt.Sprintf("cp%d.db", round)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var n atomic.Int64
	done := make(chan struct{})
	handler := func(context.Context, *ferry.Event) error {
		if n.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	}
	cons, err := ferry.NewConsumer(client, handler, ferry.Stream("bench"), ferry.WatchCollection(db.Name(), "c"),
		ferry.Checkpoints(store), ferry.DeadLetters(deadletter.NewMongo(db, "dlq")), ferry.StartAt(ferry.StartAtTime(at)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	runDone := make(chan error, 1)
	go func() { runDone <- cons.Run(ctx) }()
	<-done
	d := time.Since(start)
	cancel()
	if err := <-runDone; err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkBacklogMemory runs a consumer with a slow handler over backlogs
// of 25,000 and 100,000 1 KiB events (the emulator in another process) and
// reports the consumer process's peak heap: it must not grow with the
// backlog, because reading pauses when the bounded queue is full.
func BenchmarkBacklogMemory(b *testing.B) {
	for _, size := range []int{25_000, 100_000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			// The emulator runs in a process of its own: the benchmark measures
			// the consumer's memory, not the server's.
			client, _ := emutest.Client(b)
			db := client.Database(fmt.Sprintf("mem_%d", time.Now().UnixNano()))
			at := startOp(b, client)
			backlog(b, db.Collection("c"), size)
			runtime.GC()
			store, err := boltstore.Open(filepath.Join(b.TempDir(), "cp.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			var peak atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.NewTicker(20 * time.Millisecond)
				defer t.Stop()
				var ms runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						runtime.ReadMemStats(&ms)
						if ms.HeapInuse > peak.Load() {
							peak.Store(ms.HeapInuse)
						}
					}
				}
			}()
			b.ResetTimer()
			for range b.N {
				var n atomic.Int64
				done := make(chan struct{})
				handler := func(ctx context.Context, _ *ferry.Event) error {
					time.Sleep(50 * time.Microsecond) // a slow sink
					if n.Add(1) == int64(size) {
						close(done)
					}
					return nil
				}
				cons, err := ferry.NewConsumer(client, handler, ferry.Stream(fmt.Sprint("mem", time.Now().UnixNano())),
					ferry.WatchCollection(db.Name(), "c"), ferry.Checkpoints(store), ferry.DeadLetters(deadletter.NewMongo(db, "dlq")),
					ferry.StartAt(ferry.StartAtTime(at)), ferry.QueueLimit(1000, 8<<20))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				runDone := make(chan error, 1)
				go func() { runDone <- cons.Run(ctx) }()
				<-done
				cancel()
				if err := <-runDone; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		})
	}
}
