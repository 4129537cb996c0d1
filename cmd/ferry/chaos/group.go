package main

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"time"
)

// group is the run's member processes: one per slot, the current one, and
// every process ever started (their logs are read at the end).
type group struct {
	e     *env
	w     *writer // the run's writer (the idle fault steers it)
	slots []*member
	gen   []int
	all   []*member
}

func (g *group) start(slot int) error {
	g.gen[slot]++
	m, err := g.e.startMember(slot, fmt.Sprintf("m%d-%d", slot, g.gen[slot]))
	if err != nil {
		return err
	}
	g.slots[slot] = m
	g.all = append(g.all, m)
	return nil
}

// killAll kills every process still running.
func (g *group) killAll() {
	for _, m := range g.all {
		if !m.exited() {
			m.kill()
		}
	}
}

// anyExited reports whether a current member process has exited.
func (g *group) anyExited() bool {
	for _, m := range g.slots {
		if m != nil && m.exited() {
			return true
		}
	}
	return false
}

// victim is the member of slot, or, if it owns no partition, of the next
// slot whose member does: a fault on a member with nothing to lose tests
// little.
func (g *group) victim(ctx context.Context, slot int) *member {
	own := g.e.owners(ctx)
	for i := range g.slots {
		m := g.slots[(slot+i)%len(g.slots)]
		if len(ownedBy(own, m.id)) > 0 {
			return m
		}
	}
	return g.slots[slot]
}

// groupLogs is what the members' logs say about a run.
type groupLogs struct {
	restarts     []time.Time // partition restarts, in time order
	backfills    int
	lastBackfill time.Time // when the last backfill started
	// historyLost are the members' history-lost failures of a run that
	// loses history on purpose and delivers to a sink without a sweeper
	// (the webhook): the documented end of a backfill whose scan outlasts
	// the oplog, reported as such rather than as a problem.
	historyLost []historyFailure
	problems    []string
	paths       []string // the log files read
}

// hasSweeper reports whether the run's sink has a sweeper, so that its
// backfill streams from the marker while it scans (ferry's promise: it
// ends whenever the oplog holds the marker when the scan starts). Without
// one the backfill scans first and streams from the marker after, which
// needs the oplog to hold the marker for the whole scan: two backfills in
// a row that cannot finish fail the partition (history-lost).
func hasSweeper(sink string) bool { return sink == "mongodb" }

// collectLogs reads every member process's log (readLogs) into res: its
// problems, and the files a failed run lists.
func (g *group) collectLogs(res *runResult) groupLogs {
	out := g.readLogs()
	res.logs = append(res.logs, out.paths...)
	res.problems = append(res.problems, out.problems...)
	return out
}

// readLogs reads every member process's log: restarts and backfills are
// counted; failed streams, output that is not a log line (a panic) and
// unexpected exits are problems, but for the history-lost failures of a
// run that loses history without a sweeper (groupLogs.historyLost).
func (g *group) readLogs() groupLogs {
	var out groupLogs
	for _, m := range g.all {
		out.paths = append(out.paths, m.logPath)
		ml, err := readLog(m.logPath)
		if err != nil {
			out.problems = append(out.problems, fmt.Sprintf("read %s: %v", m.logPath, err))
			continue
		}
		out.restarts = append(out.restarts, ml.restarts...)
		out.backfills += ml.backfills
		if ml.lastBackfill.After(out.lastBackfill) {
			out.lastBackfill = ml.lastBackfill
		}
		for _, f := range ml.failed {
			out.problems = append(out.problems, fmt.Sprintf("member %s: %s", m.id, f))
		}
		for _, f := range ml.historyLost {
			f.Member = m.id
			if g.e.plan.historyLoss && !hasSweeper(g.e.plan.sink) {
				out.historyLost = append(out.historyLost, f)
				continue
			}
			why := "the oplog is not small in this run"
			if g.e.plan.historyLoss {
				why = "with a sweeper (the mongodb sink) the backfill streams from its marker while it scans, and must end"
			}
			out.problems = append(out.problems, fmt.Sprintf("member %s: partition %d failed history-lost (%s): %s", m.id, f.Partition, why, f.Err))
		}
		if len(ml.other) > 0 && !m.killed {
			out.problems = append(out.problems, fmt.Sprintf("member %s wrote what is not a log line: %s", m.id, ml.other[0]))
		}
		if m.exited() && !m.killed && m.err != nil {
			if ee, ok := m.err.(interface{ Sys() any }); ok {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					continue // killed after not exiting: already a problem
				}
			}
			out.problems = append(out.problems, fmt.Sprintf("member %s exited with %v", m.id, m.err))
		}
	}
	sort.Slice(out.restarts, func(i, j int) bool { return out.restarts[i].Before(out.restarts[j]) })
	return out
}
