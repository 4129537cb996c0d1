package ferry

import (
	"sync"
)

// downStreak is how many delivery attempts in a row, with no success in
// between, make the sink count as down (waiting-for-sink).
const downStreak = 3

// health tells a sink outage from a poison event, for one partition.
//
// Every delivery attempt of every lane reports its outcome. An event's
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
}

func newHealth() *health { return &health{recovered: make(chan struct{})} }

// attempt is one delivery attempt's view of the health, taken before it.
type attempt struct {
	successes uint64
	healthy   bool // the last outcome before this attempt was a success (or there was none)
}

func (h *health) before() attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return attempt{successes: h.successes, healthy: h.streak == 0}
}

// succeeded records a successful delivery; it reports whether the sink
// came back up.
func (h *health) succeeded() (up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.successes++
	h.streak = 0
	if !h.down {
		return false
	}
	h.down = false
	close(h.recovered)
	h.recovered = make(chan struct{})
	return true
}

// failed records a transiently failed attempt, given the view taken
// before it. lastFail is the success count at the event's previous failed
// attempt (nil for its first). It reports whether the attempt counts
// towards MaxAttempts and whether the sink just went down, and returns the
// success count to pass as lastFail next time.
func (h *health) failed(a attempt, lastFail *uint64) (counts, wentDown bool, now uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if lastFail == nil {
		counts = a.healthy || h.successes > a.successes
	} else {
		counts = h.successes > *lastFail
	}
	h.streak++
	if !h.down && h.streak >= downStreak {
		h.down = true
		wentDown = true
	}
	return counts, wentDown, h.successes
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
