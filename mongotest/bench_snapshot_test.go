package mongotest_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/hashkey"
)

// BenchmarkSnapshotRead loads a collection of 1 KiB documents
// ($MONGOTEST_BENCH_DOCS of them, 200,000 by default) through insertMany
// and reads it back as Ferry's snapshot does, through the driver, printing
// the rates in documents per second:
//
//   - insert: insertMany in batches of 1000 (the load);
//   - findloop: one find {} read to the end in batches of 1000;
//   - hashed: the chunks of mode (A), find with hint {_id: "hashed"},
//     min/max on the hashed _id and limit 1001, over 4 ranges of the
//     hashed space (the {_id: "hashed"} index is built over the loaded
//     documents first: hashed-build-ms);
//   - id: the chunks of mode (B), find {_id: {$gt: last}, $expr:
//     <$toHashedIndexKey of _id in a partition>} sorted and hinted on _id,
//     limit 1001, for each of 4 partitions (every key is examined once per
//     partition, a quarter of the documents match);
//
// each at a snapshot (readConcern "snapshot" in a session), plus the
// process's resident memory after the load (rss-MiB: the driver and the
// emulator). b.N repeats the reads; run it with -benchtime=1x.
func BenchmarkSnapshotRead(b *testing.B) {
	n := 200_000
	if s := os.Getenv("MONGOTEST_BENCH_DOCS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("MONGOTEST_BENCH_DOCS=%q: want a positive number of documents", s)
		}
		n = v
	}
	c := benchClient(b)
	ctx := context.Background()
	payload := strings.Repeat("p", 900)
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000 && j < n; j++ {
			docs = append(docs, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "n", Value: int64(j)},
				{Key: "customer", Value: fmt.Sprintf("customer-%08d", j)}, {Key: "payload", Value: payload}})
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	insertRate := float64(n) / time.Since(start).Seconds()
	runtime.GC()
	rss := residentMiB()
	report := map[string]float64{"insert-docs/s": insertRate, "rss-MiB": rss}

	start = time.Now()
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		b.Fatal(err)
	}
	report["hashed-build-ms"] = float64(time.Since(start).Milliseconds())

	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		start = time.Now()
		got := benchFindLoop(b, ctx, c)
		if got != n {
			b.Fatalf("find loop read %d documents, want %d", got, n)
		}
		report["findloop-docs/s"] = float64(n) / time.Since(start).Seconds()

		start = time.Now()
		if got := benchHashedChunks(b, c); got != n {
			b.Fatalf("hashed chunks read %d documents, want %d", got, n)
		}
		report["hashed-docs/s"] = float64(n) / time.Since(start).Seconds()

		start = time.Now()
		if got := benchIDChunks(b, c); got != n {
			b.Fatalf("_id chunks read %d documents, want %d", got, n)
		}
		report["id-docs/s"] = float64(n) / time.Since(start).Seconds()
	}
	b.StopTimer()
	for k, v := range report {
		b.ReportMetric(v, k)
	}
	fmt.Printf("BenchmarkSnapshotRead docs=%d: %s\n", n, formatReport(report))
}

// benchFindLoop reads the whole collection with one find and returns how
// many documents it read.
func benchFindLoop(b *testing.B, ctx context.Context, c *mongo.Collection) int {
	cur, err := c.Find(ctx, bson.D{}, options.Find().SetBatchSize(1000))
	if err != nil {
		b.Fatal(err)
	}
	defer cur.Close(ctx)
	got := 0
	for cur.Next(ctx) {
		got++
	}
	if err := cur.Err(); err != nil {
		b.Fatal(err)
	}
	return got
}

const (
	benchChunk = 1001
	benchParts = 4
)

// inSnapshot runs read in a snapshot session.
func inSnapshot(b *testing.B, c *mongo.Collection, read func(ctx context.Context) int) int {
	sess, err := c.Database().Client().StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		b.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	return read(mongo.NewSessionContext(context.Background(), sess))
}

// benchHashedChunks reads the collection in chunks of mode (A): four
// ranges of the hashed _id, each from its start in chunks of benchChunk,
// the next chunk's min just past the last hashed _id read.
func benchHashedChunks(b *testing.B, c *mongo.Collection) int {
	return inSnapshot(b, c, func(ctx context.Context) int {
		edges := []any{int64(math.MinInt64), int64(math.MinInt64 / 2), int64(0), int64(math.MaxInt64 / 2), bson.MaxKey{}}
		total := 0
		for r := 0; r+1 < len(edges); r++ {
			from := edges[r].(int64)
			for {
				cur, err := c.Find(ctx, bson.D{}, options.Find().SetHint(bson.D{{Key: "_id", Value: "hashed"}}).
					SetMin(bson.D{{Key: "_id", Value: from}}).SetMax(bson.D{{Key: "_id", Value: edges[r+1]}}).
					SetLimit(benchChunk).SetBatchSize(benchChunk))
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				var last bson.RawValue
				for cur.Next(ctx) {
					got++
					last = cur.Current.Lookup("_id")
				}
				if err := cur.Err(); err != nil {
					b.Fatal(err)
				}
				total += got
				if got < benchChunk {
					break
				}
				h, err := hashkey.HashRaw(last)
				if err != nil {
					b.Fatal(err)
				}
				from = h + 1
			}
		}
		return total
	})
}

// benchIDChunks reads the collection in chunks of mode (B): for each of
// benchParts partitions of the hashed _id, the _id index from the last
// _id read on, benchChunk documents of the partition at a time.
func benchIDChunks(b *testing.B, c *mongo.Collection) int {
	return inSnapshot(b, c, func(ctx context.Context) int {
		total := 0
		for p := 0; p < benchParts; p++ {
			part := bson.E{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
				bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$abs", Value: bson.D{{Key: "$toHashedIndexKey", Value: "$_id"}}}}, benchParts}}}, p}}}}
			filter := bson.D{part}
			for {
				cur, err := c.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).
					SetHint(bson.D{{Key: "_id", Value: 1}}).SetLimit(benchChunk).SetBatchSize(benchChunk))
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				var last bson.RawValue
				for cur.Next(ctx) {
					got++
					last = cur.Current.Lookup("_id")
				}
				if err := cur.Err(); err != nil {
					b.Fatal(err)
				}
				total += got
				if got < benchChunk {
					break
				}
				filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last.ObjectID()}}}, part}
			}
		}
		return total
	})
}

// residentMiB is the process's resident set size (VmRSS), NaN where
// /proc is not there.
func residentMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return math.NaN()
}

func formatReport(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, m[k]))
	}
	return strings.Join(parts, " ")
}
