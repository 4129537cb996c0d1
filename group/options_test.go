package group_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
)

func groupProblems(t *testing.T, c *cluster, opts ...group.Option) []string {
	t.Helper()
	_, err := group.New(c.client, c.handler, opts...)
	var ce *ferry.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New = %v, want a *ferry.ConfigError", err)
	}
	return ce.Problems
}

func wantProblems(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, p := range got {
			found = found || strings.HasPrefix(p, w)
		}
		if !found {
			t.Errorf("no problem starts with %q; got:\n  %s", w, strings.Join(got, "\n  "))
		}
	}
}

// TestOptionsEveryProblemNamed: New reports every problem at once, each
// naming its option; without a state database and a lease TTL the options
// passed on are not checked (they depend on them).
func TestOptionsEveryProblemNamed(t *testing.T) {
	c := newCluster(t)
	got := groupProblems(t, c, group.Partitions(0), nil, group.LeaseTTL(0), group.DeliveryMode("twice"),
		group.RebalanceInterval(-1))
	wantProblems(t, got,
		"nil option: option 2 of 5 is nil",
		"Name: a group name is required",
		"Partitions: must be at least 1, got 0",
		"LeaseTTL: must be at least 100ms, got 0s",
		`StateDatabase: a state database is required (group.StateDatabase(stateClient.Database("ferry"))`,
		`DeliveryMode: "twice" is not a mode`,
		"RebalanceInterval: must be positive, got -1ns",
	)
	if len(got) != 7 {
		t.Errorf("%d problems, want 7:\n  %s", len(got), strings.Join(got, "\n  "))
	}
}

// TestOptionsPassedOnAreChecked: the consumer's and the lease store's
// options fail New, not the first partition's start.
func TestOptionsPassedOnAreChecked(t *testing.T) {
	c := newCluster(t)
	got := groupProblems(t, c, group.Name("orders"), group.StateDatabase(c.state),
		group.ConsumerOptions(ferry.Concurrency(0), ferry.OnInvalidate("ignore")),
		group.LeaseOptions(lease.HeartbeatInterval(0)))
	wantProblems(t, got,
		"LeaseOptions: HeartbeatInterval: must be positive, got 0s",
		"ConsumerOptions: scope: choose what to watch",
		"ConsumerOptions: Concurrency: must be at least 1, got 0",
		`ConsumerOptions: OnInvalidate: "ignore" is not a policy`,
	)
	if len(got) != 4 {
		t.Errorf("%d problems, want 4:\n  %s", len(got), strings.Join(got, "\n  "))
	}
	if _, err := group.New(c.client, c.handler, group.Name("orders"), group.StateDatabase(c.state),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "orders"))); err != nil {
		t.Fatalf("New with valid options = %v", err)
	}
}

// TestOptionsTheGroupSetsAreRefused: the consumer options the group sets
// itself, passed through ConsumerOptions, are problems that name the
// option and what to use instead; before, New accepted them and the group
// replaced them silently (a user's DeadLetters was dropped, a
// DrainTimeout ignored).
func TestOptionsTheGroupSetsAreRefused(t *testing.T) {
	c := newCluster(t)
	dlq := deadletter.NewMongo(c.state, "my_dlq")
	store, err := mongostore.New(c.state)
	if err != nil {
		t.Fatal(err)
	}
	got := groupProblems(t, c, group.Name("orders"), group.StateDatabase(c.state),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "orders"), ferry.Stream("orders"),
			ferry.Partition(1, 4), ferry.Epoch(3), ferry.Checkpoints(store), ferry.DeadLetters(dlq),
			ferry.DrainTimeout(time.Second), ferry.LogStops(true)))
	wantProblems(t, got,
		"ConsumerOptions: Stream: the group sets it (group.Name names",
		"ConsumerOptions: Partition: the group sets it (group.Partitions",
		"ConsumerOptions: Epoch: the group sets it",
		"ConsumerOptions: Checkpoints: the group sets it",
		"ConsumerOptions: DeadLetters: the group sets it",
		"ConsumerOptions: DrainTimeout: the group sets it (use group.DrainTimeout)",
		"ConsumerOptions: LogStops: the group sets it",
	)
	if len(got) != 7 {
		t.Errorf("%d problems, want 7:\n  %s", len(got), strings.Join(got, "\n  "))
	}
	// group.Sweeper beside a shared sweeper: one of them would be dropped.
	sweep := func(context.Context, time.Time) error { return nil }
	got = groupProblems(t, c, group.Name("orders"), group.StateDatabase(c.state),
		group.Sweeper(func(ferry.Partitioning, int, int) ferry.Sweeper { return sweep }),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "orders"), ferry.WithSweeper(sweep)))
	wantProblems(t, got, "ConsumerOptions: WithSweeper: group.Sweeper is set too")
	if len(got) != 1 {
		t.Errorf("%d problems, want 1:\n  %s", len(got), strings.Join(got, "\n  "))
	}
	// The drain timeout is the group's option.
	if _, err := group.New(c.client, c.handler, group.Name("orders"), group.StateDatabase(c.state), group.DrainTimeout(time.Second),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "orders"))); err != nil {
		t.Fatalf("New with group.DrainTimeout = %v", err)
	}
}
