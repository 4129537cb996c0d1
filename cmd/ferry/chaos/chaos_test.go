package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

func TestMain(m *testing.M) {
	// The campaign re-executes its own binary as `ferry run` members and
	// `ferry verify`; under go test that binary is this test binary, which
	// then runs the ferry command line it was given.
	if os.Getenv(childEnv) != "" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// The campaign test's seeds: 14, 15 and 16 at 10 s are, between them, the
// three setups (mongodb/transactional, mongodb with lost history,
// webhook/idempotent) and every kind of fault.
const (
	testSeed     = 14
	testRuns     = 3
	testDuration = 10 * time.Second
)

// TestCampaignPlans pins down what the campaign test covers, so a change
// to the planner cannot quietly make it cover less.
func TestCampaignPlans(t *testing.T) {
	setups, kinds, cmds := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := uint64(0); i < testRuns; i++ {
		p := newPlan(testSeed+i, 3, testDuration, false)
		setups[p.kind()] = true
		for _, f := range p.faults {
			kinds[f.kind] = true
			if f.kind == failpoint {
				cmds[f.cmd] = true
			}
		}
		if q := newPlan(testSeed+i, 3, testDuration, false); q.kind() != p.kind() || len(q.faults) != len(p.faults) || q.faults[0] != p.faults[0] {
			t.Errorf("seed %d planned twice differs", testSeed+i)
		}
	}
	for _, s := range []string{"webhook/idempotent", "mongodb/transactional", "mongodb/transactional+history-loss"} {
		if !setups[s] {
			t.Errorf("seeds %d..%d do not cover %s: %v", testSeed, testSeed+testRuns-1, s, setups)
		}
	}
	for _, k := range []string{kill9, sigstop, failpoint, http5xx, refuse} {
		if !kinds[k] {
			t.Errorf("seeds %d..%d plan no %s fault: %v", testSeed, testSeed+testRuns-1, k, kinds)
		}
	}
	if len(cmds) < 2 {
		t.Errorf("fail points on %v only", cmds)
	}
}

var (
	summaryLine = regexp.MustCompile(`(?m)^chaos: seed=14 runs=3 faults=(\d+) lost=0 dup_effects=0 order=0 worst_delay=(\S+) restarts=(\d+) zombie=0 unexpected=0 verify_missing=0 history_given_up=\d+ unrecoverable=0 failed_runs=0$`)
	runLine     = regexp.MustCompile(`(?m)^run (\d) seed=(\d+) (\S+) ok writes=(\d+) delivered=(\d+) lost=0 dup_effects=0 order=0 zombie=0 .* faults=(\d+) `)
)

// TestCampaign runs three short seeds end to end — member processes,
// faults, the drain, ferry verify, the checker — and requires a clean
// summary; then it doctors each run's real history (a delivery removed,
// one repeated under another id, two reordered) and requires the checker
// to catch each, so the clean result is not a vacuous one.
func TestCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("the campaign runs member processes for about a minute")
	}
	// A member killed inside a transaction holds its documents until the
	// server ends the transaction: 10 s here, so the drain (60 s) covers it
	// and ferry's retry backoff.
	s := settings{seed: testSeed, runs: testRuns, members: 3, duration: testDuration, drain: 60 * time.Second,
		txnLifetime: 10 * time.Second, rate: 100, verbose: true}
	var out bytes.Buffer
	var results []runResult
	t0 := time.Now()
	clean := campaignWith(context.Background(), s, &out, func(r runResult) { results = append(results, r) })
	t.Logf("campaign took %v:\n%s", time.Since(t0).Round(time.Second), out.String())
	if !clean {
		t.Fatal("the campaign failed")
	}
	m := summaryLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no clean summary line")
	}
	if f, _ := strconv.Atoi(m[1]); f < 6 {
		t.Errorf("%d faults in 3 runs, want at least 6", f)
	}
	lines := runLine.FindAllStringSubmatch(out.String(), -1)
	if len(lines) != testRuns {
		t.Fatalf("%d clean run lines, want %d", len(lines), testRuns)
	}
	for _, l := range lines {
		writes, _ := strconv.Atoi(l[4])
		delivered, _ := strconv.Atoi(l[5])
		if writes < 500 || delivered < writes/2 {
			t.Errorf("run %s (%s): writes=%d delivered=%d: too little happened to check", l[1], l[3], writes, delivered)
		}
		if !strings.Contains(l[3], "history-loss") && delivered != writes {
			t.Errorf("run %s (%s): writes=%d delivered=%d", l[1], l[3], writes, delivered)
		}
	}
	if !strings.Contains(out.String(), "history-loss(backfills=") || strings.Contains(out.String(), "history-loss(backfills=0)") {
		t.Errorf("the history-loss run lost no history (no backfill)")
	}

	for _, r := range results {
		if r.input.FinalState || len(r.input.Deliveries) == 0 {
			continue
		}
		t.Run("doctored "+r.plan.kind(), func(t *testing.T) { doctor(t, r.input) })
	}
}

// doctor alters a clean run's real history three ways and requires the
// checker to report each alteration, naming its document.
func doctor(t *testing.T, in checkInput) {
	if p := check(in).problems(5); len(p) > 0 {
		t.Fatalf("the undoctored history has problems: %q", p)
	}
	// Find a document with two changes accepted in order.
	type pos struct{ first, second int }
	byDoc := map[string][]int{}
	seen := map[string]bool{}
	for i, d := range in.Deliveries {
		if d.accepted() && !d.Backfill && !seen[d.ID] && d.Op != "delete" {
			seen[d.ID] = true
			byDoc[d.Doc] = append(byDoc[d.Doc], i)
		}
	}
	var doc string
	var at pos
	for k, idx := range byDoc {
		if len(idx) >= 2 {
			doc, at = k, pos{idx[0], idx[1]}
			break
		}
	}
	if doc == "" {
		t.Fatal("no document with two deliveries")
	}
	d1, d2 := in.Deliveries[at.first], in.Deliveries[at.second]

	// Lost: every delivery of d2's event removed.
	lost := in
	lost.Deliveries = drop(in.Deliveries, d2.ID)
	if r := check(lost); len(r.Lost) != 1 || r.Lost[0].Doc != doc || r.Lost[0].V != d2.V {
		t.Errorf("%s v%d's deliveries removed: lost %v", doc, d2.V, r.Lost)
	}
	// Duplicate effect: d1's change again under another id.
	dup := in
	again := d1
	again.ID += "-again"
	dup.Deliveries = append(append([]delivery(nil), in.Deliveries...), again)
	if r := check(dup); len(r.Dups) != 1 || r.Dups[0].Change.Doc != doc {
		t.Errorf("%s v%d delivered again under another id: duplicate effects %v", doc, d1.V, r.Dups)
	}
	// Order: d2 arrives before d1.
	swapped := in
	swapped.Deliveries = append([]delivery(nil), in.Deliveries...)
	swapped.Deliveries[at.first], swapped.Deliveries[at.second] = d2, d1
	if r := check(swapped); len(r.Order) == 0 || r.Order[0].Doc != doc {
		t.Errorf("%s v%d moved before v%d: order violations %v", doc, d2.V, d1.V, r.Order)
	}
}

// TestBadCommandLine: a bad flag value is a usage error naming the flag.
func TestBadCommandLine(t *testing.T) {
	for _, args := range [][]string{{"-runs", "0"}, {"-members", "0"}, {"-duration", "1s"}, {"-rate", "0"}, {"-txn-lifetime", "1500ms"}, {"-topology", "replica"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "chaos: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}

// TestShardedCampaignPlans: with -topology sharded every run has a chunk
// migration, an idle shard (longer than its no-op interval) and a shard
// primary stepping down; a few consecutive seeds cover both kinds of
// shard key with each sink, the balancer on and off, several no-op
// intervals and every setup; and the sharded faults leave a replica
// set's plans as they were.
func TestShardedCampaignPlans(t *testing.T) {
	keys, setups, noops, balancer := map[string]bool{}, map[string]bool{}, map[time.Duration]bool{}, map[bool]bool{}
	sinkKeys := map[string]bool{} // sink@shardKey
	for seed := uint64(1); seed <= 8; seed++ {
		p := newPlan(seed, 3, shardedDuration, true)
		keys[p.shardKey], noops[p.noop], balancer[p.balancer > 0] = true, true, true
		setups[strings.SplitN(p.kind(), "@", 2)[0]] = true
		kinds := map[string]bool{}
		for _, f := range p.faults {
			kinds[f.kind] = true
			if f.kind == idle && f.length <= p.noop {
				t.Errorf("seed %d: idle for %v, not longer than the no-op interval %v", seed, f.length, p.noop)
			}
			if f.at+f.length > p.duration+5*time.Second {
				t.Errorf("seed %d: %s at %v for %v ends long after the writes (%v)", seed, f.kind, f.at, f.length, p.duration)
			}
		}
		for _, k := range []string{migrate, idle, stepdown} {
			if !kinds[k] {
				t.Errorf("seed %d (%s) plans no %s fault: %v", seed, p.kind(), k, kinds)
			}
		}
		sinkKeys[p.sink+"@"+p.shardKey] = true
		r, q := newPlan(seed, 3, shardedDuration, false), newPlan(seed, 3, shardedDuration, false)
		if r.sharded || r.kind() != q.kind() || len(r.faults) != len(q.faults) {
			t.Errorf("seed %d: replica-set plan changed", seed)
		}
		for _, f := range r.faults {
			if f.kind == migrate || f.kind == idle || f.kind == stepdown {
				t.Errorf("seed %d: a replica-set plan has a %s fault", seed, f.kind)
			}
		}
	}
	if len(keys) != 2 || len(setups) != 4 || len(noops) < 3 || len(balancer) != 2 {
		t.Errorf("seeds 1..8 cover keys %v, setups %v, no-op intervals %v, balancer %v", keys, setups, noops, balancer)
	}
	// Each sink meets both keys: a projection on {k: 1} is keyed by the
	// whole documentKey, and ferry verify diffs it by that key.
	for _, sk := range []string{"webhook@hashed", "webhook@ranged", "mongodb@hashed", "mongodb@ranged"} {
		if !sinkKeys[sk] {
			t.Errorf("seeds 1..8 never run %s (they run %v)", sk, sinkKeys)
		}
	}
}
