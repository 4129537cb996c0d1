package ferry

import (
	"context"
	"errors"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-io/ferry/mongoerr"
)

// destinationFailure reports whether a handler's failure is the
// destination's (the database, broker or service it writes to is
// unavailable, overloaded or slow), not the event's. Only such failures
// are judged by health: an outage of the destination holds the events in
// order and dead-letters nothing, however long it lasts. They are:
//
//   - errors marked Transient (package sink marks every retryable failure
//     of its sinks so; a Go handler marks what it knows to be its
//     destination's, such as an HTTP 503 it turned into an error);
//   - network errors (net.Error: refused or reset connections, timeouts),
//     the call's own deadline (context.DeadlineExceeded, a slow
//     destination) and a cancellation;
//   - MongoDB errors of the cluster's state rather than of the write
//     (network, timeouts, step-downs, no primary: mongoerr's resumable
//     class) and transaction errors the server labels transient
//     (WriteConflict).
//
// Any other error, and a panic, is the handler's own (a bug, or a value of
// the event it cannot use): a Go handler is not a sink, and such a failure
// says nothing about the destination. Each attempt that fails so counts
// towards MaxAttempts, so a deterministic failure is dead-lettered (or
// stalls, PoisonStall) after MaxAttempts attempts even in a quiet
// partition where nothing else succeeds around it: with the default Retry
// (5 attempts, backoff from 100 ms), in about 1.5 s.
func destinationFailure(err error) bool {
	if errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return mongoerr.IsTransientTransactionError(err) || mongoerr.Classify(err) == mongoerr.Resumable
}

// downStreak is how many delivery attempts in a row, with no success in
// between, make the sink count as down (waiting-for-sink).
const downStreak = 3

// health tells a sink outage from a poison event, for one partition.
//
// Every delivery attempt (handler call) of every lane reports its outcome. An event's
// failed attempt is evidence that the event is poison only when the sink
// accepted other events around it:
//
//   - a first attempt counts when the attempt before it, of any event,
//     succeeded (the sink was accepting events);
//   - a later attempt counts when some delivery succeeded since the
//     event's previous failed attempt.
//
// While the sink fails for every event (refused connections, timeouts,
// 5xx, a broker down) no attempt counts, however long that lasts: the
// events wait, in order, with backoff, and nothing is dead-lettered. Only
// counted attempts go towards MaxAttempts.
type health struct {
	mu        sync.Mutex
	successes uint64 // deliveries that succeeded
	streak    int    // failed attempts since the last success
	down      bool
	// recovered is closed (and replaced) when the sink comes back up, so
	// lanes waiting out a backoff try again at once.
	recovered chan struct{}
	// view publishes successes and streak == 0 (successes<<1 | healthy),
	// stored under mu with every change, for before to read without mu.
	view atomic.Uint64
	// The outage's delivery error as last reported (its errKind) and
	// when: an outage whose error changes is reported again
	// (errorChanged).
	downKind string
	downAt   time.Time
}

// renoteEvery is how often, at most, an outage whose delivery error
// changed is reported again. A variable for tests.
var renoteEvery = 10 * time.Second

// eventIDRun matches an event id (hex sha256) in an error's text.
var eventIDRun = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// errKind is err's text without event ids: the errors of one outage
// (each naming its event) compare equal, a new cause does not.
func errKind(err error) string { return eventIDRun.ReplaceAllLiteralString(err.Error(), "…") }

// wentDownWith records err, reported at now, as the error the outage
// began with (the caller's attempt took the sink down).
func (h *health) wentDownWith(err error, now time.Time) {
	k := errKind(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.downKind, h.downAt = k, now
}

// errorChanged reports whether a failed delivery's err, during an outage,
// is to be reported again, and if so records it as reported at now: the
// sink is still down, the outage's first error is recorded (another
// lane's attempt may have taken it down and not recorded it yet), and err
// is of another kind (errKind) than the error last reported, at least
// renoteEvery after that report (an error that changes with every
// attempt, such as one naming a local port, is so reported at that pace
// at most).
func (h *health) errorChanged(err error, now time.Time) bool {
	k := errKind(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down || h.downKind == "" || k == h.downKind || now.Sub(h.downAt) < renoteEvery {
		return false
	}
	h.downKind, h.downAt = k, now
	return true
}

func newHealth() *health {
	h := &health{recovered: make(chan struct{})}
	h.publish()
	return h
}

// publish stores the view of successes and streak. Callers hold h.mu (or
// own h).
func (h *health) publish() {
	v := h.successes << 1
	if h.streak == 0 {
		v |= 1
	}
	h.view.Store(v)
}

// attempt is one delivery attempt's view of the health, taken before it.
type attempt struct {
	successes uint64
	healthy   bool // the last outcome before this attempt was a success (or there was none)
}

// before returns the view for an attempt about to start (one atomic
// load: a consistent snapshot, as of the last change).
func (h *health) before() attempt {
	v := h.view.Load()
	return attempt{successes: v >> 1, healthy: v&1 == 1}
}

// called records the outcome of one handler call, given the view taken
// before it: applied events were delivered; failed says the call failed
// transiently as a delivery (some event, or the whole batch); each entry
// of lastFails is an event whose own attempt failed transiently, with the
// success count at its previous failed attempt (nil for its first). It
// reports,
// per entry of lastFails, whether the attempt counts towards MaxAttempts;
// whether the sink just went down or came back up; and the success count
// to pass as lastFail next time.
//
// A call of one event is one delivery attempt, judged as described above.
// In a call of a batch, events applied after a failed one (in batch
// order: the caller passes only those as applied) show that the sink
// accepts events: the failures count, the sink is up. Events applied
// before it were delivered before it failed (a sink posting the batch in
// order, whose receiver went down midway): they are no evidence. A call in which
// every attempted event failed is one failed delivery attempt of the
// sink (its streak of failures grows by one, not by the batch's size),
// and each event's failure counts as a single event's would.
func (h *health) called(a attempt, applied int, failed bool, lastFails []*uint64) (counts []bool, wentDown, up bool, now uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.publish()
	counts = make([]bool, len(lastFails))
	if applied > 0 {
		h.successes += uint64(applied)
		h.streak = 0
		for i := range counts {
			counts[i] = true
		}
		if h.down {
			h.down = false
			h.downKind = ""
			close(h.recovered)
			h.recovered = make(chan struct{})
			up = true
		}
		return counts, false, up, h.successes
	}
	if !failed {
		return counts, false, false, h.successes
	}
	for i, lastFail := range lastFails {
		if lastFail == nil {
			counts[i] = a.healthy || h.successes > a.successes
		} else {
			counts[i] = h.successes > *lastFail
		}
	}
	h.streak++
	if !h.down && h.streak >= downStreak {
		h.down = true
		wentDown = true
	}
	return counts, wentDown, false, h.successes
}

// waitRecovered returns a channel closed when the sink next comes back up.
func (h *health) waitRecovered() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recovered
}

func (h *health) isDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}
