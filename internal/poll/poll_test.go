package poll_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/internal/poll"
)

// fakeTB records Fatalf instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	fatals []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// TestUntilFailsWithLastError: a condition that never holds fails the test
// once, after the deadline, naming the deadline and the condition's last
// error (not its first).
func TestUntilFailsWithLastError(t *testing.T) {
	tb := &fakeTB{TB: t}
	calls := 0
	began := time.Now()
	poll.Until(tb, 50*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("attempt %d: not yet", calls)
	})
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Errorf("Until gave up after %v, before its 50ms deadline", took)
	}
	if len(tb.fatals) != 1 {
		t.Fatalf("Fatalf called %d times, want once: %q", len(tb.fatals), tb.fatals)
	}
	want := fmt.Sprintf("after 50ms: attempt %d: not yet", calls)
	if tb.fatals[0] != want {
		t.Errorf("Fatalf(%q), want %q", tb.fatals[0], want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times in 50ms, want it polled", calls)
	}
}

// TestUntilReturnsOnceTrue: Until returns as soon as the condition holds,
// without failing, and does not call it again.
func TestUntilReturnsOnceTrue(t *testing.T) {
	tb := &fakeTB{TB: t}
	calls := 0
	poll.Until(tb, 20*time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if len(tb.fatals) != 0 {
		t.Fatalf("Fatalf called: %q", tb.fatals)
	}
	if calls != 3 {
		t.Errorf("cond called %d times, want 3 (until it held, then not again)", calls)
	}
}

// TestUntilChecksBeforeWaiting: a condition that already holds returns at
// once, even with no time to wait.
func TestUntilChecksBeforeWaiting(t *testing.T) {
	tb := &fakeTB{TB: t}
	poll.Until(tb, 0, func() error { return nil })
	if len(tb.fatals) != 0 {
		t.Fatalf("Fatalf called: %q", tb.fatals)
	}
	poll.Until(tb, 0, func() error { return errors.New("2 of 3 documents") })
	if len(tb.fatals) != 1 || !strings.HasSuffix(tb.fatals[0], ": 2 of 3 documents") {
		t.Fatalf("Fatalf calls %q, want one ending in the condition's error", tb.fatals)
	}
}
