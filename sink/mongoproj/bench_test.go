package mongoproj_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// BenchmarkWrite writes batches of 100 update events (each with its
// fullDocument) to a target collection on the in-process server, next to
// the no-op baseline: the same sink with the update command skipped
// (sinktest.Benchmark).
func BenchmarkWrite(b *testing.B) {
	uri, _ := mongotest.URI(b)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	sinktest.Benchmark(b, "mongoproj", "mongotest", func(b *testing.B, baseline bool) sink.Sink {
		var opts []mongoproj.Option
		name := "target"
		if baseline {
			opts, name = append(opts, mongoproj.WithoutWrite()), "baseline"
		}
		target := client.Database("mongoproj_bench").Collection(name)
		if err := target.Drop(context.Background()); err != nil {
			b.Fatal(err)
		}
		s, err := mongoproj.New(target, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
