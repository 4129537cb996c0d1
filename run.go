package ferry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
)

// Run consumes the stream until ctx is cancelled or a stop condition
// (ErrHistoryLost, ErrInvalidated, ErrFenced, ErrStalled,
// ErrIdentityChanged, a fatal server error). On cancellation it stops
// reading, lets in-flight events finish within the drain timeout, writes
// the final checkpoint, closes the cursor and returns nil: whenever the
// cancellation comes, before Run, while it starts (reading the server's
// version, the checkpoint) or while it runs. A failed event is not
// retried once draining: it is left, with the later events of its lane,
// for the next owner. Run returns within DrainTimeout plus DrainMargin of
// the cancellation, even when a handler ignores its context. No goroutine
// outlives Run, except the lane of a handler call that ignored its
// cancelled context past the margin, until that call returns (see
// DrainMargin).
//
// One Consumer runs once at a time: a Run called while another has not
// returned fails at once with ErrAlreadyRunning and changes nothing (two
// Runs would deliver every event twice and write the same checkpoint). A
// Run after the previous one returned resumes from the checkpoint.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)
	c.setStatus(func(s *Status) { s.Running, s.LastError, s.State = true, "", StateRunning })
	c.hooks.state(StateInfo{Stream: c.cfg.name, Partition: c.cfg.partition, State: StateRunning})
	err := c.run(ctx)
	if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Cancelled before or while starting (reading the server's
		// version, the checkpoint, the start position): a cancellation
		// like any other, whenever it comes.
		err = nil
	}
	c.setStatus(func(s *Status) {
		s.Running, s.State, s.OldestPending, s.LastError = false, StateStopped, time.Time{}, ""
		if err != nil {
			s.LastError = err.Error()
		}
	})
	c.hooks.state(StateInfo{Stream: c.cfg.name, Partition: c.cfg.partition, State: StateStopped, Err: err})
	switch _, failed := AsFailure(err); {
	case err == nil, c.cfg.quietStops:
	case failed:
		c.log.Error("consumer stopped", "err", RedactTokens(err.Error()))
	default:
		// A hand-off (fenced, lease lost) or a transient error: whoever
		// runs the consumer restarts it with backoff.
		c.log.Warn("consumer stopped", "err", RedactTokens(err.Error()))
	}
	return err
}

func (c *Consumer) run(ctx context.Context) error {
	if err := c.checkSplit(ctx); err != nil {
		return err
	}
	cp, err := c.cfg.store.Load(ctx, c.cfg.name, c.cfg.partition)
	exists := err == nil
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return c.corruptRecordError(err)
		}
		return fmt.Errorf("ferry: load checkpoint: %w", err)
	}
	if err := c.adoptPartitioning(ctx); err != nil {
		return err
	}
	if def := c.def.Load(); exists && cp.Identity != "" && cp.Identity != def.identity {
		detail := fmt.Sprintf("stream %q partition %d: the checkpoint was written by a different stream definition (%s)",
			c.cfg.name, c.cfg.partition, describeChange(cp.Definition, def.raw))
		return &stopError{kind: ErrIdentityChanged, detail: detail, msg: "ferry: " + detail + ". " +
			"Its token is never reused under another definition. Choose one: give the new definition a new stream name and " +
			"start it where this one stopped (StartAt(StartAtCheckpointsOf(store, oldName)), the ledger absorbing the overlap); " +
			"run a backfill under the new definition (StartAt(StartWithBackfill()) after deleting the checkpoints); " +
			"or delete the checkpoints to start over"}
	}
	if exists && cp.Epoch > c.cfg.epoch {
		return &stopError{kind: ErrFenced, msg: fmt.Sprintf(
			"ferry: stream %q partition %d: the checkpoint was written under lease epoch %d, newer than ours (%d): another owner has taken over",
			c.cfg.name, c.cfg.partition, cp.Epoch, c.cfg.epoch)}
	}
	r := &runner{c: c, cp: cp, exists: exists, loadedToken: cp.Token}
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) error {
	cfg := &r.c.cfg
	r.win = newWindow(cfg.maxEvents, cfg.maxBytes)
	r.track = &tracker{}
	r.health = newHealth()
	r.kick = make(chan struct{}, 1)
	r.snap.ask, r.snap.wake = make(chan *splice), make(chan struct{}, 1)
	readCtx, cancelRead := context.WithCancel(ctx)
	r.cancelRead = cancelRead
	defer cancelRead()
	r.drainStart = make(chan struct{})
	r.handlerCtx, r.cancelHandler = context.WithCancel(context.WithValue(context.WithoutCancel(ctx), drainingKey{}, r.drainStart))
	defer r.cancelHandler()
	r.plainCalls()
	r.startLanes()
	commitDone := make(chan struct{})
	stopCommit := make(chan struct{})
	go func() {
		defer close(commitDone)
		r.commitLoop(stopCommit)
	}()

	readErr := r.read(readCtx)

	// Drain: no more events enter the lanes; in-flight ones finish within
	// the drain timeout, then their handlers are cancelled. An event that
	// fails from now on is not retried: the next owner delivers it. Calls
	// that ignore the cancellation are left running after callGrace (see
	// DrainMargin), so that Run returns on time.
	close(r.drainStart)
	drainBegan := time.Now()
	for _, ch := range r.lanes {
		close(ch)
	}
	drain := time.NewTimer(cfg.drainTimeout)
	if !r.waitLanes(drain.C) {
		r.c.log.Warn("drain timeout: cancelling in-flight handlers", "timeout", cfg.drainTimeout)
		r.cancelHandler()
		grace := time.NewTimer(callGrace)
		if !r.waitLanes(grace.C) {
			r.leaveCalls(drainBegan)
		}
		grace.Stop()
	}
	drain.Stop()
	// The lanes are done (or left): a checkpoint write of the commit loop
	// still under way is cut short; the final one below writes it again.
	r.cancelHandler()
	close(stopCommit)
	<-commitDone

	// Final checkpoint, even though ctx may be cancelled, within the drain
	// margin (and 5 s).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		min(time.Until(drainBegan.Add(cfg.drainTimeout+DrainMargin)), 5*time.Second))
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

// startLanes starts cfg.concurrency lanes, each reading its own channel
// (room for the whole queue, so dispatch never blocks on a lane); each
// closes its inFlight's ended when it returns.
func (r *runner) startLanes() {
	cfg := &r.c.cfg
	r.lanes = make([]chan *item, cfg.concurrency)
	r.calls = make([]inFlight, cfg.concurrency)
	for i := range r.lanes {
		ch := make(chan *item, cfg.maxEvents)
		r.lanes[i] = ch
		f := &r.calls[i]
		f.ended = make(chan struct{})
		go func() {
			defer close(f.ended)
			r.lane(ch, f)
		}()
	}
}

// waitLanes waits until every lane has returned (true) or timeout fires
// (false; nil: no timeout).
func (r *runner) waitLanes(timeout <-chan time.Time) bool {
	for i := range r.calls {
		select {
		case <-r.calls[i].ended:
		case <-timeout:
			return false
		}
	}
	return true
}

// callGrace is how long the handler calls cut off at the drain timeout
// get to return: half of DrainMargin, the rest being the final
// checkpoint's.
const callGrace = DrainMargin / 2

// leaveCalls leaves the handler calls still running callGrace after the
// drain cancelled them (a handler that ignores its context), so that Run
// returns: each is logged by its stream, partition and first event; its
// lane's goroutine returns when the call does, touching nothing of the
// run (its events stay unfinished and are delivered again). It waits for
// the lanes that are in no call, which return at once.
func (r *runner) leaveCalls(drainBegan time.Time) {
	for i := range r.calls {
		f := &r.calls[i]
		ev, n, since := f.leave()
		if ev == nil {
			<-f.ended
			continue
		}
		r.c.log.Error("handler ignored its cancelled context: Run returns without waiting for the call, which goes on running; "+
			"its events are not checkpointed and are delivered again (by the next Run or owner), possibly while it still runs",
			"event", shortID(ev.ID()), "events", n, "running", time.Since(since).Round(time.Millisecond),
			"drain", time.Since(drainBegan).Round(time.Millisecond))
	}
}
