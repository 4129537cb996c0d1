package ferry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// pendingMarkAfter is how long an event must stay the oldest pending one
// before a checkpoint is written for its pending mark alone.
const pendingMarkAfter = time.Second

// commitLoop writes the checkpoint every commit interval, or sooner when a
// batch of events finished.
func (r *runner) commitLoop(stop <-chan struct{}) {
	t := time.NewTicker(r.c.cfg.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		ctx, cancel := context.WithTimeout(r.handlerCtx, 10*time.Second)
		err := r.flush(ctx)
		cancel()
		if errors.Is(err, checkpoint.ErrFenced) {
			r.fail(err)
			return
		}
	}
}

// flush writes the checkpoint up to the tracker's position, if it moved.
func (r *runner) flush(ctx context.Context) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	tok, ts, idle := r.track.position()
	oldest := r.track.oldest()
	ev, bytes := r.win.depth()
	var oldestAt time.Time
	if !oldest.IsZero() {
		oldestAt = time.Unix(int64(oldest.T), 0)
	}
	delay := time.Duration(r.readDelay.Load())
	r.c.hooks.queue(QueueInfo{Stream: r.c.cfg.name, Partition: r.c.cfg.partition, Events: ev, Bytes: bytes, OldestPending: oldestAt, ReadDelay: delay})
	r.c.setStatus(func(s *Status) {
		s.QueueEvents, s.QueueBytes, s.OldestPending, s.ReadDelay = ev, bytes, oldestAt, delay
	})
	moved := tok != nil && !bytesEqual(tok, r.cp.Token)
	// The pending mark is written even when the position did not move
	// (the sink is down, an event waits), so that status shows the lag,
	// but only once the same event has been the oldest pending one for
	// pendingMarkAfter: a write per commit interval would be a write per
	// second per stuck partition for nothing, and every write takes
	// oplog space.
	now := time.Now()
	if oldest != r.oldest {
		r.oldest, r.oldestSeen = oldest, now
	}
	if !moved && (oldest == r.cp.Pending || !r.exists || !oldest.IsZero() && now.Sub(r.oldestSeen) < pendingMarkAfter) {
		return nil
	}
	next := r.cp
	if moved {
		next.Token = tok // a copy the tracker keeps, no alias of a server reply
	}
	if ts != (bson.Timestamp{}) {
		next.ClusterTime = ts
	}
	next.Pending = oldest
	next.ReadDelay = delay
	next.State, next.Note = checkpoint.StateRunning, ""
	return r.save(ctx, next, idle)
}

// save writes a checkpoint with the consumer's identity and epoch.
func (r *runner) save(ctx context.Context, next checkpoint.Checkpoint, idle bool) error {
	cfg := &r.c.cfg
	next.Stream, next.Partition, next.Epoch = cfg.name, cfg.partition, cfg.epoch
	def := r.c.def.Load()
	next.Identity, next.Definition = def.identity, def.raw
	next.Version = r.cp.Version
	saved, err := cfg.store.Save(ctx, next)
	var fe *checkpoint.FenceError
	if errors.As(err, &fe) && fe.StoredEpoch == cfg.epoch && fe.StoredVersion > next.Version {
		// A record of our own epoch that is newer than we think: a write of
		// ours went through but its reply was lost (a cancelled context, a
		// dropped connection). Every write of this epoch is ours, so adopt
		// what is stored and write again.
		if cur, lerr := cfg.store.Load(ctx, cfg.name, cfg.partition); lerr == nil && cur.Epoch == cfg.epoch {
			r.cp, r.exists = cur, true
			next.Version = cur.Version
			saved, err = cfg.store.Save(ctx, next)
		}
	}
	info := CheckpointInfo{Stream: cfg.name, Partition: cfg.partition, Idle: idle, Err: err}
	if err != nil {
		r.c.hooks.checkpoint(info)
		if errors.Is(err, checkpoint.ErrFenced) {
			return &stopError{kind: ErrFenced, err: err, msg: fmt.Sprintf(
				"ferry: stream %q partition %d: checkpoint fenced (another owner took over): %v", cfg.name, cfg.partition, err)}
		}
		r.c.log.Warn("checkpoint write failed; will retry", "err", err)
		return fmt.Errorf("ferry: write checkpoint: %w", err)
	}
	r.cp, r.exists = saved, true
	info.Version = saved.Version
	info.ClusterTime = time.Unix(int64(saved.ClusterTime.T), 0)
	r.c.hooks.checkpoint(info)
	r.c.setStatus(func(s *Status) {
		s.CheckpointAt, s.CheckpointTime, s.CheckpointState = saved.UpdatedAt, saved.ClusterTime, saved.State
	})
	return nil
}

// mark records a non-running state (needs-backfill, invalidated, stalled)
// on the checkpoint, keeping its token unless tok is given.
func (r *runner) mark(ctx context.Context, state checkpoint.State, note string, tok ...bson.Raw) {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	next := r.cp
	if len(tok) > 0 {
		next.Token = tok[0]
		// The position now comes from outside the tracker: start it
		// afresh so it cannot write back an older one. Callers make sure
		// no event is in flight.
		r.track.reset()
	}
	next.State, next.Note = state, note
	if err := r.save(ctx, next, false); err != nil {
		r.c.log.Error("could not record checkpoint state", "state", state, "err", err)
	}
}
