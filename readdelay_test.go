package ferry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	ferry "github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestReadDelayShowsIdleShard: through a mongos, an event on one shard
// waits until the other, idle, shard reports progress past it, which it
// does only with its periodic no-op (periodicNoopIntervalSecs; 2 s here):
// each write made right after the previous one arrived waits about that
// long, and Status.ReadDelay and the checkpoint (what `ferry status`
// shows) report the wait. On a replica set the same writes arrive at
// once.
func TestReadDelayShowsIdleShard(t *testing.T) {
	const interval = 2 * time.Second
	// The cluster under test: shard0 holds every chunk, shard1 is idle.
	client, srv := emutest.ShardedClient(t, 2, emutest.NoopInterval(interval))
	if srv == nil {
		t.Skip("needs the emulated cluster's no-op interval")
	}
	ctx := context.Background()
	db := client.Database("ferry_readdelay")
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "enableSharding", Value: db.Name()}, {Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	c := db.Collection("c")
	shardCollection(t, c, bson.D{{Key: "g", Value: 1}})
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	sharded := measureReadDelay(t, &env{t: t, client: client, db: db, store: store, dlq: deadletter.NewMongo(client.Database(db.Name()+"_state"), "dlq")}, 4)
	for i, d := range sharded.delays[1:] {
		if d < interval/2 || d > interval+time.Second {
			t.Fatalf("write %d waited %v through the mongos with shard1 idle, want about the no-op interval %v", i+1, d, interval)
		}
	}
	t.Logf("through the mongos, shard1 idle, no-op every %v: read delays %v; Status.ReadDelay %v, checkpoint %v", interval, sharded.delays, sharded.status, sharded.stored)

	rs := measureReadDelay(t, newEnv(t, emutest.NoopInterval(interval)), 4)
	for i, d := range rs.delays {
		if d >= interval/2 {
			t.Fatalf("write %d waited %v on a replica set, want well under %v", i, d, interval/2)
		}
	}
	t.Logf("replica set: read delays %v; Status.ReadDelay %v", rs.delays, rs.status)
}

type readDelays struct {
	delays         []time.Duration // measured by the handler: arrival minus wallTime
	status, stored time.Duration   // Status.ReadDelay and the checkpoint's, after the last
}

// measureReadDelay writes n documents to e's collection c, each once the
// previous one was handled, and returns how long each waited (handled
// minus its wallTime) and what the consumer reports for the last.
func measureReadDelay(t *testing.T, e *env, n int) readDelays {
	t.Helper()
	ctx := context.Background()
	got := make(chan time.Duration, n)
	handle := func(_ context.Context, ev *ferry.Event) error {
		if ev.OperationType == "insert" {
			got <- time.Since(ev.WallTime)
		}
		return nil
	}
	cons, err := ferry.NewConsumer(e.client, handle, e.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitStarted(t, e.store)
	var out readDelays
	for i := range n {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: int32(i)}, {Key: "g", Value: int32(0)}})
		select {
		case d := <-got:
			out.delays = append(out.delays, d)
		case <-time.After(30 * time.Second):
			t.Fatalf("write %d not handled within 30 s", i)
		}
	}
	last := out.delays[n-1]
	near := func(d time.Duration) bool { return d > last-300*time.Millisecond && d <= last+50*time.Millisecond }
	poll.Until(t, 10*time.Second, func() error {
		out.status = cons.Status().ReadDelay
		cp, err := e.store.Load(ctx, "s", 0)
		if err != nil {
			return err
		}
		out.stored = cp.ReadDelay
		if !near(out.status) || !near(out.stored) {
			return fmt.Errorf("Status.ReadDelay %v, checkpoint ReadDelay %v; want about %v (the last write's wait)", out.status, out.stored, last)
		}
		return nil
	})
	return out
}
