package ferry

import (
	"slices"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// tracker follows events from read to finished and says how far the
// checkpoint may go: to the token of the last event of the contiguous
// prefix of finished events (applied or dead-lettered), never past an
// unfinished one. On a quiet stream it may go further, to the reader's
// postBatchResumeToken, once every event read before that token finished.
type tracker struct {
	mu   sync.Mutex
	next int64 // sequence number of the next event read
	base int64 // sequence number of pending[0]
	// pending is the events read, from the oldest unfinished one: the
	// tail of buf, whose finished head is dropped by moving the rest
	// down when buf is full (not by growing it: the events in flight are
	// bounded by the window, so buf stops growing).
	pending []tracked
	buf     []tracked
	// The checkpointable position: token and its sequence number (the
	// last finished event of the prefix, or an idle token).
	token     bson.Raw
	cover     int64 // the token covers every event with sequence number < cover
	clusterTS bson.Timestamp
	idle      bool
	// An idle token reported by the reader, valid once every event with
	// sequence number < idleSeq has finished.
	idleToken bson.Raw
	idleSeq   int64
	// finished counts events finished since the last position call
	// (read without t.mu: every handler call asks).
	finished atomic.Int64
}

type tracked struct {
	token bson.Raw
	ts    bson.Timestamp
	ended bool // applied or dead-lettered
}

// add records a newly read event and returns its sequence number. Only the
// reader calls it, in stream order.
func (t *tracker) add(token bson.Raw, ts bson.Timestamp) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq := t.next
	t.next++
	t.room(1)
	t.pending = append(t.pending, tracked{token: token, ts: ts})
	return seq
}

// room makes room in buf for n more pending events: it moves pending to
// the front of buf if that leaves buf at most half full (so each move is
// paid for by as many adds), and grows buf otherwise. Callers hold t.mu.
func (t *tracker) room(n int) {
	if len(t.pending)+n <= cap(t.pending) {
		return // room after pending, in buf
	}
	if 2*(len(t.pending)+n) <= cap(t.buf) {
		buf := t.buf[:cap(t.buf)]
		end := cap(buf) - cap(t.pending) + len(t.pending) // pending is buf[end-len:end]
		k := copy(buf, buf[end-len(t.pending):end])
		clear(buf[k:end]) // drop the tokens left behind
		t.pending = buf[:k]
		return
	}
	t.buf = slices.Grow(t.pending[:len(t.pending):len(t.pending)], n)
	t.pending = t.buf
}

// addN records n newly read events, in stream order, event i's token and
// clusterTime given by at(i), and returns the first one's sequence number
// (the others follow it). Only the reader calls it.
func (t *tracker) addN(n int, at func(i int) (bson.Raw, bson.Timestamp)) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq := t.next
	t.next += int64(n)
	t.room(n)
	for i := range n {
		tok, ts := at(i)
		t.pending = append(t.pending, tracked{token: tok, ts: ts})
	}
	return seq
}

// finish marks an event finished and advances the prefix.
func (t *tracker) finish(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := seq - t.base
	if i < 0 || i >= int64(len(t.pending)) {
		return
	}
	t.pending[i].ended = true
	t.finished.Add(1)
	n := 0
	for n < len(t.pending) && t.pending[n].ended {
		n++
	}
	if n == 0 {
		return
	}
	last := t.pending[n-1]
	t.token, t.cover, t.clusterTS, t.idle = last.token, t.base+int64(n), last.ts, false
	clear(t.pending[:n])
	t.pending = t.pending[n:]
	t.base += int64(n)
	if len(t.pending) == 0 {
		t.pending = t.buf[:0]
	}
	t.promoteIdle()
}

// setIdle records the reader's postBatchResumeToken after an empty batch:
// every event read so far precedes it. It keeps a copy: the token may
// alias a server reply (a stream's first, at its open), which the
// checkpoint position would keep in memory.
func (t *tracker) setIdle(token bson.Raw) {
	if token == nil {
		return
	}
	token = append(bson.Raw(nil), token...)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.idleToken, t.idleSeq = token, t.next
	t.promoteIdle()
}

// promoteIdle makes the idle token the position when all events before it
// finished. Callers hold t.mu.
func (t *tracker) promoteIdle() {
	if t.idleToken == nil || t.base < t.idleSeq {
		return
	}
	// An event read after the idle token is newer than it: drop the idle
	// token then.
	if t.idleSeq >= t.cover && !bytesEqual(t.idleToken, t.token) {
		t.token, t.cover, t.idle = t.idleToken, t.idleSeq, true
	}
	t.idleToken = nil
}

// position returns the checkpointable token (nil if none yet), the cluster
// time of the last finished event and whether it is an idle token, and
// starts counting finished events (pendingFinished) from zero again.
func (t *tracker) position() (bson.Raw, bson.Timestamp, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished.Store(0)
	return t.token, t.clusterTS, t.idle
}

// oldest returns the clusterTime of the oldest event read and not
// finished (zero when none is pending).
func (t *tracker) oldest() bson.Timestamp {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pending {
		if !p.ended {
			return p.ts
		}
	}
	return bson.Timestamp{}
}

// reset forgets the position (every tracked event must be finished).
func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.base = t.next
	t.pending, t.buf = nil, nil
	t.token, t.cover, t.clusterTS, t.idle = nil, 0, bson.Timestamp{}, false
	t.idleToken, t.idleSeq = nil, 0
	t.finished.Store(0)
}

// pendingFinished returns how many events finished since the last
// position call.
func (t *tracker) pendingFinished() int { return int(t.finished.Load()) }

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
