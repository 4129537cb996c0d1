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
	restarts  []time.Time // partition restarts, in time order
	backfills int
}

// collectLogs reads every member process's log: restarts and backfills
// are counted; failed streams, output that is not a log line (a panic)
// and unexpected exits are problems.
func (g *group) collectLogs(res *runResult) groupLogs {
	var out groupLogs
	for _, m := range g.all {
		res.logs = append(res.logs, m.logPath)
		ml, err := readLog(m.logPath)
		if err != nil {
			res.problems = append(res.problems, fmt.Sprintf("read %s: %v", m.logPath, err))
			continue
		}
		out.restarts = append(out.restarts, ml.restarts...)
		out.backfills += ml.backfills
		for _, f := range ml.failed {
			res.problems = append(res.problems, fmt.Sprintf("member %s: %s", m.id, f))
		}
		if len(ml.other) > 0 && !m.killed {
			res.problems = append(res.problems, fmt.Sprintf("member %s wrote what is not a log line: %s", m.id, ml.other[0]))
		}
		if m.exited() && !m.killed && m.err != nil {
			if ee, ok := m.err.(interface{ Sys() any }); ok {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					continue // killed after not exiting: already a problem
				}
			}
			res.problems = append(res.problems, fmt.Sprintf("member %s exited with %v", m.id, m.err))
		}
	}
	sort.Slice(out.restarts, func(i, j int) bool { return out.restarts[i].Before(out.restarts[j]) })
	return out
}
