package group_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/lease"
)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connectPool connects a client to the cluster with a pool of n
// connections, disconnected when the test ends.
func (c *cluster) connectPool(t *testing.T, n uint64) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri).SetMaxPoolSize(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// runGroup runs g until the test ends.
func runGroup(t *testing.T, g *group.Group) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// poolGroup is a member of four partitions whose change streams each hold
// a pooled connection of source for 3 s per getMore (MaxAwaitTime), with
// a 1 s lease TTL.
func (c *cluster) poolGroup(t *testing.T, source *mongo.Client, state *mongo.Database, log *lockedBuffer) *group.Group {
	t.Helper()
	g, err := group.New(source, c.handler, group.Name("orders"), group.Partitions(4), group.MemberID("solo"),
		group.StateDatabase(state), group.LeaseTTL(time.Second),
		group.Logger(slog.New(slog.NewTextHandler(log, nil))),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(3*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSharedPoolTimeoutIsExplained: a library user gives the group one
// client for the change streams and the state database, whose pool (2
// connections here, 100 by default) the partitions' change streams fill
// while they wait for events. Lease renewals then time out waiting for a
// connection; the group says why and what to do, once, naming
// StateDatabase and maxPoolSize (issue 25, B.1: before, only the lost
// partitions were logged, with the driver's checkout error).
func TestSharedPoolTimeoutIsExplained(t *testing.T) {
	c := newCluster(t)
	client := c.connectPool(t, 2)
	var log lockedBuffer
	runGroup(t, c.poolGroup(t, client, client.Database(c.state.Name()), &log))
	const advice = "give StateDatabase a client of its own"
	poll.Until(t, 30*time.Second, func() error {
		if !strings.Contains(log.String(), advice) {
			return errors.New("no advice about the shared pool logged yet")
		}
		return nil
	})
	if n := strings.Count(log.String(), advice); n != 1 {
		t.Errorf("advice logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "maxPoolSize") || !strings.Contains(log.String(), "partitions=4") {
		t.Errorf("the advice names neither maxPoolSize nor the partition count:\n%s", log.String())
	}
}

// TestStateClientOfItsOwnKeepsLeases: the same member, its state database
// on a client of its own: the change streams fill their own pool, and
// every lease is still held at its first epoch three lease TTLs later.
func TestStateClientOfItsOwnKeepsLeases(t *testing.T) {
	c := newCluster(t)
	source := c.connectPool(t, 2)
	state := c.connectPool(t, 0).Database(c.state.Name()) // the driver's default pool
	var log lockedBuffer
	runGroup(t, c.poolGroup(t, source, state, &log))
	first := map[int]lease.Lease{}
	poll.Until(t, 30*time.Second, func() error {
		own := c.ownersNow(t)
		if len(own) < 4 {
			return fmt.Errorf("%d of 4 partitions owned", len(own))
		}
		first = own
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		own := c.ownersNow(t)
		for p := range 4 {
			l, ok := own[p]
			if !ok || l.Epoch != first[p].Epoch {
				t.Fatalf("partition %d lost its lease: %+v, was %+v\n%s", p, l, first[p], log.String())
			}
			if l.ExpiresAt.Before(first[p].ExpiresAt.Add(3 * time.Second)) {
				return fmt.Errorf("partition %d not yet renewed through three lease TTLs", p)
			}
		}
		return nil
	})
	if strings.Contains(log.String(), "pooled connection") {
		t.Errorf("pool warning with a state client of its own:\n%s", log.String())
	}
}

// TestTransactionalWithAStateClientOfItsOwn: in transactional mode the
// transaction belongs to StateDatabase's client (the ledger, the fences
// and the handler's writes are in the state store), so a group whose
// change streams use another client applies every event once. Before, the
// transaction was started on the change streams' client and the ledger
// write failed ("session was not created by this client").
func TestTransactionalWithAStateClientOfItsOwn(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	_ = c.state.CreateCollection(ctx, "effects")
	const n = 10
	at, last := c.backlogOf(t, n)
	source := c.connectPool(t, 0)
	state := c.connectPool(t, 0).Database(c.state.Name())
	effects := state.Collection("effects")
	g, err := group.New(source, func(ctx context.Context, ev *ferry.Event) error {
		_, err := effects.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}})
		return err
	}, group.Name("orders"), group.Partitions(2), group.MemberID("solo"),
		group.StateDatabase(state), group.DeliveryMode(group.Transactional),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.StartAt(ferry.StartAtTime(at)),
			ferry.MaxAwaitTime(50*time.Millisecond), ferry.Retry(2, time.Millisecond, 5*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	c.runUntilPast(t, g, 2, last)
	if got, err := c.state.Collection("effects").CountDocuments(ctx, bson.D{}); err != nil || got != n {
		t.Fatalf("%d effects (%v), want %d", got, err, n)
	}
	if got, err := c.state.Collection("dlq").CountDocuments(ctx, bson.D{}); err != nil || got != 0 {
		t.Fatalf("%d dead letters (%v), want none", got, err)
	}
}
