package ferry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// runner is one execution of Consumer.Run: reader → window → lanes →
// tracker → checkpoint store.
type runner struct {
	c      *Consumer
	cp     checkpoint.Checkpoint // as last stored (cp.Version is the CAS base)
	exists bool
	// loadedToken is the resume token of the checkpoint Run loaded (nil:
	// none); unlike cp, which the committer moves on, it never changes.
	loadedToken bson.Raw

	win    *window
	track  *tracker
	health *health
	lanes  []chan *item
	// calls is each lane's handler call in flight (the drain's to leave).
	calls []inFlight

	handlerCtx    context.Context
	cancelHandler context.CancelFunc
	// drainStart is closed when the drain begins (reading stopped): from
	// then on a failed event is not retried but left for the next owner.
	drainStart chan struct{}
	// The traceparent and logger of most handler calls (plainCalls).
	plainTP    string
	plainLog   *slog.Logger
	cancelRead context.CancelFunc

	errMu sync.Mutex
	err   error // first stop condition from a lane or the committer

	saveMu sync.Mutex // serialises checkpoint writes
	// oldest is the oldest pending event's clusterTime at the last flush,
	// first seen at oldestSeen (under saveMu).
	oldest     bson.Timestamp
	oldestSeen time.Time
	kick       chan struct{}
	// snap is the snapshot machinery (snapshot.go).
	snap snapshotState
	// frags collects a split event's fragments (the reader's only).
	frags fragments
	// readAt is the stream's position after the last event the reader
	// took from the fetcher (or its last empty read): where it reopens.
	readAt bson.Raw
	// readDelay is the read delay (noteReadDelay) of the newest server
	// batch, in nanoseconds: the reader stores it, the committer reports it.
	readDelay atomic.Int64
	// mode shapes the stream while getting past an oversize event.
	mode openMode
}

// item is one event on its way through a lane.
type item struct {
	ev   *Event
	size int64
	seq  int64           // the tracker's sequence number (stream events)
	wg   *sync.WaitGroup // snapshot rows: done when finished (outside the window)
	// next is the event after this one in a run sent to its lane at once
	// (the reader's: one channel send per lane per run), nil at the end.
	next *item
	// rep is the server reply the event's bytes alias, nil for a copy;
	// its lane releases it once the event is finished or abandoned
	// (lane: in bulk, not one contended atomic add per event).
	rep *reply
}

// done finishes an event (applied or dead-lettered): it frees its place in
// the window and lets the checkpoint move past it.
func (r *runner) done(it *item) {
	if it.wg != nil {
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

// openMode shapes a stream opened to get past an event the server cannot
// return (OnOversize).
type openMode struct {
	// batchOne asks for one event per batch: a batch that fails then holds
	// the oversize event alone.
	batchOne bool
	// drop removes fields before the split stage: dropImages the
	// fullDocument and fullDocumentBeforeChange, dropAll everything but
	// what identifies the event.
	drop int
}

const (
	dropNone = iota
	dropImages
	dropAll
)

// draining reports whether the drain has begun.
func (r *runner) draining() bool {
	select {
	case <-r.drainStart:
		return true
	default:
		return false
	}
}

// splice is one chunk's handshake between the snapshot and the reader.
type splice struct {
	gen int64
	// at is the reader's position when it took the request (set before
	// atSet is closed); from then until rows arrives, the reader
	// dispatches no event after it.
	at    bson.Timestamp
	atSet chan struct{}
	// rows is the chunk's documents as items (nil: nothing to splice, the
	// hold ends); done is closed once they are dispatched or dropped.
	rows chan []*item
	done chan struct{}
	// dropped: the reader let the hold go without dispatching (its
	// position jumped: history lost).
	dropped bool
}

func newSplice(gen int64) *splice {
	return &splice{gen: gen, atSet: make(chan struct{}), rows: make(chan []*item, 1), done: make(chan struct{})}
}

// snapshotState is the runner's snapshot machinery.
type snapshotState struct {
	ask chan *splice // the snapshot's requests to the reader
	// hold is the reader's splice in progress (the reader's own).
	hold *splice
	// gen changes when the snapshot's record is replaced by the reader
	// (history lost): the snapshot goroutine then starts over from it.
	mu  sync.Mutex
	gen int64
	// wake tells the snapshot goroutine to look at the record again.
	wake chan struct{}
	// rate: documents and time since this member took snapshot upID up.
	upID    string
	upDone  int64
	upSince time.Time
	// announced is the snapshot whose start this member has logged: a
	// retry after a failed chunk does not announce it again.
	announced string
	// span is how hashed ranges are read through a mongos
	// (snapshotspan.go).
	span hashedSpan
}

// hashedSpan is how wide the snapshot's next span of a collection's
// hashed range is, read through a mongos (snapshotspan.go).
type hashedSpan struct {
	// mongos: 0 not known yet, 1 the deployment is a mongos, -1 not.
	mongos int8
	ns     string
	width  uint64 // 0: estimate it
}
