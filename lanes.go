package ferry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/mongoerr"
)

// lane runs one lane until its channel is closed and empty: it takes the
// events dispatched to it, in order, as batches (what is ready, up to
// BatchSize events and BatchBytes bytes, waiting up to BatchLinger for
// more) and delivers each batch before it takes the next. With a Handler
// the batches are of one event. What comes from the channel is a run:
// one event, or several linked through item.next (the reader's).
func (r *runner) lane(ch <-chan *item, call *inFlight) {
	cfg := &r.c.cfg
	batch := make([]*item, 0, min(cfg.batchSize, 1024))
	sc := scratch{call: call}
	var linger *time.Timer
	if cfg.batchLinger > 0 && cfg.batchSize > 1 {
		linger = time.NewTimer(time.Hour)
		linger.Stop()
	}
	// run is the rest of the run taken from ch last: events not yet
	// batched (its first may be over the byte bound of the batch before).
	var run *item
	// The events delivered (finished or abandoned) whose server reply's
	// references are not released yet: n of held's, released together
	// when the next event is of another reply and before the lane waits.
	var held *reply
	var heldN int
	defer func() { held.release(heldN) }()
	pop := func() *item {
		it := run
		run, it.next = it.next, nil
		return it
	}
	open := true
	for {
		if run == nil {
			if !open {
				return
			}
			sc.now = time.Time{} // waiting for events takes time
			held.release(heldN)
			held, heldN = nil, 0
			it, ok := <-ch
			if !ok {
				return
			}
			run = it
		}
		first := pop()
		batch = append(batch[:0], first)
		size := first.size
		lingering := false
	fill:
		for len(batch) < cfg.batchSize && size < cfg.batchBytes {
			if run == nil {
				if !open {
					break
				}
				var it *item
				var ok bool
				select {
				case it, ok = <-ch:
				default:
					if linger == nil {
						break fill
					}
					if !lingering {
						linger.Reset(cfg.batchLinger)
						lingering = true
					}
					sc.now = time.Time{}
					select {
					case it, ok = <-ch:
					case <-linger.C:
						lingering = false
						break fill
					}
				}
				if !ok {
					open = false
					break
				}
				run = it
			}
			if size+run.size > cfg.batchBytes {
				break // it starts the next batch
			}
			it := pop()
			batch = append(batch, it)
			size += it.size
		}
		if lingering {
			linger.Stop()
		}
		r.deliver(&sc, batch)
		for _, it := range batch {
			if it.rep != held {
				held.release(heldN)
				held, heldN = it.rep, 0
			}
			heldN++
		}
		clear(batch)
	}
}

// tries is one event's state across its handler calls.
type tries struct {
	it      *item
	first   time.Time     // its first attempt
	lastTry time.Time     // its last attempt
	wait    time.Duration // the backoff after its next failure alone
	counted int           // failed attempts that count towards maxAttempts (see health)
	// failedAt is the sink's success count at its previous failed attempt
	// (valid when failed is set).
	failedAt uint64
	failed   bool
	// victim: its last attempt failed because of another event of its
	// batch, or with an error of the whole batch (see attempt).
	victim  bool
	lastErr error
	// cl is its current handler call as the delivery hooks see it, and
	// info what its end is to report: an attempt that made the event
	// poison reports its end after the dead-letter write (or the stall),
	// an attempt left unfinished reports ResultAbandoned.
	cl   call
	info EventInfo
}

// scratch is a lane's buffers, reused from batch to batch (a lane
// delivers one batch at a time), so that the path of an applied event
// allocates nothing of its own.
type scratch struct {
	// gaveUp is set once the lane left an event unfinished while draining:
	// it leaves every later event too, so none of a document's events is
	// applied after one left for the next owner.
	gaveUp bool
	tries  []tries
	ptrs   []*tries
	one    [1]*tries
	evs    []*Event
	out    []int
	// call is the lane's call in flight, for a drain that runs out.
	call *inFlight
	// now is when the lane's last handler call ended, if the lane has
	// done nothing since that takes time (waited for events, backed off,
	// run hooks or written a dead letter): the next call starts then,
	// without reading the clock again. Zero otherwise.
	now time.Time
}

// abandon leaves t's event unfinished (replayed by the next owner); its
// call, if not reported yet, ends as ResultAbandoned.
func (r *runner) abandonTry(t *tries) {
	t.info.Result = ResultAbandoned
	t.cl.finish(t.info)
	r.abandon(t.it)
}

func (t *tries) lastFail() *uint64 {
	if !t.failed {
		return nil
	}
	return &t.failedAt
}

// deliver applies one batch of a lane: one handler call for all of it;
// then each event that failed is retried alone, in batch order, until it
// is finished (applied, or dead-lettered as poison) before the next one
// is tried, so one document's events stay in order and a poison event is
// judged by its own failures only. An event is finished at most once and
// never handed over again once applied; one that is not finished (the
// partition stalled or stopped, or the drain deadline passed) is
// abandoned: the checkpoint stays before it and it is replayed.
func (r *runner) deliver(sc *scratch, batch []*item) {
	cfg := &r.c.cfg
	ctx := r.handlerCtx
	if cap(sc.tries) < len(batch) {
		sc.tries = make([]tries, 0, len(batch)) // the pointers below must stay valid: no growing later
	}
	sc.tries, sc.ptrs = sc.tries[:0], sc.ptrs[:0]
	defer func() { clear(sc.tries); clear(sc.ptrs) }()
	draining := r.draining()
	for _, it := range batch {
		switch {
		case ctx.Err() != nil || sc.gaveUp || draining:
			// Draining (or past its deadline, or an event before it left):
			// only the calls already in flight finish; what was not started
			// is left for the next owner, in order.
			r.abandon(it)
		case it.ev.DocumentKey == nil && cfg.partitions > 1 && cfg.partition != 0:
			r.done(it) // a control event seen by every partition: partition 0 handles it
		default:
			sc.tries = append(sc.tries, tries{it: it, wait: cfg.backoffMin})
			sc.ptrs = append(sc.ptrs, &sc.tries[len(sc.tries)-1])
		}
	}
	if len(sc.ptrs) == 0 {
		return
	}
	failed, ok := r.attempt(ctx, sc, sc.ptrs)
	if !ok {
		return
	}
	for i, t := range failed {
		if !r.retryAlone(ctx, sc, t) {
			for _, u := range failed[i+1:] {
				r.abandonTry(u)
			}
			return
		}
	}
}

// retryAlone retries one failed event by itself until it is finished
// (true), or not: the partition stalled or stopped, or the drain deadline
// passed (false; it is abandoned). Before each retry it waits out its
// backoff, counted from its last attempt, unless that attempt failed
// because of another event (a victim is tried alone at once).
func (r *runner) retryAlone(ctx context.Context, sc *scratch, t *tries) bool {
	for {
		if r.draining() {
			// Not retried while draining: the next owner delivers it (and
			// every later event of the lane, to keep each document's order).
			sc.gaveUp = true
			r.abandonTry(t)
			return false
		}
		if !t.victim {
			if d := t.wait - time.Since(t.lastTry); d > 0 && !r.waitRetry(ctx, d) {
				sc.gaveUp = true
				r.abandonTry(t)
				return false
			}
			t.wait = min(t.wait*2, r.c.cfg.backoffMax)
		}
		sc.one[0] = t
		retry, ok := r.attempt(ctx, sc, sc.one[:])
		if !ok {
			return false
		}
		if len(retry) == 0 {
			return true
		}
	}
}

// What one handler call made of an event.
const (
	outApplied   = iota
	outCanceled  // failed while the drain deadline cancelled the call
	outStop      // ErrStopPartition
	outVictim    // ErrNotAttempted, or an error of the whole batch, in a call of several events
	outPermanent // ErrPermanent: poison at once
	outOwn       // the handler's own failure (a bug, a panic): counts, says nothing of the destination
	outFailed    // the destination's failure (destinationFailure), judged by health
)

// attempt calls the handler once with the events of ts and settles each:
// an applied event is finished; a poison one is dead-lettered (finished)
// or stalls the partition; the others are returned, in order, to be
// retried. ok is false when the batch must not go on (the partition
// stalled or stopped, the drain deadline passed): every event not
// finished was abandoned.
//
// In a call of several events, an event that failed with ErrNotAttempted,
// or with an error the handler returned for the whole batch (not a
// *BatchError of one entry per event: a panic, a timeout, an aborted
// transaction), is a victim: the failure says nothing about which event is
// at fault, so it neither counts towards MaxAttempts nor makes the event
// poison, even if Permanent; the event is tried alone next, at once.
//
// Every event of the call is a delivery to the HookDelivery hooks (each
// in its own read batch's trace). A call of one event gets the context
// its hooks returned; a call of several gets ctx, and each event's own
// delivery traceparent is DeliveryTraceParent's.
func (r *runner) attempt(ctx context.Context, sc *scratch, ts []*tries) (retry []*tries, ok bool) {
	cfg := &r.c.cfg
	if ctx.Err() != nil {
		for _, t := range ts {
			r.abandonTry(t)
		}
		return nil, false
	}
	now := sc.now
	sc.now = time.Time{}
	if now.IsZero() {
		now = time.Now()
	}
	evs := sc.evs[:0]
	for _, t := range ts {
		if t.first.IsZero() {
			t.first = now
		}
		t.lastTry = now
		ev := t.it.ev
		ev.Attempt++
		t.cl = r.startCall(ctx, ev, ev.Attempt)
		ev.deliveryTP = t.cl.tp
		evs = append(evs, ev)
	}
	sc.evs = evs
	defer clear(evs)
	hctx := ctx
	if len(ts) == 1 {
		hctx = ts[0].cl.ctx
	}
	if !sc.call.begin(evs[0], len(evs), now) {
		for _, t := range ts {
			r.abandonTry(t) // the drain left the lane: Run has returned
		}
		return nil, false
	}
	view := r.health.before()
	end, err := r.invoke(hctx, evs, now)
	if !sc.call.returned() {
		// The drain left the call (it ignored its cancelled context) and
		// Run has returned: the outcome touches nothing of the run; the
		// events stay unfinished, delivered again by the next Run or owner.
		for _, t := range ts {
			r.abandonTry(t)
		}
		return nil, false
	}
	defer sc.call.mu.Unlock()
	took := end.Sub(now)
	var errs []error // nil: every event applied
	var whole bool
	if err != nil {
		errs = EventErrors(err, len(evs))
		var be *BatchError
		whole = !(errors.As(err, &be) && len(be.Errs) == len(evs))
	}
	errAt := func(i int) error {
		if errs == nil {
			return nil
		}
		return errs[i]
	}

	out := sc.out[:0]
	for range ts {
		out = append(out, outApplied)
	}
	sc.out = out
	applied := 0
	var lastFails []*uint64
	var sinkErr error // the first transient failure: the call failed as a delivery
	sinkErrAt, firstApplied := -1, -1
	for i := range ts {
		err := errAt(i)
		switch {
		case err == nil:
			out[i] = outApplied
			if applied == 0 {
				firstApplied = i
			}
			applied++
			continue
		case ctx.Err() != nil:
			out[i] = outCanceled
			continue
		case errors.Is(err, ErrStopPartition):
			out[i] = outStop
			continue
		case len(ts) > 1 && (whole || errors.Is(err, ErrNotAttempted)):
			out[i] = outVictim
		case errors.Is(err, ErrPermanent):
			out[i] = outPermanent
			continue
		case !errors.Is(err, ErrNotAttempted) && !destinationFailure(err):
			out[i] = outOwn // counts, and is no delivery failure of the sink
			continue
		default:
			out[i] = outFailed
			lastFails = append(lastFails, ts[i].lastFail())
		}
		if sinkErr == nil && !errors.Is(err, ErrPermanent) && !errors.Is(err, ErrNotAttempted) && destinationFailure(err) {
			sinkErr, sinkErrAt = err, i
		}
	}
	// The events applied before the call's first transient failure were
	// delivered before it, in batch order (a sink posting a batch one event
	// after the other, whose receiver went down midway): they say nothing
	// about whether the sink accepts events now, so only those after it
	// count as evidence that it does (health).
	evidence, firstEvidence := applied, firstApplied
	if sinkErrAt >= 0 {
		evidence, firstEvidence = 0, -1
		for i := sinkErrAt + 1; i < len(ts); i++ {
			if out[i] == outApplied {
				if firstEvidence < 0 {
					firstEvidence = i
				}
				evidence++
			}
		}
	}
	counts, wentDown, up, successes := r.health.called(view, evidence, sinkErr != nil, lastFails)
	if up && firstEvidence >= 0 {
		r.sinkUp(ts[firstEvidence].it.ev, ts[firstEvidence].cl.log)
	}
	switch {
	case wentDown && sinkErrAt >= 0:
		r.health.wentDownWith(sinkErr, end)
		r.sinkDown(ts[sinkErrAt].it.ev, ts[sinkErrAt].cl.log, sinkErr)
	case applied == 0 && sinkErrAt >= 0 && r.health.errorChanged(sinkErr, end):
		r.sinkStillDown(ts[sinkErrAt].it.ev, ts[sinkErrAt].cl.log, sinkErr)
	}

	stopped := false // the partition stopped or stalled: nothing more is settled
	judged := 0
	for i, t := range ts {
		ev, err := t.it.ev, errAt(i)
		info := &t.info // what the hooks are told (t.cl.finish is a no-op without hooks)
		if r.c.perEvent {
			*info = EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
				EventID: ev.ID(), Attempt: ev.Attempt, Duration: took, Err: err,
				ClusterTime: time.Unix(int64(ev.ClusterTime.T), 0)}
		}
		counted := false
		t.victim = false
		switch out[i] {
		case outApplied:
			info.Result = ResultApplied
			if r.c.perEvent {
				info.NoPreImage, info.NoPostImage = r.imagesMissing(ev)
				r.c.hooks.event(*info)
				t.cl.finish(*info)
			}
			if r.c.debug {
				t.cl.log.Debug("event applied", "event", shortID(ev.ID()), "operation", ev.OperationType, "namespace", ev.Namespace.String(),
					"attempt", ev.Attempt, "duration", took, "result", ResultApplied)
			}
			r.done(t.it)
			continue
		case outFailed:
			counted = counts[judged]
			judged++
			t.failedAt, t.failed = successes, true
		case outOwn:
			counted = true // the handler's own failure: evidence against the event
			t.failedAt, t.failed = successes, true
		case outVictim:
			t.victim = true
		}
		if stopped || out[i] == outCanceled {
			r.abandonTry(t) // not finished: replayed
			continue
		}
		if out[i] == outStop {
			r.fail(&stopError{kind: ErrStopPartition, err: err, msg: fmt.Sprintf(
				"ferry: stream %q partition %d stopped at event %s: %v", cfg.name, cfg.partition, shortID(ev.ID()), err)})
			stopped = true
			r.abandonTry(t) // not finished: the checkpoint stays before it
			continue
		}
		t.lastErr = err
		poison := out[i] == outPermanent // the sink rejected this event: poison at once
		if out[i] == outFailed || out[i] == outOwn {
			// A transient database error (a write conflict, for instance
			// with a transaction a dead owner left open until the server
			// reaps it) says nothing about the event: it never makes the
			// event poison.
			if counted && !mongoerr.IsTransientTransactionError(err) {
				t.counted++
			}
			if t.counted >= cfg.maxAttempts {
				poison = true
			} else if cfg.maxElapsed > 0 && time.Since(t.first) >= cfg.maxElapsed {
				t.lastErr = fmt.Errorf("failing for %v, longer than the retry bound of %v (counted attempts %d of %d): %w",
					time.Since(t.first).Round(time.Millisecond), cfg.maxElapsed, t.counted, cfg.maxAttempts, err)
				poison = true
			}
		}
		if poison {
			if !r.poison(ctx, t) {
				stopped = true
			}
			continue
		}
		info.Result = ResultRetried
		if r.c.perEvent {
			r.c.hooks.event(*info)
			t.cl.finish(*info)
		}
		switch {
		case t.victim:
			if r.c.debug {
				t.cl.log.Debug("event failed with its batch; retrying it alone", "event", shortID(ev.ID()),
					"attempt", ev.Attempt, "err", err)
			}
		case counted || !r.health.isDown():
			t.cl.log.Warn("handler failed; retrying", "event", shortID(ev.ID()), "op", ev.OperationType, "ns", ev.Namespace.String(),
				"attempt", ev.Attempt, "counted", t.counted, "err", err)
		case r.c.debug:
			t.cl.log.Debug("handler failed while the sink is down; waiting", "event", shortID(ev.ID()), "attempt", ev.Attempt, "err", err)
		}
		retry = append(retry, t)
	}
	r.kickCommit()
	if stopped {
		for _, t := range retry {
			r.abandonTry(t)
		}
		return nil, false
	}
	if applied == len(ts) && !r.c.perEvent {
		sc.now = end // nothing since the call that takes time
	}
	return retry, true
}

// poison applies the poison policy to an event: it stalls the partition
// (false: the event is abandoned) or dead-letters the event and finishes
// it (true; false if the drain deadline passes while the dead-letter store
// cannot be written).
func (r *runner) poison(ctx context.Context, t *tries) bool {
	cfg := &r.c.cfg
	ev, lastErr := t.it.ev, t.lastErr
	if cfg.onPoison == PoisonStall {
		r.c.hooks.event(EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
			EventID: ev.ID(), Attempt: ev.Attempt, Result: ResultStalled, Err: lastErr})
		t.info.Result, t.info.Err = ResultStalled, lastErr
		t.cl.finish(t.info)
		detail := fmt.Sprintf("stream %q partition %d stalled on event %s (%s on %s) after %d attempts: %v",
			cfg.name, cfg.partition, shortID(ev.ID()), ev.OperationType, ev.Namespace, ev.Attempt, lastErr)
		r.fail(&stopError{kind: ErrStalled, err: lastErr, detail: detail, msg: "ferry: " + detail})
		r.abandonTry(t)
		return false
	}
	entry := deadLetterEntry(cfg.name, ev, lastErr, ev.Attempt, t.first, time.Now())
	entry.TraceID = TraceID(t.cl.tp)
	wait := cfg.backoffMin
	for {
		err := cfg.dlq.Put(ctx, entry)
		if err == nil {
			break
		}
		t.cl.log.Error("dead-letter write failed; retrying", "event", shortID(ev.ID()), "err", err)
		if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
			r.abandonTry(t)
			return false
		}
		wait = min(wait*2, cfg.backoffMax)
	}
	noPre, noPost := r.imagesMissing(ev)
	r.c.hooks.event(EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
		EventID: ev.ID(), Attempt: ev.Attempt, Result: ResultDeadLettered, Err: lastErr, NoPreImage: noPre, NoPostImage: noPost})
	t.info.Result, t.info.Err = ResultDeadLettered, lastErr
	t.cl.finish(t.info)
	t.cl.log.Error("event dead-lettered", "event", shortID(ev.ID()), "op", ev.OperationType, "ns", ev.Namespace.String(),
		"attempts", ev.Attempt, "err", lastErr)
	r.done(t.it)
	return true
}

// invoke calls the handler once, at start, with the per-call timeout,
// turning a panic into an error (of every event of the batch). It returns
// the time the call ended (one clock read serves the timeout check and the
// caller's duration).
//
// The timeout is the cancellation of the call's context, not a verdict on
// the call: a handler that returns nil after it has applied its events (see
// Handler), and is not called again for them; only the late return is
// logged.
func (r *runner) invoke(parent context.Context, batch []*Event, start time.Time) (end time.Time, err error) {
	ctx := openCallCtx(parent, start.Add(r.c.cfg.handlerTimeout))
	returned := false
	defer func() {
		if returned {
			return
		}
		ctx.stop()
		if p := recover(); p != nil {
			end, err = time.Now(), fmt.Errorf("ferry: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	err = r.c.handler(ctx, batch)
	returned = true
	end = time.Now()
	if ctx.finish(end) == context.DeadlineExceeded && err == nil {
		r.c.log.Warn("handler returned nil after its timeout: applied, not retried", "event", shortID(batch[0].ID()),
			"events", len(batch), "took", end.Sub(start), "timeout", r.c.cfg.handlerTimeout)
	}
	return end, err
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
// sink comes back up after an outage. It reports false when ctx ended or
// the drain began.
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
	case <-r.drainStart:
		return false
	}
}

// dispatch sends an event to its lane: events of one document always go
// to the same lane, so they apply in order.
func (r *runner) dispatch(it *item) { r.lanes[r.laneOf(it.ev)] <- it }

// laneOf is the lane of ev's document; it records it in ev (Event.Lane).
// The lane goes by namespace and documentKey._id (its type and bytes),
// not the whole documentKey: a document's _id never changes, but its
// documentKey can change shape — {_id} while it lacks a shard key field
// and {shardKey..., _id} once an update sets it, {_id} until a shard
// learns its collection is sharded (SERVER-34090) — and its events must
// still share a lane. Documents sharing an _id on two shards share a lane
// too, which only orders them together (as they share a partition, whose
// filter hashes _id).
func (r *runner) laneOf(ev *Event) int {
	// FNV-1a over db, coll and the _id, inline to stay allocation-free.
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(ev.Namespace.DB); i++ {
		h = (h ^ uint64(ev.Namespace.DB[i])) * prime
	}
	h *= prime // separator
	for i := 0; i < len(ev.Namespace.Coll); i++ {
		h = (h ^ uint64(ev.Namespace.Coll[i])) * prime
	}
	h *= prime
	if t, id := keyID(ev.DocumentKey); t != 0 {
		h = (h ^ uint64(t)) * prime
		for _, b := range id {
			h = (h ^ uint64(b)) * prime
		}
	}
	lane := int(h % uint64(len(r.lanes)))
	ev.laneIdx = lane // Event.Lane: the transactional fence's slot
	return lane
}

// sinkDown records that every delivery is failing: the partition waits
// for its sink, and dead-letters nothing meanwhile.
func (r *runner) sinkDown(ev *Event, log *slog.Logger, err error) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State, s.LastError = StateWaitingForSink, err.Error() })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateWaitingForSink, Err: err})
	log.Warn("sink down: every delivery is failing; waiting with backoff, in order, dead-lettering nothing",
		"event", shortID(ev.ID()), "err", err)
}

// sinkStillDown reports an outage again because its delivery error
// changed (connection refused, then 503): the state hook (and so a
// group's status) gets the new error.
func (r *runner) sinkStillDown(ev *Event, log *slog.Logger, err error) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.LastError = err.Error() })
	r.c.hooks.state(StateInfo{Stream: cfg.name, Partition: cfg.partition, State: StateWaitingForSink, Err: err})
	log.Warn("sink still down, with another error; waiting with backoff, in order, dead-lettering nothing",
		"event", shortID(ev.ID()), "err", err)
}

// sinkUp records that the sink accepts events again.
func (r *runner) sinkUp(ev *Event, log *slog.Logger) {
	cfg := &r.c.cfg
	r.c.setStatus(func(s *Status) { s.State, s.LastError = StateRunning, "" })
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

// keyID is the type and value bytes of a documentKey's _id (0, nil when it
// has none, or is no document: a control event's).
func keyID(key bson.Raw) (bson.Type, []byte) {
	if len(key) < 5 {
		return 0, nil
	}
	v, err := key.LookupErr("_id")
	if err != nil {
		return 0, nil
	}
	return v.Type, v.Value
}
