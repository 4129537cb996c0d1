package ferry

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkReaderToLanes hands b.N 1 KiB insert events to the reader in
// runs of 256, as the fetcher does (the events of a run aliasing one
// buffer, as they alias the driver's reply; their room in the window
// held), and lets the lanes apply them with a no-op Handler, the
// tracker number and finish them: Ferry's own work per event after the
// driver's, without the driver, the server or the checkpoint writes. It
// reports the process's CPU time per event (cpu-ns/event), the figure to
// compare on a busy machine.
func BenchmarkReaderToLanes(b *testing.B) {
	st, client := offlineConsumerDeps(b)
	var applied atomic.Int64
	c, err := NewConsumer(client, func(context.Context, *Event) error { applied.Add(1); return nil },
		WatchCollection("d", "c"), Stream("bench"), Checkpoints(st), OnPoison(PoisonStall))
	if err != nil {
		b.Fatal(err)
	}
	r := benchRunner(b, c)
	const distinct = 4096
	raws := make([]bson.Raw, distinct)
	pad := strings.Repeat("p", 1000)
	for i := range raws {
		raws[i], err = bson.Marshal(bson.D{
			{Key: "_id", Value: bson.D{{Key: "_data", Value: strings.Repeat("8", 60) + string(rune('a'+i%26))}}},
			{Key: "operationType", Value: "insert"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1, I: uint32(i)}},
			{Key: "wallTime", Value: bson.DateTime(1)},
			{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: i}, {Key: "payload", Value: pad}}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c"}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: i}}},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	batch := newReadBatch(r.c.hooks, c.cfg.name, c.cfg.partition, false)
	var rd runReader
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		k := min(fetchRun, b.N-sent)
		// The run's events alias one buffer, as they alias the driver's
		// reply (see aliasReplies).
		var size int
		for i := range k {
			size += len(raws[(sent+i)%distinct])
		}
		reply := make([]byte, 0, size)
		// Counted as the fetcher counts an aliased reply: its reference
		// held while the run is built, the run's added at the send.
		f := &fetched{raws: make([]bson.Raw, 0, k), rep: newReply(&r.win.aliased)}
		for i := range k {
			at := len(reply)
			reply = append(reply, raws[(sent+i)%distinct]...)
			f.raws = append(f.raws, reply[at:len(reply):len(reply)])
			f.bytes += int64(len(f.raws[i]))
		}
		// The run's room, all of it (waiting for the lanes to release some
		// while it does not fit), settled into reservations.
		for {
			have := r.win.tryCredit(credit{}, k, f.bytes, f.bytes)
			if have.n == k {
				break
			}
			r.win.giveBack(have)
			one, err := r.win.waitCredit(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			r.win.giveBack(one)
		}
		r.win.settle(k, f.bytes, credit{})
		f.rep.hold(k)
		f.rep.release(1)
		if _, err := rd.read(ctx, r, f, &batch); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	for _, ch := range r.lanes {
		close(ch)
	}
	r.waitLanes(nil)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/event")
	if n := applied.Load(); n != int64(b.N) {
		b.Fatalf("%d handler calls for %d events", n, b.N)
	}
	if n, bytes := r.win.depth(); n != 0 || bytes != 0 {
		b.Fatalf("the window holds %d events and %d bytes after every event was applied", n, bytes)
	}
	if n := r.win.aliased.Load(); n != 0 {
		b.Fatalf("%d server replies still counted as held after every event was applied", n)
	}
}

// cpuTime returns the CPU time (user + system) the process has used, in
// nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// offlineConsumerDeps returns what a benchmark's consumer needs but never
// reaches: a bolt store in a temporary directory and a client of an
// address nothing listens on (closed when b ends).
func offlineConsumerDeps(b *testing.B) (*boltstore.Store, *mongo.Client) {
	st, err := boltstore.Open(b.TempDir() + "/cp.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Disconnect(context.Background()) })
	return st, client
}

// benchRunner returns a runner of c with its lanes started, without a
// stream: a benchmark hands it events itself (its handler context ends
// with b).
func benchRunner(b *testing.B, c *Consumer) *runner {
	cfg := &c.cfg
	r := &runner{c: c, win: newWindow(cfg.maxEvents, cfg.maxBytes), track: &tracker{}, health: newHealth(), kick: make(chan struct{}, 1)}
	r.handlerCtx, r.cancelHandler = context.WithCancel(context.Background())
	b.Cleanup(r.cancelHandler)
	r.plainCalls()
	r.startLanes()
	return r
}
