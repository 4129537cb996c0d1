package ferry

import (
	"context"
	"sync"
)

// window bounds the events between the stream and the handlers by count and
// by bytes: every event read and not yet finished holds its place, from
// the moment the fetcher copies it out of the driver's batch (a
// reservation: read ahead, not yet dispatched) until it is applied,
// dead-lettered or abandoned. When it is full the fetcher stops reading,
// so a slow sink stops the stream. One event larger than the byte limit is
// still admitted when the window is empty, so a big document cannot wedge
// the stream.
//
// The fetcher reserves; the reader turns reservations into dispatched
// events (take) or gives them back (unreserve: an event not dispatched,
// such as a fragment of a split event, held by the reader until the event
// is whole and then acquired whole); the backfill scan and the reader
// acquire directly; a finished event releases.
type window struct {
	mu        sync.Mutex
	events    int   // dispatched
	bytes     int64 // dispatched
	aheadN    int   // reserved by the fetcher, not yet taken
	aheadB    int64
	maxEvents int
	maxBytes  int64
	changed   chan struct{} // closed and replaced on a release someone waits for
	waiting   int
}

func newWindow(maxEvents int, maxBytes int64) *window {
	return &window{maxEvents: maxEvents, maxBytes: maxBytes, changed: make(chan struct{})}
}

// fits reports whether n more bytes (one more event) stay within the
// limits. Callers hold w.mu.
func (w *window) fits(n int64) bool {
	return w.events+w.aheadN < w.maxEvents && w.bytes+w.aheadB+n <= w.maxBytes
}

// acquire admits one event of n bytes for dispatch, waiting for room. It
// is admitted when it fits, or when no dispatched event is held: the
// reader calls it for an event it holds outside the window (a reassembled
// split event) while the fetcher's reservations after it wait for the
// reader, so those must not keep it out.
func (w *window) acquire(ctx context.Context, n int64) error {
	return w.wait(ctx, func() bool {
		if w.events == 0 || w.fits(n) {
			w.events++
			w.bytes += n
			return true
		}
		return false
	})
}

// reserve holds room for one event of n bytes read ahead, waiting for it.
// It is admitted when it fits, or when the window holds nothing at all.
func (w *window) reserve(ctx context.Context, n int64) error {
	return w.wait(ctx, func() bool { return w.admitAhead(n) })
}

// tryReserve is reserve without waiting: it reports whether the room was
// held.
func (w *window) tryReserve(n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admitAhead(n)
}

// admitAhead holds room for one event of n bytes read ahead if it fits,
// or if the window holds nothing at all. Callers hold w.mu.
func (w *window) admitAhead(n int64) bool {
	if w.events == 0 && w.aheadN == 0 || w.fits(n) {
		w.aheadN++
		w.aheadB += n
		return true
	}
	return false
}

// wait runs admit under w.mu until it reports true, waiting for a
// release between tries, or until ctx ends.
func (w *window) wait(ctx context.Context, admit func() bool) error {
	for {
		w.mu.Lock()
		if admit() {
			w.mu.Unlock()
			return nil
		}
		ch := w.changed
		w.waiting++
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			w.mu.Lock()
			w.waiting--
			w.mu.Unlock()
			return ctx.Err()
		}
		w.mu.Lock()
		w.waiting--
		w.mu.Unlock()
	}
}

// take turns reservations of n events and b bytes into dispatched events
// (it never waits: their room is held already).
func (w *window) take(n int, b int64) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.aheadN -= n
	w.aheadB -= b
	w.events += n
	w.bytes += b
	w.mu.Unlock()
}

// unreserve gives back reservations of n events and b bytes.
func (w *window) unreserve(n int, b int64) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.aheadN -= n
	w.aheadB -= b
	w.changedLocked()
	w.mu.Unlock()
}

// release frees the room of a finished (or abandoned) dispatched event of
// n bytes.
func (w *window) release(n int64) {
	w.mu.Lock()
	w.events--
	w.bytes -= n
	w.changedLocked()
	w.mu.Unlock()
}

// changedLocked wakes whoever waits for room, or for the window to empty.
// Callers hold w.mu.
func (w *window) changedLocked() {
	if w.waiting > 0 || w.events+w.aheadN == 0 {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// depth returns the events and bytes the window holds: dispatched and
// read ahead.
func (w *window) depth() (int, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events + w.aheadN, w.bytes + w.aheadB
}

// waitEmpty waits until every event in the window has been released
// (applied, dead-lettered or abandoned) and no reservation is held, or
// ctx ends.
func (w *window) waitEmpty(ctx context.Context) error {
	for {
		w.mu.Lock()
		n, ch := w.events+w.aheadN, w.changed
		w.mu.Unlock()
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
