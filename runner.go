package ferry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/mongoerr"
)

// pendingMarkAfter is how long an event must stay the oldest pending one
// before a checkpoint is written for its pending mark alone.
const pendingMarkAfter = time.Second

// runner is one execution of Consumer.Run: reader → window → lanes →
// tracker → checkpoint store.
type runner struct {
	c      *Consumer
	cp     checkpoint.Checkpoint // as last stored (cp.Version is the CAS base)
	exists bool

	win    *window
	track  *tracker
	health *health
	lanes  []chan *item
	laneW  sync.WaitGroup

	handlerCtx    context.Context
	cancelHandler context.CancelFunc
	cancelRead    context.CancelFunc

	errMu sync.Mutex
	err   error // first stop condition from a lane or the committer

	saveMu sync.Mutex // serialises checkpoint writes
	// oldest is the oldest pending event's clusterTime at the last flush,
	// first seen at oldestSeen (under saveMu).
	oldest     bson.Timestamp
	oldestSeen time.Time
	kick       chan struct{}
	// lastMarker is the start point of the last backfill.
	lastMarker bson.Raw
}

// item is one event on its way through a lane.
type item struct {
	ev   *Event
	size int64
	seq  int64           // the tracker's sequence number (stream events)
	wg   *sync.WaitGroup // backfill events: done when finished
}

// done finishes an event (applied or dead-lettered): it frees its place in
// the window and lets the checkpoint move past it.
func (r *runner) done(it *item) {
	if it.wg != nil {
		r.win.release(it.size)
		it.wg.Done()
		return
	}
	r.track.finish(it.seq)
	r.win.release(it.size)
}

// abandon lets go of an event that was not finished (the partition
// stopped, stalled or is draining): a streamed event stays unfinished, so
// the checkpoint stays before it and it is replayed; a backfill event is
// released to its scan, which then ends without completing (it checks the
// failure and the contexts) and is repeated by the next run.
func (r *runner) abandon(it *item) {
	if it.wg != nil {
		r.win.release(it.size)
		it.wg.Done()
	}
}

func (r *runner) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
	r.cancelRead()
}

func (r *runner) failure() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

func (r *runner) run(ctx context.Context) error {
	cfg := &r.c.cfg
	r.win = newWindow(cfg.maxEvents, cfg.maxBytes)
	r.track = &tracker{}
	r.health = newHealth()
	r.kick = make(chan struct{}, 1)
	readCtx, cancelRead := context.WithCancel(ctx)
	r.cancelRead = cancelRead
	defer cancelRead()
	r.handlerCtx, r.cancelHandler = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelHandler()

	r.lanes = make([]chan *item, cfg.concurrency)
	for i := range r.lanes {
		ch := make(chan *item, cfg.maxEvents)
		r.lanes[i] = ch
		r.laneW.Add(1)
		go func() {
			defer r.laneW.Done()
			for it := range ch {
				r.process(it)
			}
		}()
	}
	commitDone := make(chan struct{})
	stopCommit := make(chan struct{})
	go func() {
		defer close(commitDone)
		r.commitLoop(stopCommit)
	}()

	readErr := r.read(readCtx)

	// Drain: no more events enter the lanes; in-flight ones finish within
	// the drain timeout, then their handlers are cancelled.
	for _, ch := range r.lanes {
		close(ch)
	}
	lanesDone := make(chan struct{})
	go func() { r.laneW.Wait(); close(lanesDone) }()
	drain := time.NewTimer(cfg.drainTimeout)
	select {
	case <-lanesDone:
	case <-drain.C:
		r.c.log.Warn("drain timeout: cancelling in-flight handlers", "timeout", cfg.drainTimeout)
		r.cancelHandler()
		<-lanesDone
	}
	drain.Stop()
	close(stopCommit)
	<-commitDone

	// Final checkpoint, even though ctx may be cancelled.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	stop := r.failure()
	if stop == nil {
		stop = readErr
	}
	if err := r.flush(fctx); err != nil && stop == nil {
		stop = err
	}
	if stop != nil && errors.Is(stop, ErrStalled) {
		r.mark(fctx, checkpoint.StateStalled, stop.Error())
	}
	return stop
}

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
	tok, ts, idle, _ := r.track.position()
	oldest := r.track.oldest()
	ev, bytes := r.win.depth()
	var oldestAt time.Time
	if !oldest.IsZero() {
		oldestAt = time.Unix(int64(oldest.T), 0)
	}
	r.c.hooks.queue(QueueInfo{Stream: r.c.cfg.name, Partition: r.c.cfg.partition, Events: ev, Bytes: bytes, OldestPending: oldestAt})
	r.c.setStatus(func(s *Status) { s.QueueEvents, s.QueueBytes, s.OldestPending = ev, bytes, oldestAt })
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
		next.Token = tok
	}
	if ts != (bson.Timestamp{}) {
		next.ClusterTime = ts
	}
	next.Pending = oldest
	next.State, next.Note = checkpoint.StateRunning, ""
	return r.save(ctx, next, idle)
}

// save writes a checkpoint with the consumer's identity and epoch.
func (r *runner) save(ctx context.Context, next checkpoint.Checkpoint, idle bool) error {
	cfg := &r.c.cfg
	next.Stream, next.Partition, next.Epoch = cfg.name, cfg.partition, cfg.epoch
	next.Identity, next.Definition = r.c.identity, r.c.def
	next.Version = r.cp.Version
	saved, err := cfg.store.Save(ctx, next)
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

// dispatch sends an event to its lane: events of one document (namespace +
// documentKey) always go to the same lane, so they apply in order.
func (r *runner) dispatch(it *item) {
	// FNV-1a over db, coll and documentKey, inline to stay allocation-free.
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(it.ev.Namespace.DB); i++ {
		h = (h ^ uint64(it.ev.Namespace.DB[i])) * prime
	}
	h *= prime // separator
	for i := 0; i < len(it.ev.Namespace.Coll); i++ {
		h = (h ^ uint64(it.ev.Namespace.Coll[i])) * prime
	}
	h *= prime
	for _, b := range it.ev.DocumentKey {
		h = (h ^ uint64(b)) * prime
	}
	r.lanes[h%uint64(len(r.lanes))] <- it
}

// sinkDown records that every delivery is failing: the partition waits
// for its sink, and dead-letters nothing meanwhile.
func (r *runner) sinkDown(err error) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State = StateWaitingForSink })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateWaitingForSink, Err: err})
	r.c.log.Warn("sink down: every delivery is failing; waiting with backoff, in order, dead-lettering nothing", "err", err)
}

// sinkUp records that the sink accepts events again.
func (r *runner) sinkUp() {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State = StateRunning })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateRunning})
	r.c.log.Info("sink up again: delivering")
}

// startPosition decides where the stream opens from the checkpoint and
// the policies.
func (r *runner) startPosition(ctx context.Context) (position, bool, error) {
	cfg := &r.c.cfg
	cp := r.cp
	if r.exists {
		switch cp.State {
		case checkpoint.StateNeedsBackfill:
			// A start_at backfill that was interrupted before the stream
			// ever had a position is simply repeated; lost history needs
			// the policy's consent.
			initialScan := cp.Token == nil && cfg.start.kind == "backfill"
			if cfg.onHistoryLost != HistoryLostBackfill && !initialScan {
				return position{}, false, r.historyLostError(nil)
			}
			pos, err := r.backfill(ctx)
			return pos, false, err
		case checkpoint.StateInvalidated:
			if cfg.onInvalidate != InvalidateRestart {
				detail := fmt.Sprintf("stream %q partition %d was invalidated (%s); its checkpoint holds the invalidate token",
					cfg.name, cfg.partition, cp.Note)
				return position{}, false, &stopError{kind: ErrInvalidated, detail: detail, msg: "ferry: " + detail +
					". Use OnInvalidate(InvalidateRestart) to continue after it, or reset the checkpoint"}
			}
			return position{startAfter: cp.Token}, false, nil
		}
		if cp.Token != nil {
			return position{resumeAfter: cp.Token}, false, nil
		}
		if !cp.ClusterTime.IsZero() {
			// A start point without a token: a consumer group's common
			// origin (package group seeds every partition with it), so
			// every partition starts there however late it first opens.
			t := cp.ClusterTime
			return position{startAt: &t}, false, nil
		}
	}
	switch cfg.start.kind {
	case "time", "checkpoints":
		t, err := cfg.start.Time(ctx)
		if err != nil {
			if errors.Is(err, ErrStartPosition) {
				detail := fmt.Sprintf("stream %q partition %d: %v", cfg.name, cfg.partition, err)
				return position{}, false, &stopError{kind: ErrStartPosition, err: err, detail: detail, msg: "ferry: " + detail}
			}
			return position{}, false, err
		}
		return position{startAt: &t}, false, nil
	case "backfill":
		pos, err := r.backfill(ctx)
		return pos, false, err
	}
	return position{}, true, nil
}

func (r *runner) historyLostError(err error) error {
	cfg := &r.c.cfg
	detail := fmt.Sprintf("stream %q partition %d: the checkpoint's resume token is no longer in the oplog (ChangeStreamHistoryLost); "+
		"events were missed and will not be skipped silently. The checkpoint is marked needs-backfill", cfg.name, cfg.partition)
	return &stopError{kind: ErrHistoryLost, err: err, detail: detail, msg: "ferry: " + detail + ". " +
		"Recover with OnHistoryLost(HistoryLostBackfill) (rescan the source, then resume), or reset the checkpoint to start over"}
}

// open opens the change stream at pos.
func (r *runner) open(ctx context.Context, pos position) (*mongo.ChangeStream, error) {
	cfg := &r.c.cfg
	opts := options.ChangeStream().SetMaxAwaitTime(cfg.maxAwait)
	switch cfg.fullDocument {
	case "updateLookup":
		opts.SetFullDocument(options.UpdateLookup)
	case "whenAvailable":
		opts.SetFullDocument(options.WhenAvailable)
	case "required":
		opts.SetFullDocument(options.Required)
	}
	switch cfg.fullDocBefore {
	case "whenAvailable":
		opts.SetFullDocumentBeforeChange(options.WhenAvailable)
	case "required":
		opts.SetFullDocumentBeforeChange(options.Required)
	}
	if cfg.showExpanded {
		opts.SetShowExpandedEvents(true)
	}
	switch {
	case pos.resumeAfter != nil:
		opts.SetResumeAfter(pos.resumeAfter)
	case pos.startAfter != nil:
		opts.SetStartAfter(pos.startAfter)
	case pos.startAt != nil:
		opts.SetStartAtOperationTime(pos.startAt)
	}
	pipeline := r.c.pipeline()
	switch {
	case cfg.scope.DB == "":
		return r.c.client.Watch(ctx, pipeline, opts)
	case cfg.scope.Coll == "":
		return r.c.client.Database(cfg.scope.DB).Watch(ctx, pipeline, opts)
	}
	return r.c.client.Database(cfg.scope.DB).Collection(cfg.scope.Coll).Watch(ctx, pipeline, opts)
}

// pipeline is the user pipeline plus, for partition p of n > 1, the
// partition filter (see partitionStage and doc.go).
func (c *Consumer) pipeline() []bson.D {
	out := append([]bson.D(nil), c.cfg.pipeline...)
	if c.cfg.partitions > 1 {
		out = append(out, partitionStage(c.cfg.partition, c.cfg.partitions))
	}
	return out
}

// partitionStage is DESIGN.md's partition filter, widened to let events
// without a documentKey (drop, rename, dropDatabase, invalidate) reach every
// partition: each partition must see the invalidate that ends its cursor.
// Only partition 0 hands such control events to the handler.
func partitionStage(p, n int) bson.D {
	return bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "documentKey", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
			bson.D{{Key: "$abs", Value: bson.D{{Key: "$mod", Value: bson.A{
				bson.D{{Key: "$toHashedIndexKey", Value: "$documentKey._id"}}, int64(n)}}}}},
			int64(p),
		}}}}},
	}}}}}
}

// read opens the stream and feeds events to the lanes until ctx ends or a
// stop condition. It returns nil when ctx was cancelled.
func (r *runner) read(ctx context.Context) error {
	cfg := &r.c.cfg
	if r.exists && r.cp.Epoch < cfg.epoch {
		// A new owner: claim the checkpoint under our epoch before doing
		// anything, so the previous owner's next checkpoint write is
		// fenced off at once.
		r.saveMu.Lock()
		err := r.save(ctx, r.cp, false)
		r.saveMu.Unlock()
		if err != nil {
			return err
		}
	}
	pos, fresh, err := r.startPosition(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	wait := cfg.backoffMin
	for {
		cs, err := r.open(ctx, pos)
		if err == nil {
			wait = cfg.backoffMin
			if fresh {
				// Starting "now": record the start at once, so a crash
				// before the first event cannot move the start later.
				r.track.setIdle(cs.ResumeToken())
				if err := r.flush(ctx); err != nil && ctx.Err() == nil {
					cs.Close(context.WithoutCancel(ctx))
					return err
				}
				fresh = false
			}
			var next *position
			next, err = r.consume(ctx, cs)
			if tok := cs.ResumeToken(); tok != nil {
				pos = position{resumeAfter: tok}
			}
			cs.Close(context.WithoutCancel(ctx))
			if next != nil {
				pos = *next
				continue
			}
			if err == nil {
				return nil
			}
		}
		switch class := mongoerr.Classify(err); class {
		case mongoerr.Canceled:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case mongoerr.Resumable:
			r.c.hooks.resume(ResumeInfo{Stream: cfg.name, Partition: cfg.partition, Class: string(class), Err: err})
			r.c.log.Warn("change stream interrupted; resuming from the last token", "err", err)
			if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
				return nil
			}
			wait = min(wait*2, cfg.backoffMax)
		case mongoerr.HistoryLost:
			r.c.hooks.resume(ResumeInfo{Stream: cfg.name, Partition: cfg.partition, Class: string(class), Err: err})
			if err := r.waitFinished(ctx); err != nil {
				return nil
			}
			if cfg.onHistoryLost != HistoryLostBackfill {
				r.mark(context.WithoutCancel(ctx), checkpoint.StateNeedsBackfill, "resume token no longer in the oplog")
				return r.historyLostError(err)
			}
			if pos.resumeAfter != nil && bytesEqual(pos.resumeAfter, r.lastMarker) {
				detail := fmt.Sprintf("stream %q partition %d: the backfill's start point fell off the oplog before streaming could resume "+
					"from it: the oplog window is shorter than a backfill takes", cfg.name, cfg.partition)
				return &stopError{kind: ErrHistoryLost, err: err, clears: true, detail: detail,
					msg: "ferry: " + detail + ". Enlarge the oplog (replSetResizeOplog) or make the backfill faster, then restart"}
			}
			r.c.log.Warn("resume token no longer in the oplog; backfilling", "err", err)
			p, err := r.backfill(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			pos = p
		default:
			detail := fmt.Sprintf("stream %q partition %d: the server refused the change stream: %v", cfg.name, cfg.partition, err)
			return &stopError{kind: ErrFatal, err: err, detail: detail, msg: "ferry: " + detail}
		}
	}
}

// consume reads events from an open stream. A non-nil position means
// "reopen there" (after an invalidate with InvalidateRestart).
func (r *runner) consume(ctx context.Context, cs *mongo.ChangeStream) (*position, error) {
	cfg := &r.c.cfg
	for {
		if cs.TryNext(ctx) {
			raw := make(bson.Raw, len(cs.Current))
			copy(raw, cs.Current)
			ev, err := decodeEvent(raw, cfg.partition, cfg.epoch)
			if err != nil {
				return nil, err
			}
			if ev.OperationType == "invalidate" {
				return r.invalidated(ctx, ev)
			}
			size := int64(len(raw))
			if err := r.win.acquire(ctx, size); err != nil {
				return nil, err
			}
			r.dispatch(&item{ev: ev, size: size, seq: r.track.add(ev.Token, ev.ClusterTime)})
			continue
		}
		if err := cs.Err(); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		r.track.setIdle(cs.ResumeToken())
	}
}

// waitFinished waits until every dispatched event has finished.
func (r *runner) waitFinished(ctx context.Context) error {
	for {
		r.win.mu.Lock()
		n, ch := r.win.events, r.win.changed
		r.win.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// invalidated handles an invalidate event: side effects stop, everything
// before it finishes, the invalidate token is recorded.
func (r *runner) invalidated(ctx context.Context, ev *Event) (*position, error) {
	cfg := &r.c.cfg
	if err := r.waitFinished(ctx); err != nil {
		return nil, nil
	}
	if err := r.flush(ctx); err != nil {
		return nil, err
	}
	note := fmt.Sprintf("invalidated at clusterTime %d.%d", ev.ClusterTime.T, ev.ClusterTime.I)
	r.mark(context.WithoutCancel(ctx), checkpoint.StateInvalidated, note, ev.Token)
	r.c.log.Warn("stream invalidated", "policy", cfg.onInvalidate, "clusterTime", ev.ClusterTime)
	if cfg.onInvalidate == InvalidateRestart {
		return &position{startAfter: ev.Token}, nil
	}
	detail := fmt.Sprintf("stream %q partition %d was invalidated (its collection or database was dropped or renamed) at %v; "+
		"the invalidate token is recorded", cfg.name, cfg.partition, ev.ClusterTime)
	return nil, &stopError{kind: ErrInvalidated, detail: detail, msg: "ferry: " + detail +
		". Use OnInvalidate(InvalidateRestart) to continue after it"}
}
