package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/mongotest"
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

// inject runs one fault to its end (the member restarted or continued,
// the fail point off, the receiver back) and returns what it did.
func (g *group) inject(ctx context.Context, f faultSpec) (fault, error) {
	e := g.e
	out := fault{Kind: f.kind, Desc: f.String(), Start: time.Now()}
	switch f.kind {
	case kill9:
		victim := g.victim(ctx, f.slot)
		out.Desc = fmt.Sprintf("kill9 %s (owned %v), restart after %v", victim.id, ownedBy(e.owners(ctx), victim.id), f.length.Round(time.Millisecond))
		victim.kill()
		pause(ctx, f.length)
		if err := g.start(victim.slot); err != nil {
			return out, err
		}
	case sigstop:
		victim := g.victim(ctx, f.slot)
		owned := ownedBy(e.owners(ctx), victim.id)
		before := e.epochs(ctx)
		victim.signal(syscall.SIGSTOP)
		victim.stopped = true
		pause(ctx, f.length)
		moved := 0
		after := e.epochs(ctx)
		for _, p := range owned {
			if after[p] > before[p] {
				moved++
			}
		}
		victim.signal(syscall.SIGCONT)
		victim.stopped = false
		out.Desc = fmt.Sprintf("sigstop %s for %v: %d of its partitions %v taken over meanwhile", victim.id,
			f.length.Round(time.Millisecond), moved, owned)
	case failpoint:
		// Times 0: always on, until cleared.
		e.srv.FailCommand(mongotest.FailPoint{Commands: []string{f.cmd}, Times: f.times, ErrorCode: f.code,
			CloseConnection: f.code == 0, AppName: memberApp})
		pause(ctx, f.length)
		e.srv.ClearFailPoints()
	case http5xx:
		e.rcv.setFailing(true)
		pause(ctx, f.length)
		e.rcv.setFailing(false)
	case refuse:
		e.rcv.refuse()
		pause(ctx, f.length)
		if err := e.rcv.listen(); err != nil {
			return out, err
		}
	}
	return out, nil
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

// ownedBy lists the partitions id owns.
func ownedBy(own map[int]string, id string) []int {
	var ps []int
	for p := 0; p < partitions; p++ {
		if own[p] == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// pause waits d (a fault's planned length) or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
