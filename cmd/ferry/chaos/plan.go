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
	// sharded runs against 2 shards through a mongos (-topology sharded).
	sharded bool
	// shardKey is chaos.docs' shard key: "hashed" ({_id: "hashed"}) or
	// "ranged" ({k: 1}, k a number in [0, 1000) every document carries).
	shardKey string
	// noop is every shard's periodicNoopIntervalSecs: how long an idle
	// shard holds the merged stream back.
	noop time.Duration
	// balancer is the balancer's round interval (0: no balancer).
	balancer time.Duration
}

// Fault kinds.
const (
	kill9     = "kill9"     // SIGKILL a member, start a new process in its place after length
	sigstop   = "sigstop"   // SIGSTOP a member for length (> lease_ttl), then SIGCONT: a zombie
	failpoint = "failpoint" // failCommand on the members' connections for up to length
	http5xx   = "http5xx"   // the receiver answers 503 for length
	refuse    = "refuse"    // the receiver stops listening for length (connections refused)

	// Sharded runs only.
	migrate  = "migrate"  // split a chunk of chaos.docs and move a half to the other shard (moveChunk)
	idle     = "idle"     // the idle shard gets no writes for length: its no-op alone moves its oplog
	stepdown = "stepdown" // a shard's primary steps down: its commands fail for length (no primary yet)
)

// idleShard is the shard the idle fault leaves without writes: it is no
// database's primary shard (chaos, chaos_proj and ferry live on shard0),
// so it holds nothing but chunks of chaos.docs.
const idleShard = "shard1"

// faultSpec is one planned fault.
type faultSpec struct {
	kind   string
	at     time.Duration // after the writes start
	length time.Duration
	slot   int    // the member (kill9, sigstop)
	cmd    string // the failing command (failpoint)
	code   int32  // its error code; 0: closeConnection (failpoint, stepdown)
	times  int    // how many commands fail; 0: every one for length
	shard  int    // the shard (stepdown)
	pick   int    // which chunk (migrate), taken modulo their number
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
	case stepdown:
		what := "closeConnection"
		if f.code != 0 {
			what = fmt.Sprintf("error %d", f.code)
		}
		return fmt.Sprintf("stepdown shard%d (%s) for %v", f.shard, what, f.length.Round(time.Millisecond))
	case migrate:
		return fmt.Sprintf("migrate chunk #%d", f.pick)
	case idle:
		return fmt.Sprintf("idle %s for %v", idleShard, f.length.Round(time.Millisecond))
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

// noopIntervals are the periodicNoopIntervalSecs a sharded run draws
// from: MongoDB accepts 1 to 10 s, 10 s being its default and 1 s what
// its own sharding tests use.
var noopIntervals = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}

// newPlan draws run seed's plan; sharded adds the sharded cluster's setup
// and faults (a replica set's plan is the same with or without them).
func newPlan(seed uint64, members int, duration time.Duration, sharded bool) plan {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	p := plan{seed: seed, sink: "webhook", mode: "idempotent", members: members, duration: duration, sharded: sharded}
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
	// A sharded run draws its setup from a generator of its own, and has
	// each sharded fault at least once: they take every other slot until
	// each has come, sooner when the time left gets short.
	var forced []string
	var srng *rand.Rand
	if sharded {
		srng = rand.New(rand.NewPCG(seed, 0x5ba4d))
		// The key kind alternates with the seed, shifted every fourth
		// seed, so each setup (seed % 4) meets both kinds: a mongodb sink
		// on {k: 1} keys its projection by the whole documentKey ({k, _id}:
		// package mongoproj, "Keys"), as ferry verify's projection diff
		// does (docs/sharded.md).
		p.shardKey = "hashed"
		if (seed+seed/4)%2 == 0 {
			p.shardKey = "ranged"
		}
		p.noop = noopIntervals[srng.IntN(len(noopIntervals))]
		if srng.IntN(2) == 0 {
			p.balancer = time.Duration(2000+srng.IntN(2001)) * time.Millisecond
		}
		kinds = append(kinds, migrate, migrate, idle, stepdown)
		forced = []string{idle, migrate, stepdown}
		srng.Shuffle(len(forced), func(i, j int) { forced[i], forced[j] = forced[j], forced[i] })
	}
	at := ms(1500, 3000)
	for at < duration-time.Second {
		f := faultSpec{kind: kinds[rng.IntN(len(kinds))], at: at, slot: rng.IntN(members)}
		if len(forced) > 0 && (len(p.faults)%2 == 1 || duration-at < time.Duration(len(forced))*6*time.Second) {
			f.kind, forced = forced[0], forced[1:]
		}
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
		case migrate:
			f.pick = rng.IntN(1000)
			f.length = ms(300, 1500) // after the migration, before the next fault
		case idle:
			// Longer than the no-op interval: the shard's no-op, not a
			// write, moves the merged stream on at least once.
			f.length = max(p.noop+ms(1000, 2500), 3*time.Second)
		case stepdown:
			f.shard = rng.IntN(2)
			f.code = []int32{0, 10107, 11602, 189}[rng.IntN(4)]
			f.length = ms(1000, 4000) // until a new primary is elected
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
	if p.sharded {
		s += "@" + p.cluster()
	}
	return s
}

// cluster describes a sharded run's cluster: sharded:hashed,noop=5s,balancer=3.2s.
func (p plan) cluster() string {
	s := "sharded:" + p.shardKey + ",noop=" + p.noop.String()
	if p.balancer > 0 {
		s += ",balancer=" + p.balancer.Round(100*time.Millisecond).String()
	}
	return s
}
