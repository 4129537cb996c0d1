package ferry

import (
	"context"
	"sync"
)

// window bounds the events between the reader and the handlers by count and
// by bytes. The reader acquires before dispatching; a finished event
// releases. One event larger than the byte limit is still admitted when the
// window is empty, so a big document cannot wedge the stream.
type window struct {
	mu        sync.Mutex
	events    int
	bytes     int64
	maxEvents int
	maxBytes  int64
	changed   chan struct{} // closed and replaced on a release someone waits for
	waiting   int
}

func newWindow(maxEvents int, maxBytes int64) *window {
	return &window{maxEvents: maxEvents, maxBytes: maxBytes, changed: make(chan struct{})}
}

func (w *window) acquire(ctx context.Context, n int64) error {
	for {
		w.mu.Lock()
		if w.events == 0 || w.events < w.maxEvents && w.bytes+n <= w.maxBytes {
			w.events++
			w.bytes += n
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

func (w *window) release(n int64) {
	w.mu.Lock()
	w.events--
	w.bytes -= n
	if w.waiting > 0 || w.events == 0 {
		close(w.changed)
		w.changed = make(chan struct{})
	}
	w.mu.Unlock()
}

func (w *window) depth() (int, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events, w.bytes
}

// waitEmpty waits until every event in the window has been released
// (applied, dead-lettered or abandoned), or ctx ends.
func (w *window) waitEmpty(ctx context.Context) error {
	for {
		w.mu.Lock()
		n, ch := w.events, w.changed
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
