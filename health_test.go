package ferry

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHealthReportsChangedOutageErrors: during an outage, an error of the
// kind already reported (the same text but for the event id it names) is
// not reported again, another kind is — once renoteEvery has passed since
// the last report — and nothing is reported once the sink is up.
func TestHealthReportsChangedOutageErrors(t *testing.T) {
	h := newHealth()
	id := func(c string) string { return strings.Repeat(c, 64) }
	refused := func(c string) error {
		return errors.New("webhook: event " + id(c) + ": POST /hook: connection refused")
	}
	unavailable := func(c string) error {
		return errors.New("webhook: event " + id(c) + ": POST /hook: 503 Service Unavailable")
	}
	t0 := time.Unix(1000, 0)
	for range downStreak {
		h.called(h.before(), 0, true, nil)
	}
	if !h.isDown() {
		t.Fatal("the sink is not down after a streak of failures")
	}
	// Another lane's failure, before the attempt that took the sink down
	// has recorded its error: not reported (that attempt reports).
	if h.errorChanged(unavailable("z"), t0) {
		t.Fatal("an error is reported before the outage's first error is recorded")
	}
	h.wentDownWith(refused("a"), t0)
	for _, c := range []struct {
		err  error
		at   time.Duration
		want bool
	}{
		{refused("b"), renoteEvery * 2, false},     // the same kind, another event
		{unavailable("c"), renoteEvery / 2, false}, // another kind, too soon
		{unavailable("d"), renoteEvery, true},      // another kind, time enough
		{unavailable("e"), renoteEvery * 3, false}, // the kind just reported
		{refused("f"), renoteEvery * 3, true},      // back to the first kind: another change
	} {
		if got := h.errorChanged(c.err, t0.Add(c.at)); got != c.want {
			t.Fatalf("errorChanged(%q at +%v) = %v, want %v", errKind(c.err), c.at, got, c.want)
		}
	}
	h.called(h.before(), 1, false, nil) // the sink is up again
	if h.errorChanged(unavailable("g"), t0.Add(100*renoteEvery)) {
		t.Fatal("an error is reported as the outage's once the sink is up")
	}
	// The next outage starts afresh: until its first error is recorded,
	// nothing else is reported, whatever the last outage's error was.
	for range downStreak {
		h.called(h.before(), 0, true, nil)
	}
	if h.errorChanged(unavailable("h"), t0.Add(200*renoteEvery)) {
		t.Fatal("an error is reported before the new outage's first error is recorded")
	}
}
