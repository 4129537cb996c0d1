package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/lease"
)

// running is one partition this member consumes.
type running struct {
	held    *lease.Held
	cancel  context.CancelFunc
	done    chan error // Run's result
	started time.Time
}

// restarts paces a partition whose consumer stopped without a failure (a
// network error, a lost lease): it is not started again before notBefore.
type restarts struct {
	b         *backoff.Backoff
	notBefore time.Time
}

// stableRun is how long a partition must have run for its restart backoff
// to start again from the minimum.
const stableRun = 30 * time.Second

// session runs one membership: it returns nil when ctx ends (after a
// graceful hand-off of every partition), a *streamFailure when a partition
// failed (after handing every partition off), and another error when the
// membership is lost (after giving every partition up as lost).
func (g *Group) session(ctx context.Context, member *lease.Member, recheck *backoff.Backoff) error {
	cfg := &g.cfg
	runs := map[int]*running{}
	paced := map[int]*restarts{}
	ended := make(chan int, cfg.partitions)
	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	kick := make(chan struct{}, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); g.watchOwnership(wctx, kick) }()
	defer func() { stopWatch(); <-watched }()
	g.st.set(Running)
	started := time.Now()
	// A re-check that runs this long without failing again ends the
	// failure.
	probation := 2 * cfg.ttl
	var pub published
	for {
		g.reconcile(ctx, runs, paced, ended)
		g.publishWaits(ctx, member, &pub)
		select {
		case <-ctx.Done():
			g.st.set(Draining)
			g.stopAll(runs)
			return nil
		case <-member.Done():
			err := fmt.Errorf("group: membership lost: %w", member.Err())
			g.warnPool(err)
			for p, run := range runs {
				run.cancel()
				<-run.done
				delete(runs, p)
				g.mu.Lock()
				delete(g.owned, p)
				g.mu.Unlock()
				_ = run.held.Release(context.Background())
				if cfg.onLost != nil {
					cfg.onLost(p, err)
				}
			}
			return err
		case p := <-ended:
			if sf := g.finish(runs, paced, p); sf != nil {
				g.stopAll(runs)
				return sf
			}
		case <-tick.C:
			if time.Since(started) >= probation && g.rechecking() {
				g.recovered(recheck)
			}
		case <-kick: // a lease changed owner, or a member joined or left
		case <-g.st.waits: // a partition's sink went down or came back: publish it
		}
	}
}

// reconcile moves the member towards the target assignment.
func (g *Group) reconcile(ctx context.Context, runs map[int]*running, paced map[int]*restarts, ended chan<- int) {
	cfg := &g.cfg
	// A corrupt member or lease document does not stop the rebalance: the
	// readable ones are used, and the corrupt ones noted and repaired
	// (corrupt.go).
	members, err := g.leases.Members(ctx, cfg.name)
	badMembers, corrupt := lease.AsCorruptRecords(err)
	if err != nil && !corrupt {
		g.transient("list the group's members", err)
		return
	}
	leases, err := g.leases.List(ctx, cfg.name)
	badLeases, corrupt := lease.AsCorruptRecords(err)
	if err != nil && !corrupt {
		g.transient("list the group's leases", err)
		return
	}
	g.noteCorrupt(append(badMembers, badLeases...))
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	current := lease.Owners(leases)
	target := Assign(ids, cfg.partitions, current)
	me := cfg.memberID
	for p := range corruptLeases(badLeases) {
		if p < cfg.partitions && target[p] == me {
			g.repairLease(ctx, p)
		}
	}
	// Hand off what is no longer ours.
	for p, run := range runs {
		if target[p] != me {
			g.revoke(runs, p, run)
		}
	}
	// Claim what is ours and free (its previous owner released it or it
	// expired), unless it is pacing its restarts.
	now := time.Now()
	for p := 0; p < cfg.partitions; p++ {
		if target[p] != me || runs[p] != nil {
			continue
		}
		if owner := current[p]; owner != "" && (owner != me || !g.tried[p]) {
			// The previous owner is still handing it off; or an earlier
			// process under this member id (restarted after a crash)
			// holds it: it is taken once it expires, at a new epoch.
			continue
		}
		if r := paced[p]; r != nil && now.Before(r.notBefore) {
			continue
		}
		g.start(ctx, runs, p, ended)
	}
}

// logLevel is the level of routine partition hand-off lines: info, but
// debug while a failed stream is re-checked (one line per state change, not
// per attempt).
func (g *Group) logLevel() slog.Level {
	if g.rechecking() {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// consumerOptions returns the options of partition p's consumer at epoch:
// the ConsumerOptions, then the group's own, which override them.
func (g *Group) consumerOptions(p int, epoch int64) []ferry.Option {
	cfg := &g.cfg
	opts := append([]ferry.Option{}, cfg.consumer...)
	opts = append(opts, ferry.Stream(cfg.name), ferry.Partition(p, cfg.partitions), ferry.Epoch(epoch),
		ferry.Checkpoints(g.cps), ferry.DeadLetters(g.dlq), ferry.DrainTimeout(cfg.drainTimeout()),
		ferry.WithHooks(partitionStates{g.st}), ferry.LogStops(false))
	if s := g.partitioning(); s != "" {
		opts = append(opts, ferry.WithPartitioning(s))
	}
	return opts
}

func (g *Group) start(ctx context.Context, runs map[int]*running, p int, ended chan<- int) {
	cfg := &g.cfg
	g.tried[p] = true
	held, err := g.leases.Hold(ctx, cfg.name, p, cfg.memberID, cfg.ttl)
	g.unsure[p] = err != nil && !errors.Is(err, lease.ErrHeld)
	if err != nil {
		// A lease document that cannot be read (even one List does not
		// find, its group field damaged) is repaired instead.
		if !errors.Is(err, lease.ErrHeld) && ctx.Err() == nil && !g.repairLease(ctx, p) {
			g.transient(fmt.Sprintf("acquire the lease of partition %d", p), err)
		}
		return
	}
	epoch := held.Epoch()
	opts := g.consumerOptions(p, epoch)
	if cfg.sweeper != nil {
		if sweep := cfg.sweeper(g.partitioning(), p, cfg.partitions); sweep != nil {
			opts = append(opts, ferry.WithSweeper(func(ctx context.Context, since time.Time) error {
				if !held.Valid() {
					return ferry.StopPartition(ErrLeaseLost)
				}
				return sweep(ctx, since)
			}))
		}
	}
	c, err := g.newConsumer(held, p, opts)
	if err != nil {
		// An invalid consumer configuration: a failure like any other, so
		// the stream fails instead of retrying it every rebalance.
		_ = held.Release(context.WithoutCancel(ctx))
		run := &running{held: held, cancel: func() {}, done: make(chan error, 1), started: time.Now()}
		runs[p] = run
		run.done <- err
		ended <- p
		return
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &running{held: held, cancel: cancel, done: make(chan error, 1), started: time.Now()}
	runs[p] = run
	go func() {
		var err error
		if cfg.mode == Transactional {
			// Before anything is read: a transaction of an earlier owner
			// either commits first or cannot commit (fence.go).
			err = g.raiseFence(cctx, p, epoch)
		}
		if err == nil {
			err = c.Run(cctx)
		}
		run.done <- err
		ended <- p
	}()
	go func() {
		select {
		case <-held.Done():
			cancel() // lost: stop at once
		case <-cctx.Done():
		}
	}()
	g.mu.Lock()
	g.owned[p] = epoch
	g.mu.Unlock()
	g.log.Log(ctx, g.logLevel(), "partition assigned", "partition", p, "epoch", epoch)
	if cfg.onAssigned != nil {
		cfg.onAssigned(p, epoch)
	}
}

// revoke hands a partition off: stop reading, drain, final checkpoint,
// release the lease. A partition whose lease turns out lost meanwhile is
// reported as lost, not revoked.
func (g *Group) revoke(runs map[int]*running, p int, run *running) {
	valid := run.held.Valid()
	run.cancel()
	err := <-run.done
	delete(runs, p)
	g.mu.Lock()
	delete(g.owned, p)
	g.mu.Unlock()
	if lost := run.held.Err(); lost != nil || !valid {
		if lost == nil {
			lost = fmt.Errorf("%w: lease could no longer be proven valid", lease.ErrLost)
		}
		_ = run.held.Release(context.Background())
		g.warnPool(lost)
		g.log.Warn("partition lost", "partition", p, "err", lost)
		if g.cfg.onLost != nil {
			g.cfg.onLost(p, lost)
		}
		return
	}
	_ = run.held.Release(context.Background())
	g.log.Log(context.Background(), g.logLevel(), "partition revoked", "partition", p, "err", err)
	if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(p)
	}
}

// finish handles a partition whose consumer stopped by itself. A failure
// (ferry.AsFailure) fails the stream: it is returned. Anything else (a
// lost lease, a fenced checkpoint, a transient error) releases the lease
// and paces the partition's restart with backoff.
func (g *Group) finish(runs map[int]*running, paced map[int]*restarts, p int) *streamFailure {
	run := runs[p]
	if run == nil {
		return nil
	}
	var err error
	select {
	case err = <-run.done:
	default:
		return nil
	}
	delete(runs, p)
	g.mu.Lock()
	delete(g.owned, p)
	g.mu.Unlock()
	lost := run.held.Err()
	_ = run.held.Release(context.Background())
	if f, ok := ferry.AsFailure(err); ok {
		return &streamFailure{partition: p, failure: f}
	}
	if lost == nil {
		lost = err
	}
	g.warnPool(lost)
	r := paced[p]
	if r == nil {
		r = &restarts{b: backoff.New(time.Second, 30*time.Second)}
		paced[p] = r
	}
	if time.Since(run.started) >= stableRun {
		r.b.Reset()
	}
	wait := r.b.Next()
	r.notBefore = time.Now().Add(wait)
	g.log.Warn("partition stopped; restarting it after a backoff", "partition", p, "backoff", wait.Round(time.Millisecond), "err", ferry.RedactTokens(lost.Error()))
	if g.cfg.onLost != nil {
		g.cfg.onLost(p, lost)
	}
	return nil
}

func (g *Group) stopAll(runs map[int]*running) {
	for _, run := range runs {
		run.cancel()
	}
	for p, run := range runs {
		err := <-run.done
		run.done <- err
		_ = run.held.Release(context.Background())
		delete(runs, p)
	}
	g.mu.Lock()
	clear(g.owned)
	g.mu.Unlock()
	g.releaseStrays()
}

// releaseStrays frees the leases the server says this member holds though
// it runs none of them: an acquire this process sent whose answer it never
// had (cut short by the end of Run, or a network error: unsure) may still
// have taken the lease. Left alone, such a lease would keep the partition
// from everyone until it expires. Only those partitions are looked at: a
// lease an earlier process under the same member id holds is left to
// expire, as reconcile leaves it. Best effort, bounded by the lease TTL: a
// lease not freed expires at its TTL.
func (g *Group) releaseStrays() {
	pending := false
	for _, u := range g.unsure {
		pending = pending || u
	}
	if !pending {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ttl)
	defer cancel()
	list, err := g.leases.List(ctx, g.cfg.name)
	if err != nil {
		if _, corrupt := lease.AsCorruptRecords(err); !corrupt {
			return
		}
	}
	for _, l := range list {
		if l.Owner != g.cfg.memberID || l.Free() || !g.unsure[l.Partition] {
			continue
		}
		if err := g.leases.Release(ctx, l); err == nil {
			g.log.Info("released a lease this member held without running its partition (an acquire whose answer was lost)",
				"partition", l.Partition, "epoch", l.Epoch)
		}
	}
}
