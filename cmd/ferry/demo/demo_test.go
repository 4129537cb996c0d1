package main

import (
	"bytes"
	"context"
	"fmt"
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
// delivered, none lost, none applied twice, and a takeover is measured.
// How long it takes is a figure the demo reports, not something a test can
// bound on a loaded machine: the bound is checked by the server's clock in
// cmd/ferry/internal/cli's TestCrashTakeoverWithinLeaseTTL.
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
	if ms <= 0 {
		t.Fatalf("takeover_ms=%d: the takeover after the kill was not seen", ms)
	}
}
