package mongoproj_test

import (
	"context"
	"testing"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// BenchmarkWrite writes batches of 100 update events (each with its
// fullDocument) to a target collection on the in-process server, next to
// the no-op baseline: the same sink with the update command skipped
// (sinktest.Benchmark).
func BenchmarkWrite(b *testing.B) {
	client, _ := emutest.Client(b)
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
