package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
)

// BenchmarkRunReturnAfterCancel measures how long Run takes to return
// once its context is cancelled, against the drain timeout, in the two
// cases of issue 29: an event that keeps failing (retried until the drain
// timeout before), and a handler that ignores its context (held Run as
// long as it ran before). It reports the mean time from cancel to Run's
// return (return-s) beside the drain timeout (drain-s); Run's bound is
// drain-s + ferry.DrainMargin. One op is one consumer started, brought to
// the case, cancelled and waited for: run it with -benchtime=Nx.
//
//	go test -run '^$' -bench RunReturnAfterCancel -benchtime 3x .
func BenchmarkRunReturnAfterCancel(b *testing.B) {
	client, _ := emutest.Client(b)
	db := client.Database("ferry_bench_drain")
	_ = db.Drop(context.Background())
	store, err := boltstore.Open(filepath.Join(b.TempDir(), "checkpoints.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	dlq := deadletter.NewMongo(client.Database("ferry_bench_drain_state"), "dlq")
	type scenario struct {
		name  string
		drain time.Duration
		// handler returns the handler, a channel that receives once the
		// case is set up (the event failed a few times, or its call is
		// blocked), and a function that lets a blocked call return.
		handler func() (ferry.Handler, <-chan struct{}, func())
	}
	failing := func() (ferry.Handler, <-chan struct{}, func()) {
		ready := make(chan struct{})
		n := 0
		return func(context.Context, *ferry.Event) error {
			if n++; n == 3 {
				close(ready)
			}
			return errors.New("the handler fails for this event")
		}, ready, func() {}
	}
	ignoring := func() (ferry.Handler, <-chan struct{}, func()) {
		ready, release := make(chan struct{}), make(chan struct{})
		return func(context.Context, *ferry.Event) error {
			close(ready)
			<-release // ignores its context
			return nil
		}, ready, func() { close(release) }
	}
	for _, sc := range []scenario{
		{"failing-event/drain=8s", 8 * time.Second, failing},
		{"ignores-context/drain=1s", time.Second, ignoring},
		{"ignores-context/drain=8s", 8 * time.Second, ignoring},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				h, ready, release := sc.handler()
				stream := fmt.Sprintf("%s-%d-%d", sc.name, b.N, i)
				at := startOp(b, client)
				c, err := ferry.NewConsumer(client, h, ferry.Stream(stream), ferry.WatchCollection(db.Name(), "c"),
					ferry.Checkpoints(store), ferry.DeadLetters(dlq), ferry.StartAt(ferry.StartAtTime(at)),
					ferry.Retry(1000, time.Millisecond, 5*time.Millisecond), ferry.DrainTimeout(sc.drain))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				if _, err := db.Collection("c").InsertOne(context.Background(), bson.D{{Key: "stream", Value: stream}}); err != nil {
					b.Fatal(err)
				}
				<-ready
				t0 := time.Now()
				cancel()
				err = <-done
				total += time.Since(t0)
				release()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "return-s")
			b.ReportMetric(sc.drain.Seconds(), "drain-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
