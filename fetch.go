package ferry

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// fetchRun is the most events the fetcher hands over at once: the reader
// starts on a server batch (up to 16 MB) before the fetcher has taken all
// of it.
const fetchRun = 256

// fetched is what the fetcher hands the reader: a run of events taken from
// one server batch, in stream order, each holding its room in the window
// (a reservation the reader takes or gives back); or an empty read; or the
// end of reading.
type fetched struct {
	raws  []bson.Raw
	bytes int64 // the raws' total length: what they reserved
	// begins: the run's first event is the first of a server batch (or
	// the first read since the stream opened or since an empty read),
	// whose read began at start (zero unless timed).
	begins bool
	start  time.Time
	// arrived is when the server batch the run begins arrived (set with
	// begins): its first event's read delay is measured from it.
	arrived time.Time
	// ends: the server batch is used up after the run; after is then the
	// stream's resume token (the batch's postBatchResumeToken, or its last
	// event's _id).
	ends  bool
	after bson.Raw
	// idle is the stream's resume token after an empty read (no raws).
	idle bson.Raw
	// rep is the server reply the raws alias, holding a reference for
	// each; nil when they are copies.
	rep *reply
	// last: reading stopped with err (nil: ctx ended); nothing follows.
	last bool
	err  error
	// closed, with last: the server closed the stream without an error or
	// an invalidate event (one the pipeline filtered out); the stream's last
	// resume token, before the invalidate.
	closed bson.Raw
}

// fetch reads cs ahead of the reader, on a goroutine of its own, until ctx
// ends or reading fails: it takes each event from the driver's batch (the
// driver's bytes, see aliasReplies and reply, or a copy: with copyEvents,
// or when maxAliasedReplies earlier replies are still held), holds its
// room in win (waiting while the window is full: a slow sink
// stops the stream here) and sends the events to out in runs, so that the
// next getMore is on its way while the reader decodes and dispatches the
// batch before it. It closes out when it returns; the last value it sends
// (unless ctx ended first) has last set. It alone uses cs until then.
//
// The room is taken as credit, for as many events as the server batch
// has left (up to a run) at a time, and settled once per run, so that the
// window's lock is taken about twice per run rather than once per event:
// this goroutine's work per event is what the next getMore waits for. The
// credit left at the end of a server batch is given back before the next
// getMore, so none is held while the stream waits for the server.
//
// timed asks for the start time of each server batch's read (HookRead).
func fetch(ctx context.Context, cs *mongo.ChangeStream, win *window, out chan<- *fetched, timed, copyEvents bool) {
	defer close(out)
	var run *fetched
	var have credit // credit not yet used by an event
	defer func() { win.giveBack(have) }()
	// rep is the reply of the server batch being read when its events
	// alias it (the fetcher's own reference held until the batch is read).
	var rep *reply
	defer func() { rep.release(1) }()
	open := false // a server batch is being read: its first event was sent
	// send hands f over, its events' credit settled into reservations
	// (the rest of the credit given back too if back).
	send := func(f *fetched, back bool) bool {
		left := credit{}
		if back {
			left, have = have, credit{}
		}
		win.settle(len(f.raws), f.bytes, left)
		f.rep.hold(len(f.raws)) // before the fetcher's own reference can go
		select {
		case out <- f:
			return true
		case <-ctx.Done():
			win.unreserve(len(f.raws), f.bytes)
			f.rep.release(len(f.raws))
			return false
		}
	}
	for {
		var start time.Time
		if timed && !open {
			start = time.Now()
		}
		if !cs.TryNext(ctx) {
			if run != nil && !send(run, true) {
				return
			}
			run, open = nil, false
			err := cs.Err()
			if err != nil || ctx.Err() != nil {
				send(&fetched{last: true, err: err}, true)
				return
			}
			if cs.ID() == 0 {
				// The server closed the stream without an error and
				// without an invalidate event: the user's pipeline filtered
				// the invalidate out (MongoDB's
				// change_stream_check_resumability.js). The reader finds it
				// after the stream's last resume token.
				send(&fetched{last: true, closed: clone(cs.ResumeToken())}, true)
				return
			}
			if !send(&fetched{idle: cs.ResumeToken()}, true) {
				return
			}
			continue
		}
		if !open && !copyEvents && win.aliased.Load() < maxAliasedReplies {
			// A new server batch whose events alias its reply.
			rep = newReply(&win.aliased)
		}
		raw := cs.Current
		if rep == nil {
			raw = clone(raw)
		}
		size := int64(len(raw))
		if !have.has(size) {
			// Credit for the rest of the server batch (up to a run), its
			// events guessed to be this one's size, give or take a
			// quarter; or, if that does not fit, for this one.
			k := min(cs.RemainingBatchLength()+1, fetchRun)
			have = win.tryCredit(have, k, int64(k)*(size+size/4), size)
			if have.n == 0 {
				// The window is full: the events read so far go to the
				// reader before waiting for room (they may be what frees it).
				if run != nil {
					if !send(run, false) {
						return
					}
					run = nil
				}
				var err error
				if have, err = win.waitCredit(ctx, size); err != nil {
					return
				}
			}
		}
		have.n--
		have.b -= size
		if run == nil {
			run = &fetched{raws: make([]bson.Raw, 0, min(cs.RemainingBatchLength()+1, fetchRun)), begins: !open, start: start, rep: rep}
			if !open {
				run.arrived = time.Now()
			}
			open = true
		}
		run.raws = append(run.raws, raw)
		run.bytes += size
		if cs.RemainingBatchLength() == 0 {
			run.ends, run.after = true, clone(cs.ResumeToken())
			open = false
		}
		if run.ends || len(run.raws) == fetchRun {
			if !send(run, run.ends) {
				return
			}
			run = nil
		}
		if !open && rep != nil {
			rep.release(1) // the fetcher's: the batch's events hold the reply now
			rep = nil
		}
	}
}

// clone copies b (nil stays nil). It appends rather than makes and
// copies, so the new memory is not zeroed first.
func clone(b bson.Raw) bson.Raw {
	if b == nil {
		return nil
	}
	return append(bson.Raw{}, b...)
}
