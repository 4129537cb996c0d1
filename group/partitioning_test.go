package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/internal/poll"
)

// upgradedStream runs a member of stream "s" with n partitions under
// HashMod, the partitioning (and the identity) of streams created before
// HashRange, until every partition checkpointed, and stops it. It returns
// the stream's checkpoint store and the HashMod identity.
func upgradedStream(t *testing.T, e *fenv, n int) (*mongostore.Store, string) {
	t.Helper()
	old := e.joinWith("old", n, []group.Option{group.Partitioning(ferry.HashMod)})
	waitState(t, old, "ran every partition", func(s group.Status) bool { return len(s.Partitions) == n })
	e.waitClaimed(int64(n))
	old.stop()
	cps, err := mongostore.New(e.state)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cps.List(context.Background(), "s")
	if err != nil || len(list) != n {
		t.Fatalf("%d checkpoints (%v), want %d", len(list), err, n)
	}
	return cps, list[0].Identity
}

// modPartition is the partition HashMod routes an int32 _id to.
func modPartition(t *testing.T, id int32, n int) int {
	t.Helper()
	h, err := hashkey.Hash(id)
	if err != nil {
		t.Fatal(err)
	}
	for p := range n {
		if ferry.InPartition(ferry.HashMod, h, p, n) {
			return p
		}
	}
	t.Fatalf("_id %d in no partition", id)
	return -1
}

// TestGroupKeepsHashModOfAnUpgradedStream: a member with no partitioning
// set, on a stream that checkpointed under HashMod, runs every partition
// with HashMod — also the one whose checkpoint is gone, which follows the
// others — checkpoints under the HashMod identity, gives each partition's
// sweeper HashMod, delivers the changes made while no member ran and
// those after once each, and logs once that the stream keeps hash-mod.
func TestGroupKeepsHashModOfAnUpgradedStream(t *testing.T) {
	e := newFenv(t)
	const n = 3
	cps, mod := upgradedStream(t, e, n)
	ctx := context.Background()
	// Partition 2 loses its checkpoint, as if it had never run.
	cp, err := cps.Load(ctx, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := cps.Delete(ctx, "s", 2, cp.Version); err != nil {
		t.Fatal(err)
	}
	c := e.source.Collection("c")
	for i := range int32(30) {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var log lockedBuffer
	var mu sync.Mutex
	schemes := map[int]ferry.Partitioning{}
	m := e.joinWith("new", n, []group.Option{
		group.Logger(slog.New(slog.NewTextHandler(&log, nil))),
		group.Sweeper(func(s ferry.Partitioning, p, _ int) ferry.Sweeper {
			mu.Lock()
			schemes[p] = s
			mu.Unlock()
			return nil
		}),
	})
	waitState(t, m, "ran every partition", func(s group.Status) bool { return len(s.Partitions) == n })
	e.waitClaimed(n)
	for i := int32(100); i < 160; i++ {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var want []int32
	for i := range int32(30) {
		if modPartition(t, i, n) != 2 { // partition 2 starts over at the member's start
			want = append(want, i)
		}
	}
	for i := int32(100); i < 160; i++ {
		want = append(want, i)
	}
	poll.Until(t, 20*time.Second, func() error {
		for _, id := range want {
			if m.count(id) == 0 {
				return fmt.Errorf("_id %d not delivered", id)
			}
		}
		return nil
	})
	for _, id := range want {
		if k := m.count(id); k != 1 {
			t.Errorf("_id %d delivered %d times, want once", id, k)
		}
	}
	if s := m.g.Status(); s.State != group.Running {
		t.Fatalf("member state %s (%+v), want running", s.State, s.Failure)
	}
	list, err := cps.List(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range list {
		if cp.Identity != mod {
			t.Errorf("partition %d checkpointed under %s, want the stream's HashMod identity %s", cp.Partition, cp.Identity, mod)
		}
	}
	mu.Lock()
	for p := range n {
		if schemes[p] != ferry.HashMod {
			t.Errorf("partition %d's sweeper was made for %q, want hash-mod", p, schemes[p])
		}
	}
	mu.Unlock()
	if got := strings.Count(log.String(), "keeps hash-mod partitioning"); got != 1 {
		t.Errorf("the member logged %d times that the stream keeps hash-mod, want once:\n%s", got, log.String())
	}
}

// TestGroupRefusesMixedPartitionings: a stream whose checkpoints were
// written under both partitionings fails on a member with none set
// (identity-changed, before any partition runs), naming the partitions of
// each; none of them runs.
func TestGroupRefusesMixedPartitionings(t *testing.T) {
	e := newFenv(t)
	cps, _ := upgradedStream(t, e, 2)
	ctx := context.Background()
	cp, err := cps.Load(ctx, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cps.Delete(ctx, "s", 1, cp.Version); err != nil {
		t.Fatal(err)
	}
	// Partition 1 checkpoints under HashRange.
	c, err := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil },
		ferry.Stream("s"), ferry.WatchCollection(e.source.Name(), "c"), ferry.Partition(1, 2), ferry.Checkpoints(cps),
		ferry.OnPoison(ferry.PoisonStall), ferry.WithPartitioning(ferry.HashRange), ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.CommitEvery(1, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	e.waitClaimed(2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	m := e.join("new", 2)
	s := waitState(t, m, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure.Class != ferry.FailIdentityChanged || s.FailedPartition != -1 {
		t.Fatalf("failure %+v of partition %d, want identity-changed before any partition ran", s.Failure, s.FailedPartition)
	}
	for _, want := range []string{"two partitionings", "hash-mod for partitions [0]", "hash-range for partitions [1]"} {
		if !strings.Contains(s.Failure.Detail, want) {
			t.Errorf("the failure does not say %q: %s", want, s.Failure.Detail)
		}
	}
	if owned := m.g.Owned(); len(owned) != 0 {
		t.Errorf("the failed member runs partitions %v", owned)
	}
}

// TestGroupPartitioningSetOnHashModStream: group.Partitioning(HashRange)
// on a stream that checkpointed under HashMod fails the stream
// (identity-changed), naming the partitioning as what changed.
func TestGroupPartitioningSetOnHashModStream(t *testing.T) {
	e := newFenv(t)
	upgradedStream(t, e, 2)
	m := e.joinWith("new", 2, []group.Option{group.Partitioning(ferry.HashRange)})
	s := waitState(t, m, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure.Class != ferry.FailIdentityChanged || !strings.Contains(s.Failure.Detail, "partitioning was hash-mod, is now hash-range") {
		t.Fatalf("failure %+v, want identity-changed naming the partitioning", s.Failure)
	}
}

// TestPartitioningOptions: an unknown partitioning is a problem of
// group.Partitioning, and ferry.WithPartitioning in ConsumerOptions is
// refused (the group sets it for every partition).
func TestPartitioningOptions(t *testing.T) {
	c := newCluster(t)
	got := groupProblems(t, c, group.Name("orders"), group.StateDatabase(c.state), group.Partitioning("mod"),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.WithPartitioning(ferry.HashMod)))
	wantProblems(t, got,
		`Partitioning: "mod" is not a partitioning`,
		"ConsumerOptions: WithPartitioning: the group sets it (use group.Partitioning",
	)
	if len(got) != 2 {
		t.Errorf("%d problems, want 2:\n  %s", len(got), strings.Join(got, "\n  "))
	}
}
