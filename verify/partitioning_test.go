package verify_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/verify"
)

// TestVerifiesAHashModStream: a stream that checkpointed under HashMod
// (created before HashRange), verified with no partitioning set, is
// re-read partition by partition under HashMod, as its consumers read it.
// Its partitions' checkpoints stand at different places (partition 0
// stopped early), so under HashRange the re-read would take changes of
// partition 0 after its checkpoint for changes before partition 1's and
// report them missing.
func TestVerifiesAHashModStream(t *testing.T) {
	e := newEnv(t)
	const n = 2
	var mu sync.Mutex
	applied := map[string]bool{}
	run := func(p int) (stop func()) {
		c, err := ferry.NewConsumer(e.client, func(ctx context.Context, ev *ferry.Event) error {
			if err := e.ledger.Record(ctx, "orders", ev.ID(), p, 0); err != nil {
				return err
			}
			mu.Lock()
			applied[ev.DocumentKey.Lookup("_id").StringValue()] = true
			mu.Unlock()
			return nil
		}, ferry.Stream("orders"), ferry.WatchCollection("shop", "orders"), ferry.Partition(p, n),
			ferry.WithPartitioning(ferry.HashMod), ferry.Checkpoints(e.cps), ferry.DeadLetters(e.dlq),
			ferry.CommitEvery(1, 20*time.Millisecond), ferry.MaxAwaitTime(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("partition %d: %v", p, err)
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	waitApplied := func(ids []string) {
		t.Helper()
		poll.Until(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if !applied[id] {
					return fmt.Errorf("%s not applied", id)
				}
			}
			return nil
		})
	}
	modOf := func(id string) int {
		h, err := hashkey.Hash(id)
		if err != nil {
			t.Fatal(err)
		}
		for p := range n {
			if ferry.InPartition(ferry.HashMod, h, p, n) {
				return p
			}
		}
		return -1
	}
	stop0, stop1 := run(0), run(1)
	poll.Until(t, 20*time.Second, func() error {
		for p := range n {
			if cp, err := e.cps.Load(context.Background(), "orders", p); err != nil || cp.Token == nil {
				return fmt.Errorf("partition %d has no checkpoint yet (%v)", p, err)
			}
		}
		return nil
	})
	from := e.insert(e.orders, "a", 0, 20)
	var first []string
	for i := range 20 {
		first = append(first, fmt.Sprintf("a-%d", i))
	}
	waitApplied(first)
	stop0()
	e.insert(e.orders, "b", 0, 40)
	var ofOne, ofZero []string
	for i := range 40 {
		id := fmt.Sprintf("b-%d", i)
		if modOf(id) == 1 {
			ofOne = append(ofOne, id)
		} else {
			ofZero = append(ofZero, id)
		}
	}
	waitApplied(ofOne)
	stop1()

	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	r, err := verify.Stream(ctx, e.config(from))
	if err != nil {
		t.Fatal(err)
	}
	if r.Missing != 0 || r.Applied != 20+len(ofOne) || r.Pending != len(ofZero) || !r.OK() {
		t.Fatalf("verify: %v (failure %q), want %d applied, %d pending, none missing", r, r.Failure, 20+len(ofOne), len(ofZero))
	}
}
