package mongotest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// kibDoc returns a document of about 1 KiB.
func kibDoc(i int) bson.D {
	return bson.D{
		{Key: "_id", Value: i},
		{Key: "customer", Value: "customer-" + strings.Repeat("x", 20)},
		{Key: "status", Value: "new"},
		{Key: "payload", Value: strings.Repeat("p", 900)},
		{Key: "n", Value: int64(i)},
	}
}

func benchClient(b *testing.B) *mongo.Collection {
	b.Helper()
	c, _ := benchClientURI(b)
	return c
}

// benchClientURI is benchClient that also returns the server's URI, for
// benchmarks that connect more clients.
func benchClientURI(b *testing.B) (*mongo.Collection, string) {
	b.Helper()
	c, uri, _ := benchClientAll(b)
	return c, uri
}

// benchClientServer is benchClient that also returns the emulator, for
// benchmarks that use its controls; they skip against a real server.
func benchClientServer(b *testing.B) (*mongo.Collection, *mongotest.Server) {
	b.Helper()
	c, _, srv := benchClientAll(b)
	if srv == nil {
		b.Skip("needs the emulator")
	}
	return c, srv
}

func benchClientAll(b *testing.B) (*mongo.Collection, string, *mongotest.Server) {
	b.Helper()
	uri, srv := mongotest.URI(b)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	c := client.Database("bench").Collection(sanitize(b.Name()))
	_ = c.Drop(context.Background())
	return c, uri, srv
}

// BenchmarkChangeStreamEvents measures change events per second delivered to
// a driver change stream (1 KiB documents), reading a backlog written before
// the timer starts.
func BenchmarkChangeStreamEvents(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	cs, err := c.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)
	const batch = 1000
	for i := 0; i < b.N; i += batch {
		docs := make([]any, 0, batch)
		for j := i; j < i+batch && j < b.N; j++ {
			docs = append(docs, kibDoc(j))
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		if !cs.Next(ctx) {
			b.Fatal(cs.Err())
		}
	}
	b.StopTimer()
	cpu.report(b, b.N, "event")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkInsert measures single-document inserts per second (1 KiB).
func BenchmarkInsert(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.InsertOne(ctx, kibDoc(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// BenchmarkInsertMany measures inserts per second in batches of 1000.
func BenchmarkInsertMany(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000 && j < b.N; j++ {
			docs = append(docs, kibDoc(j))
		}
		if _, err := c.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// cpuMeter reports the process CPU time per unit of work a benchmark did,
// a figure steadier than wall time on a busy machine.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{start: processCPU()} }

// report adds the metric "cpu-µs/<unit>" for n units.
func (m cpuMeter) report(b *testing.B, n int, unit string) {
	if d := processCPU() - m.start; d > 0 && n > 0 {
		b.ReportMetric(float64(d.Microseconds())/float64(n), "cpu-µs/"+unit)
	}
}

// BenchmarkStartup is what a test pays for an in-process emulator: start
// it, connect, one command, disconnect, close it (compare
// internal/emutest's BenchmarkStartup, the same out of process).
func BenchmarkStartup(b *testing.B) {
	for b.Loop() {
		srv := mongotest.NewServer()
		c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Ping(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		_ = c.Disconnect(context.Background())
		srv.Close()
	}
}
