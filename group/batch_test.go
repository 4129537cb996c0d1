package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/poll"
)

// commands counts the commands a client sends, by name and collection
// ("find ledger", "insert ledger", "commitTransaction admin").
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commands) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		target := e.DatabaseName
		if v, err := e.Command.Index(0).ValueErr(); err == nil {
			if s, ok := v.StringValueOK(); ok {
				target = s
			}
		}
		c.mu.Lock()
		c.n[e.CommandName+" "+target]++
		c.mu.Unlock()
	}}
}

func (c *commands) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// backlogOf inserts n documents after a start position it returns, and the
// _data of the last one's change event.
func (c *cluster) backlogOf(t *testing.T, n int) (bson.Timestamp, string) {
	t.Helper()
	ctx := context.Background()
	at := c.opTime(t)
	for i := range n {
		if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.source.Collection("c").Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	var last string
	for range n {
		if !cs.Next(ctx) {
			t.Fatal(cs.Err())
		}
		last = cs.Current.Lookup("_id", "_data").StringValue()
	}
	return at, last
}

// runUntilPast runs g until every one of partitions checkpoints is at or
// past the event whose _data is last, then stops it.
func (c *cluster) runUntilPast(t *testing.T, g *group.Group, partitions int, last string) {
	t.Helper()
	ctx := context.Background()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	defer stop() // also when the wait below fails the test
	poll.Until(t, 30*time.Second, func() error {
		past := 0
		cur, err := c.state.Collection("checkpoints").Find(ctx, bson.D{})
		if err != nil {
			return err
		}
		for cur.Next(ctx) {
			var cp struct {
				Token []byte `bson:"token"`
			}
			if cur.Decode(&cp) == nil && len(cp.Token) > 0 && bson.Raw(cp.Token).Lookup("_data").StringValue() >= last {
				past++
			}
		}
		if past != partitions {
			return fmt.Errorf("%d of %d partitions checkpointed past the last event", past, partitions)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchModesAbsorbReplays: a batch of 40 events (one partition, one
// lane, a linger until the batch is full) through NewBatch costs, in
// idempotent mode, one ledger find and one insert; in transactional mode
// the same in one transaction (one commit). Replayed (its checkpoint
// deleted), the batch applies nothing and costs one ledger find, no
// insert.
func TestBatchModesAbsorbReplays(t *testing.T) {
	for _, mode := range []group.Mode{group.Idempotent, group.Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t)
			ctx := context.Background()
			_ = c.state.CreateCollection(ctx, "effects") // used inside transactions: exists beforehand
			const n = 40
			at, last := c.backlogOf(t, n)
			runOnce := func() (dups int64, calls []int, cmds *commands) {
				cmds = &commands{n: map[string]int{}}
				client, err := mongo.Connect(options.Client().ApplyURI(c.uri).SetMonitor(cmds.monitor()))
				if err != nil {
					t.Fatal(err)
				}
				defer client.Disconnect(ctx)
				mine := client.Database(c.state.Name()).Collection("effects")
				var mu sync.Mutex
				effect := func(ctx context.Context, batch []*ferry.Event) error {
					docs := make([]any, len(batch))
					for i, ev := range batch {
						docs[i] = bson.D{{Key: "event", Value: ev.ID()}, {Key: "epoch", Value: ev.Epoch}}
					}
					mu.Lock()
					calls = append(calls, len(batch))
					mu.Unlock()
					_, err := mine.InsertMany(ctx, docs)
					return err
				}
				g, err := group.NewBatch(client, effect, group.Name("orders"), group.Partitions(1), group.MemberID("solo"),
					group.StateDatabase(client.Database(c.state.Name())), group.DeliveryMode(mode),
					group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
					group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.StartAt(ferry.StartAtTime(at)),
						ferry.MaxAwaitTime(50*time.Millisecond), ferry.Concurrency(1), ferry.BatchSize(n), ferry.BatchLinger(time.Hour)))
				if err != nil {
					t.Fatal(err)
				}
				c.runUntilPast(t, g, 1, last)
				return g.LedgerDuplicates(), calls, cmds
			}
			commits := func(cmds *commands) int { return cmds.get("commitTransaction admin") }

			dups, calls, cmds := runOnce()
			if dups != 0 || fmt.Sprint(calls) != "[40]" {
				t.Fatalf("first run: %d ledger duplicates, handler calls %v; want 0 and one call of 40", dups, calls)
			}
			if f, i := cmds.get("find ledger"), cmds.get("insert ledger"); f != 1 || i != 1 {
				t.Fatalf("first run: %d ledger finds, %d ledger inserts; want 1 and 1", f, i)
			}
			if want := map[group.Mode]int{group.Idempotent: 0, group.Transactional: 1}[mode]; commits(cmds) != want {
				t.Fatalf("first run: %d commits, want %d", commits(cmds), want)
			}
			// Forget the position: the next run replays the batch.
			if _, err := c.state.Collection("checkpoints").DeleteMany(ctx, bson.D{}); err != nil {
				t.Fatal(err)
			}
			dups, calls, cmds = runOnce()
			if dups != n || len(calls) != 0 {
				t.Fatalf("replay: %d ledger duplicates, handler calls %v; want %d and none", dups, calls, n)
			}
			if f, i := cmds.get("find ledger"), cmds.get("insert ledger"); f != 1 || i != 0 {
				t.Fatalf("replay: %d ledger finds, %d ledger inserts; want 1 and 0", f, i)
			}
			if got, err := c.state.Collection("effects").CountDocuments(ctx, bson.D{}); err != nil || got != n {
				t.Fatalf("%s mode: %d effects for %d events after a replay (%v), want %d", mode, got, n, err, n)
			}
		})
	}
}

// TestBatchTransactionalPoison: in transactional mode a batch is one
// transaction, so an event that fails aborts the others' effects too: they
// are retried alone (not counted against them) and applied once each; the
// failing event, judged alone, is dead-lettered by itself, and leaves no
// effect and no ledger entry.
func TestBatchTransactionalPoison(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	_ = c.state.CreateCollection(ctx, "effects")
	const n, poison = 10, 5
	at, last := c.backlogOf(t, n)
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	mine := client.Database(c.state.Name()).Collection("effects")
	var mu sync.Mutex
	var calls [][]int32
	effect := func(ctx context.Context, batch []*ferry.Event) error {
		be := ferry.NewBatchError(len(batch))
		var ids []int32
		for i, ev := range batch {
			id := ev.DocumentKey.Lookup("_id").Int32()
			ids = append(ids, id)
			if id == poison {
				be.Set(i, errors.New("rejected"))
				continue
			}
			if _, err := mine.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "id", Value: id}}); err != nil {
				be.Set(i, err)
			}
		}
		mu.Lock()
		calls = append(calls, ids)
		mu.Unlock()
		return be.Err()
	}
	g, err := group.NewBatch(client, effect, group.Name("orders"), group.Partitions(1), group.MemberID("solo"),
		group.StateDatabase(client.Database(c.state.Name())), group.DeliveryMode(group.Transactional),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.StartAt(ferry.StartAtTime(at)),
			ferry.MaxAwaitTime(50*time.Millisecond), ferry.Concurrency(1), ferry.BatchSize(n), ferry.BatchLinger(time.Hour),
			ferry.Retry(2, time.Millisecond, 5*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	c.runUntilPast(t, g, 1, last)

	mu.Lock()
	if len(calls) == 0 || len(calls[0]) != n {
		t.Fatalf("calls %v: want a first call of the whole batch", calls)
	}
	mu.Unlock()
	per := map[int32]int{}
	cur, err := c.state.Collection("effects").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		per[cur.Current.Lookup("id").Int32()]++
	}
	for id := range int32(n) {
		want := 1
		if id == poison {
			want = 0
		}
		if per[id] != want {
			t.Errorf("event %d: %d effects, want %d", id, per[id], want)
		}
	}
	var dl []bson.Raw
	cur, err = c.state.Collection("dlq").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &dl); err != nil {
		t.Fatal(err)
	}
	if len(dl) != 1 || dl[0].Lookup("event", "documentKey", "_id").Int32() != poison {
		t.Fatalf("%d dead letters (%v), want the poison event alone", len(dl), dl)
	}
	if entries, err := c.state.Collection("ledger").CountDocuments(ctx, bson.D{}); err != nil || entries != n-1 {
		t.Fatalf("%d ledger entries (%v), want %d: the poison event has none", entries, err, n-1)
	}
}
