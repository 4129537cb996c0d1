package stdout_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/stdout"
)

// lockedSink is the sink's Write as it was before it rendered with
// internal/extjson: the driver's marshaller, called while holding the
// sink's mutex for the whole batch. Kept only for the before/after
// benchmark.
type lockedSink struct {
	w         io.Writer
	canonical bool
	mu        sync.Mutex
	buf       []byte
}

func (s *lockedSink) Write(ctx context.Context, batch []*ferry.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sink.EachInOrder(ctx, batch, s.writeOne, nil)
}

func (s *lockedSink) writeOne(_ context.Context, ev *ferry.Event) error {
	js, err := bson.MarshalExtJSON(ev.Raw, s.canonical, false)
	if err != nil {
		return sink.Permanent(err)
	}
	b := s.buf[:0]
	b = append(b, `{"id":"`...)
	b = append(b, ev.ID()...)
	b = append(b, `","epoch":`...)
	b = strconv.AppendInt(b, ev.Epoch, 10)
	b = append(b, `,"op":"`...)
	b = append(b, ev.OperationType...)
	b = append(b, '"')
	b = append(b, `,"event":`...)
	b = append(b, js...)
	b = append(b, "}\n"...)
	s.buf = b
	_, err = s.w.Write(b)
	return err
}

// BenchmarkStdout writes batches of 100 ~1.4 KB change events
// (sinktest.LargeEvent) to /dev/null through the sink as it was (before:
// driver rendering under the lock, one write syscall per line) and as it
// is (after: rendered outside the lock, one write per batch), from one
// goroutine and from GOMAXPROCS goroutines at once (as lanes do), and
// prints events/s and the after/before ratio of each.
func BenchmarkStdout(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	const batchLen = 100
	batch := make([]*ferry.Event, batchLen)
	for i := range batch {
		batch[i] = sinktest.LargeEvent(i, 1)
		_ = batch[i].ID() // computed once per event in any case
	}
	ctx := context.Background()
	after, err := stdout.New(stdout.Writer(devnull))
	if err != nil {
		b.Fatal(err)
	}
	if err := after.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	before := &lockedSink{w: devnull}
	rates := map[string]float64{}
	type writer interface {
		Write(context.Context, []*ferry.Event) error
	}
	for _, par := range []string{"serial", "parallel"} {
		for _, v := range []struct {
			name string
			s    writer
		}{{"before", before}, {"after", after}} {
			s := v.s
			name := v.name + "/" + par
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				if par == "serial" {
					for b.Loop() {
						if err := s.Write(ctx, batch); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := s.Write(ctx, batch); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				rate := float64(b.N*batchLen) / b.Elapsed().Seconds()
				b.ReportMetric(rate, "events/s")
				rates[name] = rate
			})
		}
		if bf, af := rates["before/"+par], rates["after/"+par]; bf > 0 && af > 0 {
			fmt.Printf("stdout %s: before %.0f events/s, after %.0f events/s, ratio %.2f\n", par, bf, af, af/bf)
		}
	}
}
