package ferry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/mongoerr"
)

// process applies one event: the handler with retries and backoff, then the
// poison policy. It finishes the event (done) unless the partition stalls
// or stops, or the drain deadline cancels it; then it abandons it.
func (r *runner) process(it *item) {
	finished := false
	defer func() {
		if !finished {
			r.abandon(it)
		}
	}()
	cfg := &r.c.cfg
	ev := it.ev
	ctx := r.handlerCtx
	if ctx.Err() != nil {
		return // drain deadline passed: leave it for the next owner
	}
	if ev.DocumentKey == nil && cfg.partitions > 1 && cfg.partition != 0 {
		// A control event seen by every partition: partition 0 handles it.
		finished = true
		r.done(it)
		return
	}
	first := time.Now()
	wait := cfg.backoffMin
	var lastErr error
	var lastFail *uint64 // the sink's success count at this event's previous failure
	counted := 0         // failed attempts that count towards maxAttempts (see health)
	// cl is the current handler call; an attempt that made the event
	// poison reports its end after the dead-letter write (or the stall).
	var cl call
	var info EventInfo
	defer func() {
		info.Result = ResultAbandoned
		cl.finish(info)
	}()
	for attempt := 1; ; attempt++ {
		ev.Attempt = attempt
		view := r.health.before()
		start := time.Now()
		cl = r.startCall(ctx, ev, attempt)
		err := r.invoke(cl.ctx, ev)
		if len(r.c.hooks) > 0 {
			info = EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
				EventID: ev.ID(), Attempt: attempt, Duration: time.Since(start), Err: err,
				ClusterTime: time.Unix(int64(ev.ClusterTime.T), 0)}
		}
		if err == nil {
			if r.health.succeeded() {
				r.sinkUp(ev, cl.log)
			}
			info.Result = ResultApplied
			if len(r.c.hooks) > 0 {
				info.NoPreImage, info.NoPostImage = r.imagesMissing(ev)
				r.c.hooks.event(info)
				cl.finish(info)
			}
			if r.c.debug {
				cl.log.Debug("event applied", "event", shortID(ev.ID()), "operation", ev.OperationType, "namespace", ev.Namespace.String(),
					"attempt", attempt, "duration", time.Since(start), "result", ResultApplied)
			}
			finished = true
			r.done(it)
			r.kickCommit()
			return
		}
		if ctx.Err() != nil {
			return // cancelled while draining: not finished, will be replayed
		}
		if errors.Is(err, ErrStopPartition) {
			r.fail(&stopError{kind: ErrStopPartition, err: err, msg: fmt.Sprintf(
				"ferry: stream %q partition %d stopped at event %s: %v", cfg.name, cfg.partition, shortID(ev.ID()), err)})
			return // not finished: the checkpoint stays before it
		}
		lastErr = err
		if errors.Is(err, ErrPermanent) {
			break // the sink rejected this event: poison at once
		}
		counts, wentDown, n := r.health.failed(view, lastFail)
		lastFail = &n
		if wentDown {
			r.sinkDown(ev, cl.log, err)
		}
		// A transient database error (a write conflict, for instance with
		// a transaction a dead owner left open until the server reaps it)
		// says nothing about the event: it never makes the event poison.
		if counts && !mongoerr.IsTransientTransactionError(err) {
			counted++
		}
		if counted >= cfg.maxAttempts {
			break
		}
		if cfg.maxElapsed > 0 && time.Since(first) >= cfg.maxElapsed {
			lastErr = fmt.Errorf("failing for %v, longer than the retry bound of %v (counted attempts %d of %d): %w",
				time.Since(first).Round(time.Millisecond), cfg.maxElapsed, counted, cfg.maxAttempts, err)
			break
		}
		info.Result = ResultRetried
		if len(r.c.hooks) > 0 {
			r.c.hooks.event(info)
			cl.finish(info)
		}
		if counts || !r.health.isDown() {
			cl.log.Warn("handler failed; retrying", "event", shortID(ev.ID()), "op", ev.OperationType, "ns", ev.Namespace.String(),
				"attempt", attempt, "counted", counted, "err", err)
		} else if r.c.debug {
			cl.log.Debug("handler failed while the sink is down; waiting", "event", shortID(ev.ID()), "attempt", attempt, "err", err)
		}
		if !r.waitRetry(ctx, wait) {
			return
		}
		wait = min(wait*2, cfg.backoffMax)
	}
	// Poison event.
	if cfg.onPoison == PoisonStall {
		r.c.hooks.event(EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
			EventID: ev.ID(), Attempt: ev.Attempt, Result: ResultStalled, Err: lastErr})
		info.Result, info.Err = ResultStalled, lastErr
		cl.finish(info)
		detail := fmt.Sprintf("stream %q partition %d stalled on event %s (%s on %s) after %d attempts: %v",
			cfg.name, cfg.partition, shortID(ev.ID()), ev.OperationType, ev.Namespace, ev.Attempt, lastErr)
		r.fail(&stopError{kind: ErrStalled, err: lastErr, detail: detail, msg: "ferry: " + detail})
		return
	}
	entry := deadLetterEntry(cfg.name, ev, lastErr, ev.Attempt, first, time.Now())
	entry.TraceID = TraceID(TraceParent(cl.ctx))
	wait = cfg.backoffMin
	for {
		err := cfg.dlq.Put(ctx, entry)
		if err == nil {
			break
		}
		cl.log.Error("dead-letter write failed; retrying", "event", shortID(ev.ID()), "err", err)
		if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
			return
		}
		wait = min(wait*2, cfg.backoffMax)
	}
	noPre, noPost := r.imagesMissing(ev)
	r.c.hooks.event(EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
		EventID: ev.ID(), Attempt: ev.Attempt, Result: ResultDeadLettered, Err: lastErr, NoPreImage: noPre, NoPostImage: noPost})
	info.Result, info.Err = ResultDeadLettered, lastErr
	cl.finish(info)
	cl.log.Error("event dead-lettered", "event", shortID(ev.ID()), "op", ev.OperationType, "ns", ev.Namespace.String(),
		"attempts", ev.Attempt, "err", lastErr)
	finished = true
	r.done(it)
	r.kickCommit()
}

// invoke calls the handler once with the per-event timeout, turning a panic
// into an error.
func (r *runner) invoke(ctx context.Context, ev *Event) (err error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.handlerTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ferry: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	err = r.c.handler(ctx, ev)
	if err == nil && ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("ferry: handler exceeded its timeout of %v", r.c.cfg.handlerTimeout)
	}
	return err
}

func (r *runner) kickCommit() {
	if r.track.pendingFinished() >= r.c.cfg.commitBatch {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// waitRetry waits out a retry's backoff: d with jitter, cut short when the
// sink comes back up after an outage. It reports false when ctx ended.
func (r *runner) waitRetry(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(backoff.Jitter(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.health.waitRecovered():
		return true
	case <-ctx.Done():
		return false
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
	lane := h % uint64(len(r.lanes))
	it.ev.lane = int(lane)
	r.lanes[lane] <- it
}

// sinkDown records that every delivery is failing: the partition waits
// for its sink, and dead-letters nothing meanwhile.
func (r *runner) sinkDown(ev *Event, log *slog.Logger, err error) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State = StateWaitingForSink })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateWaitingForSink, Err: err})
	log.Warn("sink down: every delivery is failing; waiting with backoff, in order, dead-lettering nothing",
		"event", shortID(ev.ID()), "err", err)
}

// sinkUp records that the sink accepts events again.
func (r *runner) sinkUp(ev *Event, log *slog.Logger) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State = StateRunning })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateRunning})
	log.Info("sink up again: delivering", "event", shortID(ev.ID()))
}

// imagesMissing says whether a change arrived without the pre- or
// post-image the stream asks for when available ("whenAvailable"): the
// server then sends null. A backfill event, and an event whose images
// were dropped because it was too large (ImagesDropped), count as neither.
func (r *runner) imagesMissing(ev *Event) (pre, post bool) {
	if ev.Backfill || ev.ImagesDropped {
		return false, false
	}
	cfg := &r.c.cfg
	switch ev.OperationType {
	case "update":
		return cfg.fullDocBefore == "whenAvailable" && ev.FullDocumentBeforeChange == nil,
			cfg.fullDocument == "whenAvailable" && ev.FullDocument == nil
	case "replace", "delete":
		return cfg.fullDocBefore == "whenAvailable" && ev.FullDocumentBeforeChange == nil, false
	}
	return false, false
}
