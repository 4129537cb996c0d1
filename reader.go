package ferry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// startPosition decides where the stream opens from the checkpoint and
// the policies.
func (r *runner) startPosition(ctx context.Context) (position, bool, error) {
	cfg := &r.c.cfg
	// The committer's goroutine may be writing a checkpoint (a snapshot's
	// chunk, a flush) while the stream opens again: read it under saveMu.
	r.saveMu.Lock()
	cp, exists := r.cp, r.exists
	r.saveMu.Unlock()
	if exists {
		switch cp.State {
		case checkpoint.StateNeedsBackfill:
			// A start_at backfill that was interrupted before the stream
			// ever had a position is simply repeated; lost history needs
			// the policy's consent.
			initialScan := cp.Token == nil && cfg.start.kind == "backfill"
			if cfg.onHistoryLost != HistoryLostBackfill && !initialScan {
				return position{}, false, r.historyLostError(nil)
			}
			reason := SnapshotForHistoryLost
			if initialScan {
				reason = SnapshotForStart
			}
			if err := r.beginSnapshot(ctx, reason); err != nil {
				return position{}, false, err
			}
			return position{}, true, nil
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
		if err := r.beginSnapshot(ctx, SnapshotForStart); err != nil {
			return position{}, false, err
		}
	}
	return position{}, true, nil
}

// beginSnapshot records a new snapshot for reason, to run beside the
// stream opened from now: the checkpoint written when the stream opens
// carries it (a crash before that begins again).
func (r *runner) beginSnapshot(ctx context.Context, reason string) error {
	prev := r.snapshotRec()
	rec, err := r.newSnapshot(ctx, reason)
	if err != nil {
		return err
	}
	if reason == SnapshotForHistoryLost && prev.running() && prev.Reason == SnapshotForHistoryLost && prev.Chunks == 0 {
		rec.Retries = prev.Retries + 1
	}
	r.saveMu.Lock()
	err = r.setSnapshotLocked(rec)
	r.saveMu.Unlock()
	if err == nil {
		r.c.log.Info("snapshot scheduled", "snapshot", rec.ID, "reason", reason)
	}
	return err
}

func (r *runner) historyLostError(err error) error {
	cfg := &r.c.cfg
	detail := fmt.Sprintf("stream %q partition %d: the checkpoint's resume token is no longer in the oplog (ChangeStreamHistoryLost); "+
		"events were missed and will not be skipped silently. The checkpoint is marked needs-backfill", cfg.name, cfg.partition)
	return &stopError{kind: ErrHistoryLost, err: err, detail: detail, msg: "ferry: " + detail + ". " +
		"Recover with OnHistoryLost(HistoryLostBackfill) (rescan the source, then resume), or reset the checkpoint to start over"}
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
	// The snapshot runs beside the stream and ends with the read: the
	// lanes it splices into close after it.
	sctx, stopSnapshot := context.WithCancel(ctx)
	snapDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		r.snapshotLoop(sctx)
	}()
	defer func() {
		stopSnapshot()
		<-snapDone
	}()
	wait := cfg.backoffMin
	for {
		cs, err := r.open(ctx, pos)
		if err == nil {
			wait = cfg.backoffMin
			if fresh {
				// Starting "now": record the start at once, so a crash
				// before the first event cannot move the start later.
				// A failed write is retried with backoff before reading
				// on (the store may be briefly unreachable).
				r.track.setIdle(cs.ResumeToken())
				for retry := cfg.backoffMin; ; retry = min(retry*2, cfg.backoffMax) {
					err := r.flush(ctx)
					if err == nil || ctx.Err() != nil {
						break
					}
					if errors.Is(err, ErrFenced) {
						cs.Close(context.WithoutCancel(ctx))
						return err
					}
					if !backoff.Sleep(ctx, backoff.Jitter(retry)) {
						break
					}
				}
				fresh = false
			}
			var next *position
			next, err = r.consume(ctx, cs)
			if p, ok := r.resumePosition(cs); ok {
				pos = p
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
			r.c.log.Warn("change stream interrupted; resuming from the last token", "err", RedactTokens(err.Error()))
			if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
				return nil
			}
			wait = min(wait*2, cfg.backoffMax)
		case mongoerr.HistoryLost:
			r.c.hooks.resume(ResumeInfo{Stream: cfg.name, Partition: cfg.partition, Class: string(class), Err: err})
			r.dropSplice()
			if err := r.win.waitEmpty(ctx); err != nil {
				return nil
			}
			if cfg.onHistoryLost != HistoryLostBackfill {
				r.mark(context.WithoutCancel(ctx), checkpoint.StateNeedsBackfill, "resume token no longer in the oplog")
				return r.historyLostError(err)
			}
			if prev := r.snapshotRec(); prev.running() && prev.Reason == SnapshotForHistoryLost && prev.Chunks == 0 && prev.Retries >= 2 {
				detail := fmt.Sprintf("stream %q partition %d: the stream lost its place in the oplog %d times in a row before its "+
					"recovery snapshot finished a chunk: the oplog holds less than the stream needs to keep up", cfg.name, cfg.partition, prev.Retries+1)
				return &stopError{kind: ErrHistoryLost, err: err, detail: detail, msg: "ferry: " + detail +
					". Enlarge the oplog (replSetResizeOplog), make the sink faster, or use more partitions, then restart"}
			}
			r.c.log.Warn("resume token no longer in the oplog; streaming from now and snapshotting the partition", "err", RedactTokens(err.Error()))
			if err := r.beginSnapshot(ctx, SnapshotForHistoryLost); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			r.track.reset()
			r.readAt = nil
			pos, fresh = position{}, true
		default:
			if tooLarge(err) && (cfg.oversize == OversizeDeadLetter || cfg.oversize == OversizeDropImages) {
				p, perr := r.passOversize(ctx, pos, err)
				if perr != nil {
					if ctx.Err() != nil {
						return nil
					}
					err = perr
					if !tooLarge(perr) {
						continue // the main loop deals with it (resume, history lost, ...)
					}
				} else {
					pos = p
					continue
				}
			}
			if r.tokenRefused(pos, err) {
				return r.refusedTokenError(err)
			}
			detail := RedactTokens(fmt.Sprintf("stream %q partition %d: the server refused the change stream: %v", cfg.name, cfg.partition, err))
			return &stopError{kind: ErrFatal, err: err, detail: detail, msg: "ferry: " + detail}
		}
	}
}

// consume reads events from an open stream. A non-nil position means
// "reopen there" (after an invalidate with InvalidateRestart).
//
// The stream is read by a fetcher (fetch) on a goroutine of its own,
// which takes the events from the driver's batches into the window and
// issues the next getMore while this goroutine, the reader, decodes the
// events before them, reassembles split events, hands each to the tracker
// (in stream order) and dispatches it to its lane. consume returns only
// once the fetcher has stopped and every reservation it made that was not
// dispatched is given back to the window.
func (r *runner) consume(ctx context.Context, cs *mongo.ChangeStream) (*position, error) {
	cfg := &r.c.cfg
	r.frags.reset()
	r.readAt = cs.ResumeToken() // the position before the event read next
	// batch follows the server's batches for HookRead (tracing).
	batch := newReadBatch(r.c.hooks, cfg.name, cfg.partition, false)
	defer batch.end()
	fctx, stopFetch := context.WithCancel(ctx)
	runs := make(chan *fetched, fetchQueue)
	go fetch(fctx, cs, r.win, runs, batch.enabled, cfg.copyEvents || !aliasReplies)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopFetch()
		for f := range runs {
			r.win.unreserve(len(f.raws), f.bytes)
			f.rep.release(len(f.raws))
		}
	}
	defer stop()
	var rd runReader
	for {
		// A snapshot's chunk is spliced where the reader stands between
		// runs (never inside a split event): it takes the request at its
		// position, then dispatches the chunk's rows when they come.
		var ask chan *splice
		var rows chan []*item
		if h := r.snap.hold; h != nil {
			rows = h.rows
		} else if !r.frags.active() {
			ask = r.snap.ask
		}
		var f *fetched
		select {
		case s := <-ask:
			r.takeSplice(s)
			continue
		case items := <-rows:
			r.spliceRows(r.snap.hold, items)
			continue
		case got, ok := <-runs:
			if !ok {
				if ctx.Err() != nil {
					return nil, nil
				}
				return nil, fmt.Errorf("ferry: change stream reading stopped")
			}
			f = got
		}
		if f.last {
			batch.end()
			if f.err != nil {
				return nil, f.err
			}
			if f.closed != nil {
				// An invalidate the pipeline filtered out ended the stream.
				stop()
				tok, err := r.c.findInvalidate(ctx, f.closed)
				if err != nil {
					return nil, err
				}
				return r.invalidated(ctx, closedByServer(tok))
			}
			return nil, nil // ctx ended
		}
		if f.idle != nil || len(f.raws) == 0 {
			batch.end()
			if !r.frags.active() {
				// Between fragments the stream's position is inside an event.
				r.track.setIdle(f.idle)
			}
			if f.idle != nil {
				r.readAt = f.idle
			}
			continue
		}
		if f.begins {
			batch.end()
			batch.begin(f.start)
		}
		inv, err := rd.read(ctx, r, f, &batch)
		if err != nil || inv != nil {
			n, b := rd.left(f)
			r.win.unreserve(n, b)
			f.rep.release(n)
			if inv != nil {
				stop() // the window must empty: nothing read after the invalidate stays in it
				return r.invalidated(ctx, inv)
			}
			return nil, err
		}
		if f.ends {
			batch.end() // every event of the server's batch was handed on
		}
	}
}

// fetchQueue is how many runs the fetcher may have handed over and the
// reader not yet taken (their events hold their room in the window).
const fetchQueue = 64

// runReader is the reader's state across the runs of one stream: the run
// being read and the stream-order prefix of it not yet dispatched.
type runReader struct {
	names   names
	next    int // the run's next event to read
	pending []*item
	bytes   int64 // of pending
	// heads and tails of the runs being linked for each lane (flush).
	heads, tails []*item
}

// readItem is an item and its event in one allocation.
type readItem struct {
	it item
	ev Event
}

// read decodes and dispatches the events of run f, in order. It returns
// an invalidate event when it meets one (the events before it dispatched,
// the rest of f left: see left).
func (rd *runReader) read(ctx context.Context, r *runner, f *fetched, batch *readBatch) (*Event, error) {
	cfg := &r.c.cfg
	rd.next = 0
	for rd.next < len(f.raws) {
		i := rd.next
		raw := f.raws[i]
		rd.next++
		ri := &readItem{}
		ev := &ri.ev
		frag, of, split, err := ev.decode(raw, cfg.partition, cfg.epoch, &rd.names)
		if err != nil {
			rd.flush(r, batch)
			rd.next-- // left: its reservation is given back
			return nil, err
		}
		if i == 0 && f.begins {
			r.noteReadDelay(f.arrived, ev)
		}
		prev := r.readAt
		r.readAt = ev.Token // the stream's position after it: its resume token,
		if i == len(f.raws)-1 && f.ends && f.after != nil {
			r.readAt = f.after // or after a server batch's last event the batch's
		}
		if split {
			// A fragment is held outside the window until its event is
			// whole, then acquired whole; the events before it go first.
			rd.flush(r, batch)
			r.win.unreserve(1, int64(len(raw)))
			// The fragments are joined into a new document; until then
			// they alias the reply unaccounted (one event's at most).
			f.rep.release(1)
			whole, err := r.frags.add(raw, prev, frag, of)
			if err != nil {
				return nil, err
			}
			if whole == nil {
				continue // more fragments follow
			}
			ev = new(Event)
			if _, _, _, err := ev.decode(whole, cfg.partition, cfg.epoch, &rd.names); err != nil {
				return nil, err
			}
			// One event id (the first fragment's token), the position
			// after the last fragment.
			ev.id = EventID(ev.Token)
			ev.Token = r.readAt
			if ev.OperationType == "invalidate" {
				r.dropSplice()
				return ev, nil
			}
			if r.holdsBefore(ev.ClusterTime) {
				if err := r.awaitSplice(ctx); err != nil {
					return nil, err
				}
			}
			size := int64(len(whole))
			if err := r.win.acquire(ctx, size); err != nil {
				return nil, err
			}
			batch.add(ev, size)
			r.dispatch(&item{ev: ev, size: size, seq: r.track.add(clone(ev.Token), ev.ClusterTime)})
			continue
		}
		if ev.OperationType == "invalidate" {
			rd.flush(r, batch)
			rd.next-- // left: its reservation is given back
			r.dropSplice()
			return ev, nil
		}
		if r.holdsBefore(ev.ClusterTime) {
			// A snapshot chunk read as of an earlier time goes first.
			rd.flush(r, batch)
			if err := r.awaitSplice(ctx); err != nil {
				rd.next-- // left: its reservation is given back
				return nil, err
			}
		}
		ri.it = item{ev: ev, size: int64(len(raw)), rep: f.rep}
		rd.pending = append(rd.pending, &ri.it)
		rd.bytes += ri.it.size
	}
	rd.flush(r, batch)
	return nil, nil
}

// noteReadDelay records the read delay of the first event of a server
// batch that arrived at arrived: how long it waited between its write on
// the source (its wallTime; its cluster time's second before 6.0) and its
// arrival. Through a mongos an event waits there until every shard has
// reported progress past it, which an idle shard does only with its
// periodic no-op (periodicNoopIntervalSecs, 10 s by default): that wait
// is what this shows on a sharded cluster.
func (r *runner) noteReadDelay(arrived time.Time, ev *Event) {
	written := ev.WallTime
	if written.IsZero() {
		written = time.Unix(int64(ev.ClusterTime.T), 0)
	}
	r.readDelay.Store(int64(max(arrived.Sub(written), 0)))
}

// left returns the events and bytes of f not read (still reserved).
func (rd *runReader) left(f *fetched) (int, int64) {
	var b int64
	for _, raw := range f.raws[rd.next:] {
		b += int64(len(raw))
	}
	return len(f.raws) - rd.next, b
}

// flush dispatches the pending events: their reservations become
// dispatched events, the tracker numbers them in stream order, and each
// goes to its lane.
func (rd *runReader) flush(r *runner, batch *readBatch) {
	if len(rd.pending) == 0 {
		return
	}
	r.win.take(len(rd.pending), rd.bytes)
	// The tracker keeps copies of the tokens, in one block for the run, so
	// that a finished event does not keep its server reply in memory
	// while the checkpoint waits for an event before it (see reply).
	n := 0
	for _, it := range rd.pending {
		n += len(it.ev.Token)
	}
	block := make([]byte, 0, n)
	seq := r.track.addN(len(rd.pending), func(i int) (bson.Raw, bson.Timestamp) {
		at := len(block)
		block = append(block, rd.pending[i].ev.Token...)
		return bson.Raw(block[at:len(block):len(block)]), rd.pending[i].ev.ClusterTime
	})
	// Each lane gets its share of the run in one send, its events in
	// stream order, linked through item.next (the order across lanes is
	// free: they are other documents'), so that a lane wakes once for its
	// share rather than once per event.
	if len(rd.heads) != len(r.lanes) {
		rd.heads, rd.tails = make([]*item, len(r.lanes)), make([]*item, len(r.lanes))
	}
	for i, it := range rd.pending {
		it.seq = seq + int64(i)
		batch.add(it.ev, it.size)
		l := r.laneOf(it.ev)
		if rd.tails[l] == nil {
			rd.heads[l] = it
		} else {
			rd.tails[l].next = it
		}
		rd.tails[l] = it
	}
	for l, head := range rd.heads {
		if head != nil {
			r.lanes[l] <- head
		}
	}
	clear(rd.heads)
	clear(rd.tails)
	clear(rd.pending)
	rd.pending, rd.bytes = rd.pending[:0], 0
}

// resumePosition is where the stream reopens after cs ends: after the last
// event the reader took (the fetcher may have read further), or, in the
// middle of a split event, the position before its first fragment (a
// fragment's token would resume after that fragment).
func (r *runner) resumePosition(cs *mongo.ChangeStream) (position, bool) {
	if r.frags.active() {
		before := r.frags.before
		r.frags.reset()
		if before != nil {
			return position{resumeAfter: before}, true
		}
		return position{}, false
	}
	if tok := r.readAt; tok != nil {
		return position{resumeAfter: tok}, true
	}
	return position{}, false
}

// closedByServer is the invalidate event, of token, that a stream closed
// by the server without one stands for (its cluster time the token's).
func closedByServer(token bson.Raw) *Event {
	ev := &Event{OperationType: "invalidate", Token: token}
	if tok, err := resumetoken.Parse(token); err == nil {
		ev.ClusterTime = tok.ClusterTime
	}
	return ev
}

// invalidated handles an invalidate event: side effects stop, everything
// before it finishes, the invalidate token is recorded.
func (r *runner) invalidated(ctx context.Context, ev *Event) (*position, error) {
	cfg := &r.c.cfg
	if err := r.win.waitEmpty(ctx); err != nil {
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

// tooLarge reports the server's BSONObjectTooLarge: an event it cannot
// return, even split.
func tooLarge(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(mongoerr.CodeBSONObjectTooLarge)
}

// passOversize gets past an event the server cannot return even split
// (OnOversize OversizeDeadLetter or OversizeDropImages), from pos, where
// reading failed with cause: it reads on one event per batch up to the
// event, so that no other event loses anything, then reads the event alone
// without its images (drop-images delivers it so, marked ImagesDropped),
// or with only what identifies it (dead-letter, and drop-images when even
// that is too large), and returns the position after it.
func (r *runner) passOversize(ctx context.Context, pos position, cause error) (position, error) {
	cfg := &r.c.cfg
	defer func() { r.mode = openMode{} }()
	// Up to the event, one event per batch.
	r.mode = openMode{batchOne: true}
	for {
		cs, err := r.open(ctx, pos)
		if err == nil {
			_, err = r.consume(ctx, cs)
			if p, ok := r.resumePosition(cs); ok {
				pos = p
			}
			cs.Close(context.WithoutCancel(ctx))
		}
		if err == nil {
			return pos, nil // stopped (ctx): reading resumes there
		}
		if tooLarge(err) {
			cause = err
			break
		}
		if mongoerr.IsResumable(err) {
			if !backoff.Sleep(ctx, backoff.Jitter(cfg.backoffMin)) {
				return pos, ctx.Err()
			}
			continue
		}
		return pos, err
	}
	// The event alone, without what makes it too large.
	for _, drop := range []int{dropImages, dropAll} {
		if drop == dropImages && cfg.oversize != OversizeDropImages {
			continue
		}
		if drop == dropAll && cfg.dlq == nil {
			break // drop-images without a dead-letter store: nothing more to try
		}
		r.mode = openMode{batchOne: true, drop: drop}
		cs, err := r.open(ctx, pos)
		if err != nil {
			if tooLarge(err) {
				continue
			}
			return pos, err
		}
		ok := cs.TryNext(ctx)
		for !ok && cs.Err() == nil && ctx.Err() == nil {
			ok = cs.TryNext(ctx) // an empty batch before the event
		}
		if !ok {
			err := cs.Err()
			cs.Close(context.WithoutCancel(ctx))
			if tooLarge(err) {
				continue
			}
			if err == nil {
				err = ctx.Err()
			}
			return pos, err
		}
		raw := append(bson.Raw(nil), cs.Current...)
		next := cs.ResumeToken()
		cs.Close(context.WithoutCancel(ctx))
		if f, _, split := splitInfo(raw); split && f != 1 {
			return pos, fmt.Errorf("ferry: an oversize event read without its images still came in fragments")
		}
		ev, err := decodeEvent(raw, cfg.partition, cfg.epoch)
		if err != nil {
			return pos, err
		}
		ev.ImagesDropped = true
		if drop == dropImages {
			r.c.log.Warn("event too large for the server even split: delivering it without its fullDocument and fullDocumentBeforeChange",
				"event", shortID(ev.ID()), "op", ev.OperationType, "ns", ev.Namespace.String())
			size := int64(len(raw))
			if err := r.win.acquire(ctx, size); err != nil {
				return pos, err
			}
			r.dispatch(&item{ev: ev, size: size, seq: r.track.add(ev.Token, ev.ClusterTime)})
			return position{resumeAfter: next}, nil
		}
		reason := fmt.Errorf("event too large for the server to return, even split into fragments (over 16 MB in one field): %v", RedactTokens(cause.Error()))
		now := time.Now()
		entry := deadLetterEntry(cfg.name, ev, reason, 0, now, now)
		entry.Event = nil // identified by its key; the source holds the document
		for wait := cfg.backoffMin; ; wait = min(wait*2, cfg.backoffMax) {
			err := cfg.dlq.Put(ctx, entry)
			if err == nil {
				break
			}
			r.c.log.Error("dead-letter write failed; retrying", "event", shortID(ev.ID()), "err", err)
			if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
				return pos, ctx.Err()
			}
		}
		r.c.hooks.event(EventInfo{Stream: cfg.name, Partition: cfg.partition, Operation: ev.OperationType, Namespace: ev.Namespace,
			EventID: ev.ID(), Result: ResultDeadLettered, Err: reason})
		r.c.log.Error("event too large for the server even split: dead-lettered", "event", shortID(ev.ID()), "op", ev.OperationType,
			"ns", ev.Namespace.String())
		r.track.finish(r.track.add(ev.Token, ev.ClusterTime))
		return position{resumeAfter: next}, nil
	}
	return pos, cause
}
