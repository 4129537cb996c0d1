package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

func TestMain(m *testing.M) {
	// The demo re-executes its own binary as `ferry run` member processes;
	// under go test that binary is this test binary, which then runs the
	// ferry command line it was given.
	if os.Getenv(demoChildEnv) != "" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// TestDemo runs the README's main command: a TTL collection, three member
// processes, one killed with SIGKILL midway; every insert and expiry is
// delivered, none lost, none applied twice, and the takeover happens within
// the lease TTL plus a second.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo(context.Background(), []string{"-n", "60"}, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`(?m)^demo: written=60 expired=60 delivered=120 duplicates=0 lost=0 takeover_ms=(\d+)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("demo report:\n%s", out.String())
	}
	var ms int
	fmt.Sscan(m[1], &ms)
	if ms <= 0 || ms > 3000 {
		t.Fatalf("takeover %d ms, want within the 2 s lease TTL + 1 s", ms)
	}
}

// TestTakeoverRuns runs the README's takeover measurement on more
// partitions than the walk-through: one SIGKILL, one SIGTERM and two
// joins; the report gives each figure and the SIGKILL takeover is within
// lease_ttl × 1.25 + 1 s (the demo fails otherwise).
func TestTakeoverRuns(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo(context.Background(), []string{"-takeover-runs", "1", "-partitions", "16"}, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`(?m)^takeover after SIGKILL: runs=1 min=\d+ms median=\d+ms max=\d+ms \(partitions 16, members 2, lease_ttl 2000ms; within the bound lease_ttl × 1\.25 \+ 1 s = 3500ms\)$`,
		`(?m)^takeover after SIGTERM: runs=1 min=\d+ms median=\d+ms max=\d+ms \(partitions 16, members 2, lease_ttl 2000ms\)$`,
		`(?m)^rebalance after a join: runs=2 min=\d+ms median=\d+ms max=\d+ms \(partitions 16, members 2, lease_ttl 2000ms; from the new member's start until every member owns its share\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %s in:\n%s", want, out.String())
		}
	}
}

// TestTakeoverFlags: the measurement's flags are checked, and only go
// with -takeover-runs.
func TestTakeoverFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-partitions", "8"},
		{"-takeover-runs", "1", "-partitions", "0"},
		{"-takeover-runs", "1", "-members", "1"},
		{"-takeover-runs", "1", "-lease-ttl", "10ms"},
	} {
		err := runDemo(context.Background(), args, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
