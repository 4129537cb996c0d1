package main

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// A plan is everything a seed decides about one run: the sink and delivery
// mode, whether history is lost on purpose (a tiny oplog), and the faults,
// with their times, victims and lengths. The same seed gives the same plan
// (the timing of the processes, of course, varies).
type plan struct {
	seed        uint64
	sink        string // webhook | mongodb
	mode        string // idempotent | transactional
	historyLoss bool
	oplog       int // OplogMaxEntries (0: the emulator's default)
	members     int
	duration    time.Duration // of the writes
	faults      []faultSpec
}

// Fault kinds.
const (
	kill9     = "kill9"     // SIGKILL a member, start a new process in its place after length
	sigstop   = "sigstop"   // SIGSTOP a member for length (> lease_ttl), then SIGCONT: a zombie
	failpoint = "failpoint" // failCommand on the members' connections for up to length
	http5xx   = "http5xx"   // the receiver answers 503 for length
	refuse    = "refuse"    // the receiver stops listening for length (connections refused)
)

// faultSpec is one planned fault.
type faultSpec struct {
	kind   string
	at     time.Duration // after the writes start
	length time.Duration
	slot   int    // the member (kill9, sigstop)
	cmd    string // the failing command (failpoint)
	code   int32  // its error code; 0: closeConnection
	times  int    // how many commands fail; 0: every one for length
}

func (f faultSpec) String() string {
	switch f.kind {
	case kill9:
		return fmt.Sprintf("kill9 m%d, restart after %v", f.slot, f.length.Round(time.Millisecond))
	case sigstop:
		return fmt.Sprintf("sigstop m%d for %v", f.slot, f.length.Round(time.Millisecond))
	case failpoint:
		what := "closeConnection"
		if f.code != 0 {
			what = fmt.Sprintf("error %d", f.code)
		}
		n := "every call"
		if f.times > 0 {
			n = fmt.Sprintf("%d calls", f.times)
		}
		return fmt.Sprintf("failpoint %s %s, %s within %v", f.cmd, what, n, f.length.Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s for %v", f.kind, f.length.Round(time.Millisecond))
	}
}

// short is the fault's name in a run's line: kill9:m1, failpoint:getMore/91.
func (f faultSpec) short() string {
	switch f.kind {
	case kill9, sigstop:
		return fmt.Sprintf("%s:m%d", f.kind, f.slot)
	case failpoint:
		code := "close"
		if f.code != 0 {
			code = fmt.Sprint(f.code)
		}
		return fmt.Sprintf("failpoint:%s/%s", f.cmd, code)
	}
	return f.kind
}

// historyOplog is the oplog bound of history-loss runs: about a second of
// the run's writes, ledger, lease and checkpoint entries, less than a
// crashed member's partitions take to move (lease_ttl), so the new owner's
// checkpoint is no longer in the oplog.
const historyOplog = 300

// newPlan draws run seed's plan.
func newPlan(seed uint64, members int, duration time.Duration) plan {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	p := plan{seed: seed, sink: "webhook", mode: "idempotent", members: members, duration: duration}
	// The setup cycles with the seed, so any few consecutive seeds cover
	// them all: half the runs deliver to the webhook, a quarter keep the
	// projection in transactional mode, a quarter lose history (with
	// either sink, alternately).
	switch seed % 4 {
	case 2:
		p.sink, p.mode = "mongodb", "transactional"
	case 3:
		p.historyLoss = true
		if seed/4%2 == 1 {
			p.sink, p.mode = "mongodb", "transactional"
		}
	}
	if p.historyLoss {
		p.oplog = historyOplog
	}
	kinds := []string{kill9, kill9, sigstop, failpoint, failpoint}
	if p.sink == "webhook" {
		kinds = append(kinds, http5xx, refuse)
	}
	cmds := []string{"getMore", "findAndModify", "update", "insert"}
	if p.mode == "transactional" {
		cmds = append(cmds, "commitTransaction")
	}
	codes := []int32{0, 91, 10107, 11600, 189}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	at := ms(1500, 3000)
	for at < duration-time.Second {
		f := faultSpec{kind: kinds[rng.IntN(len(kinds))], at: at, slot: rng.IntN(members)}
		if p.historyLoss && len(p.faults) == 0 {
			f.kind = kill9 // its partitions move after the oplog has moved on: history lost
		}
		switch f.kind {
		case kill9:
			f.length = ms(300, 3000)
		case sigstop:
			f.length = leaseTTL + ms(500, 2000)
		case failpoint:
			f.cmd, f.code = cmds[rng.IntN(len(cmds))], codes[rng.IntN(len(codes))]
			if rng.IntN(3) > 0 {
				f.times = 1 + rng.IntN(10)
			}
			f.length = ms(500, 3000)
		case http5xx, refuse:
			f.length = ms(1000, 4000)
		}
		p.faults = append(p.faults, f)
		at += f.length + ms(500, 2000)
	}
	return p
}

// kind names the run's setup: webhook/idempotent, mongodb/transactional,
// and +history-loss.
func (p plan) kind() string {
	s := p.sink + "/" + p.mode
	if p.historyLoss {
		s += "+history-loss"
	}
	return s
}
