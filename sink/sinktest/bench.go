package sinktest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
)

// BenchBatch is the batch size Benchmark writes.
const BenchBatch = 100

// Benchmark measures a sink against its destination next to a baseline,
// in one run: it writes batches of BenchBatch events (NewEvent, spread
// over 32 documents) through newSink(b, false), which delivers to the
// in-process destination, and through newSink(b, true), the same sink with
// the delivery skipped (rendering, keys and bookkeeping still done). It
// reports events/s for each as sub-benchmarks "noop" and dest, and prints
//
//	<name>: <dest> N events/s, no-op M events/s, ratio R
//
// newSink returns an unconnected sink; Benchmark connects and closes it.
func Benchmark(b *testing.B, name, dest string, newSink func(b *testing.B, baseline bool) sink.Sink) {
	rates := map[string]float64{}
	run := func(sub string, baseline bool) {
		b.Run(sub, func(b *testing.B) {
			s := newSink(b, baseline)
			ctx := context.Background()
			if err := s.Connect(ctx); err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			batch := make([]*ferry.Event, BenchBatch)
			seq := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range batch {
					batch[j] = NewEvent(seq, fmt.Sprintf("k%d", seq%32), 1)
					seq++
				}
				b.StartTimer()
				if err := s.Write(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rate := float64(b.N*BenchBatch) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "events/s")
			rates[sub] = rate
		})
	}
	run("noop", true)
	run(dest, false)
	if rates["noop"] > 0 && rates[dest] > 0 {
		fmt.Printf("%s: %s %.0f events/s, no-op %.0f events/s, ratio %.3f\n",
			name, dest, rates[dest], rates["noop"], rates[dest]/rates["noop"])
	}
}
