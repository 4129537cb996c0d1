package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/mongotest"
)

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
		var taken []int
		after := e.epochs(ctx)
		for _, p := range owned {
			if after[p] > before[p] {
				taken = append(taken, p)
			}
		}
		cont := time.Now()
		victim.signal(syscall.SIGCONT)
		victim.stopped = false
		// The zombie must notice, by itself, that it no longer holds them.
		gaveUp := waitUntil(ctx, 5*time.Second, func() bool { return len(stillHeld(victim.logPath, taken, cont)) == 0 })
		out.Desc = fmt.Sprintf("sigstop %s for %v: %d of its partitions %v taken over meanwhile", victim.id,
			f.length.Round(time.Millisecond), len(taken), owned)
		if len(taken) > 0 && gaveUp {
			out.Desc += ", given up by the zombie after SIGCONT"
		}
		if !gaveUp {
			out.Problem = fmt.Sprintf("zombie %s did not give up partitions %v (taken over while it was stopped) within 5 s of SIGCONT",
				victim.id, stillHeld(victim.logPath, taken, cont))
		}
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
	case migrate:
		desc, err := e.migrateChunk(ctx, f)
		if err != nil {
			return out, err
		}
		out.Desc = desc
		pause(ctx, f.length)
	case idle:
		desc, err := e.idle(ctx, g.w, f)
		if err != nil {
			return out, err
		}
		out.Desc = desc
	case stepdown:
		if err := e.stepDown(ctx, f); err != nil {
			return out, err
		}
	}
	return out, nil
}

// stillHeld returns the partitions of ps for which the member's log shows
// no loss, stop or revocation since t (a lost membership, or the stream
// failing, gives up every partition).
func stillHeld(logPath string, ps []int, t time.Time) []int {
	ml, _ := readLog(logPath)
	gone := map[int]bool{}
	for _, l := range ml.lines {
		switch {
		case l.Time.Before(t):
		case strings.HasPrefix(l.Msg, "membership lost"), strings.HasPrefix(l.Msg, "stream failed"):
			return nil // every partition given up (a failed stream releases its leases)
		case l.Partition != nil && (l.Msg == "partition lost" || l.Msg == "partition revoked" || strings.HasPrefix(l.Msg, "partition stopped")):
			gone[*l.Partition] = true
		}
	}
	var held []int
	for _, p := range ps {
		if !gone[p] {
			held = append(held, p)
		}
	}
	return held
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
