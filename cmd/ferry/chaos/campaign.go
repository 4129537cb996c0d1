package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferry-io/ferry/verify"
)

// settings are the command line's.
type settings struct {
	seed     uint64
	runs     int
	members  int
	duration time.Duration // of each run's writes
	drain    time.Duration // how long a run waits for every change to be delivered
	// txnLifetime is the emulator's transactionLifetimeLimitSeconds: how
	// long a transaction of a killed member keeps its documents locked.
	txnLifetime time.Duration
	rate        int // writes a second
	verbose     bool
	keep        bool // keep every run's directory (configuration, member logs), not only failed runs'
	// sharded: every run against 2 shards through a mongos (-topology
	// sharded), with chunk migrations, an idle shard and shard primaries
	// stepping down among the faults.
	sharded bool
}

// totals add the runs up for the summary line.
type totals struct {
	runs, failed, faults           int
	lost, dups, order, zombie      int
	gaveUp, unrecoverable          int
	unexpected, verifyMissing      int
	restarts                       int
	worstDelay                     time.Duration
	worstDelayFault, worstDelayRun string
}

// campaign runs s.runs runs, seeds s.seed, s.seed+1, ..., printing a line
// per run and the summary line; it reports whether every run was clean.
func campaign(ctx context.Context, s settings, out io.Writer) bool {
	return campaignWith(ctx, s, out, nil)
}

// campaignWith is campaign, handing each run's result to each (tests).
func campaignWith(ctx context.Context, s settings, out io.Writer, each func(runResult)) bool {
	var t totals
	for i := 0; i < s.runs && ctx.Err() == nil; i++ {
		p := newPlan(s.seed+uint64(i), s.members, s.duration, s.sharded)
		res := runOne(ctx, p, s)
		t.add(res)
		res.print(out, i+1, s)
		if each != nil {
			each(res)
		}
	}
	topology := ""
	if s.sharded {
		topology = " topology=sharded"
	}
	fmt.Fprintf(out, "chaos: seed=%d runs=%d%s faults=%d lost=%d dup_effects=%d order=%d worst_delay=%s restarts=%d zombie=%d unexpected=%d verify_missing=%d "+
		"history_given_up=%d unrecoverable=%d failed_runs=%d\n",
		s.seed, t.runs, topology, t.faults, t.lost, t.dups, t.order, t.worstDelay.Round(time.Millisecond), t.restarts,
		t.zombie, t.unexpected, t.verifyMissing, t.gaveUp, t.unrecoverable, t.failed)
	return t.failed == 0 && t.runs == s.runs
}

func (t *totals) add(r runResult) {
	t.runs++
	if r.failed() {
		t.failed++
	}
	c := r.check
	t.faults += len(r.faults)
	t.lost += len(c.Lost)
	t.dups += len(c.Dups)
	t.order += len(c.Order)
	t.zombie += len(c.Zombie)
	t.gaveUp += len(r.historyLost)
	t.unrecoverable += len(c.Unrecoverable)
	t.unexpected += len(c.Unexpected)
	if !r.verifyExempt {
		t.verifyMissing += r.verify.missing
	}
	t.restarts += c.Restarts
	if c.WorstDelay > t.worstDelay {
		t.worstDelay = c.WorstDelay
	}
}

// runResult is one run's outcome.
type runResult struct {
	plan      plan
	check     checkResult
	input     checkInput // what the check compared (tests doctor it)
	faults    []fault
	verify    verifyResult
	proj      *verify.ProjectionReport
	problems  []string // what failed the run, besides the checker's findings
	notes     []string // what is worth knowing but fails nothing
	logs      []string // member log files
	backfills int      // backfills the members started
	// historyLost are the members' history-lost failures that fail
	// nothing (a history-loss run without a sweeper): the library gave up
	// recovering a partition's history and said so.
	historyLost []historyFailure
	// drainExpired: the drain's deadline passed before everything was
	// delivered.
	drainExpired bool
	// verifyExempt: history was lost, so ferry verify's missing changes
	// (before a backfill's marker) do not count; the final state does.
	verifyExempt bool
	dir          string
	took         time.Duration
}

// failed reports whether the run must fail the campaign: a lost change,
// a duplicate effect in transactional mode, an order violation, a zombie's
// effect, a change nobody made, a missing change by ferry verify, a
// projection that differs from the source, or any other problem.
func (r runResult) failed() bool {
	c := r.check
	return len(r.problems) > 0 || len(c.Lost) > 0 || len(c.Order) > 0 || len(c.Zombie) > 0 || len(c.Unexpected) > 0 ||
		len(c.Dups) > 0 && r.plan.mode == "transactional"
}

func (r runResult) print(out io.Writer, n int, s settings) {
	c := r.check
	status := "ok"
	switch {
	case r.failed():
		status = "FAILED"
	case len(c.Unrecoverable) > 0:
		status = "unrecoverable" // history given up, and said so: not a loss
	}
	var fs []string
	for _, f := range c.Faults {
		fs = append(fs, fmt.Sprintf("%s %s/%dr", f.Fault.Kind, f.WorstDelay.Round(10*time.Millisecond), f.Restarts))
	}
	kind := r.plan.kind()
	if r.plan.historyLoss {
		kind += fmt.Sprintf("(backfills=%d)", r.backfills)
	}
	vm := fmt.Sprint(r.verify.missing)
	if r.verifyExempt {
		vm += "(history-lost)"
	}
	gaveUp := ""
	if len(r.historyLost) > 0 {
		gaveUp = fmt.Sprintf(" history_given_up=%d unrecoverable=%d", len(r.historyLost), len(c.Unrecoverable))
	}
	fmt.Fprintf(out, "run %d seed=%d %s %s writes=%d delivered=%d lost=%d dup_effects=%d order=%d zombie=%d worst_delay=%s restarts=%d verify_missing=%s%s faults=%d [%s] took=%s\n",
		n, r.plan.seed, kind, status, c.Writes, c.Delivered, len(c.Lost), len(c.Dups), len(c.Order), len(c.Zombie),
		c.WorstDelay.Round(time.Millisecond), c.Restarts, vm, gaveUp, len(r.faults), strings.Join(fs, ", "), r.took.Round(time.Second))
	// History given up is always shown: what the library said, and what
	// it left undelivered (or that another member recovered it).
	for _, f := range r.historyLost {
		fmt.Fprintf(out, "  history given up: member %s partition %d at %s: %s\n", f.Member, f.Partition, f.At.Format("15:04:05.000"), f.Err)
	}
	if len(r.historyLost) > 0 {
		if len(c.Unrecoverable) == 0 {
			fmt.Fprintf(out, "  (another member recovered those partitions: the final state was reached)\n")
		} else if len(r.input.GaveUp) == partitions {
			fmt.Fprintf(out, "  (the stream failed on every member: no partition was delivered after that)\n")
		}
		for i, u := range c.Unrecoverable {
			if i == 5 {
				fmt.Fprintf(out, "  ... and %d more\n", len(c.Unrecoverable)-5)
				break
			}
			fmt.Fprintf(out, "  unrecoverable: %s: its latest version v%d was never delivered (partition %d)\n", u.Doc, u.V, partitionOf(u.Doc))
		}
	}
	if s.verbose || r.failed() {
		for _, f := range c.Faults {
			fmt.Fprintf(out, "  fault +%s %s: %d writes in its window, worst delay %s, %d partition restarts\n",
				f.Fault.Start.Sub(r.faults[0].Start).Round(10*time.Millisecond), f.Fault.Desc, f.Writes, f.WorstDelay.Round(time.Millisecond), f.Restarts)
		}
		if r.verify.output != "" {
			fmt.Fprintf(out, "  ferry verify:\n%s\n", indent(indent(r.verify.output)))
		}
		if r.proj != nil {
			fmt.Fprintf(out, "  %s\n", r.proj)
		}
		for _, n := range r.notes {
			fmt.Fprintf(out, "  note: %s\n", n)
		}
	}
	if !r.failed() {
		if len(r.historyLost) > 0 {
			fmt.Fprintf(out, "  kept: %s (configuration and every member's log)\n", r.dir)
		}
		return
	}
	for _, p := range c.problems(10) {
		fmt.Fprintf(out, "  %s\n", p)
	}
	if len(c.Dups) > 0 && r.plan.mode != "transactional" {
		fmt.Fprintf(out, "  (duplicate effects are allowed in %s mode and fail only transactional runs)\n", r.plan.mode)
	}
	for _, p := range r.problems {
		fmt.Fprintf(out, "  problem: %s\n", p)
	}
	for _, l := range r.logs {
		fmt.Fprintf(out, "  --- %s (last 3000 bytes):\n%s\n", l, indent(tailFile(l, 3000)))
	}
	fmt.Fprintf(out, "  kept: %s (configuration and every member's log)\n", r.dir)
	topology := ""
	if r.plan.sharded {
		topology = " -topology sharded"
	}
	fmt.Fprintf(out, "  reproduce: go run ./cmd/ferry/chaos%s -seed %d -runs 1 -members %d -duration %s -txn-lifetime %s\n",
		topology, r.plan.seed, r.plan.members, r.plan.duration, s.txnLifetime)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// waitUntil polls cond every 100 ms until it holds (true) or d passes.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		pause(ctx, 100*time.Millisecond)
	}
}
