package group_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-io/ferry"
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
		"StateDatabase: a state database is required",
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
