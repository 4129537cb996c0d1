package ferry

import (
	"context"
	"sync"
	"sync/atomic"
)

// window bounds the events between the stream and the handlers by count and
// by bytes: every event read and not yet finished holds its place, from
// the moment the fetcher takes it from the driver's batch (a
// reservation: read ahead, not yet dispatched) until it is applied,
// dead-lettered or abandoned. When it is full the fetcher stops reading,
// so a slow sink stops the stream. One event larger than the byte limit is
// still admitted when the window is empty, so a big document cannot wedge
// the stream.
//
// The fetcher takes credit (room for the events it reads next, in bulk: one
// lock for many events) and settles it when it hands a run over: the
// run's events become reservations, the credit left is given back. The
// reader turns reservations into dispatched
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
	credN     int // credit: held by the fetcher for events it reads next
	credB     int64
	maxEvents int
	maxBytes  int64
	changed   chan struct{} // closed and replaced on a release someone waits for
	waiting   int
	// aliased counts the server replies that events in the window (or
	// the batch the fetcher reads) alias: see reply.
	aliased atomic.Int32
}

func newWindow(maxEvents int, maxBytes int64) *window {
	return &window{maxEvents: maxEvents, maxBytes: maxBytes, changed: make(chan struct{})}
}

// fits reports whether n more bytes (one more event) stay within the
// limits. Callers hold w.mu.
func (w *window) fits(n int64) bool { return w.fitsN(1, n) }

// fitsN reports whether k more events of n bytes in all stay within the
// limits. Callers hold w.mu.
func (w *window) fitsN(k int, n int64) bool {
	return w.events+w.aheadN+w.credN+k <= w.maxEvents && w.bytes+w.aheadB+w.credB+n <= w.maxBytes
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

// admitsOne reports whether one event of n bytes read ahead is admitted:
// it fits, or the window holds nothing at all. Callers hold w.mu.
func (w *window) admitsOne(n int64) bool {
	return w.events == 0 && w.aheadN == 0 && w.credN == 0 || w.fits(n)
}

// credit is the room the fetcher holds for the events it reads next.
type credit struct {
	n int
	b int64
}

// has reports whether c covers one more event of n bytes.
func (c credit) has(n int64) bool { return c.n > 0 && c.b >= n }

// tryCredit gives the fetcher's unused credit back and takes new
// credit without waiting: room for k events of b bytes in all if that
// fits (and covers one), or else room for one event of one bytes if that is admitted
// (admitsOne), or else none (the zero credit).
func (w *window) tryCredit(back credit, k int, b, one int64) credit {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.giveBackLocked(back)
	switch {
	case k > 1 && b >= one && w.fitsN(k, b):
		w.credN += k
		w.credB += b
		return credit{k, b}
	case w.admitsOne(one):
		w.credN++
		w.credB += one
		return credit{1, one}
	}
	return credit{}
}

// waitCredit takes credit for one event of n bytes, waiting for it to be
// admitted (admitsOne), or until ctx ends.
func (w *window) waitCredit(ctx context.Context, n int64) (credit, error) {
	err := w.wait(ctx, func() bool {
		if !w.admitsOne(n) {
			return false
		}
		w.credN++
		w.credB += n
		return true
	})
	if err != nil {
		return credit{}, err
	}
	return credit{1, n}, nil
}

// settle turns the credit of a run of n events of b bytes, the fetcher
// hands over, into reservations, and gives the unused credit back.
func (w *window) settle(n int, b int64, back credit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.credN -= n
	w.credB -= b
	w.aheadN += n
	w.aheadB += b
	w.giveBackLocked(back)
}

// giveBack gives back the fetcher's unused credit.
func (w *window) giveBack(back credit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.giveBackLocked(back)
}

func (w *window) giveBackLocked(back credit) {
	if back == (credit{}) {
		return
	}
	w.credN -= back.n
	w.credB -= back.b
	w.changedLocked()
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
// read ahead (but not the few the fetcher has read into its credit and
// not yet handed over: at most a run).
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
