// Package poll waits, with a deadline, for state a test can only observe:
// a server's documents, a lease table, a process's /metrics or its log.
//
// It is the last resort, not the first. Where a test can wait on a channel
// (a handler that signals, a hook, a process that exits), it must: a
// channel says when the thing happened, a poll only notices some time
// after. Until exists for what no channel reaches, so that every such wait
// in Ferry's tests has the same shape, a deadline that is never shortened
// and a failure that says what was still missing.
//
// The mongotest module keeps its own copy of Until in its tests: it does
// not depend on Ferry, so it cannot import this package.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Until sleeps between two calls of the condition.
const Interval = 10 * time.Millisecond

// Until calls cond until it returns nil, sleeping Interval between calls.
// When within has passed and cond still fails, Until fails tb with
// "after <within>: <cond's last error>", so the error should say what is
// still missing ("2 of 3 documents", not "false").
//
// cond runs on the caller's goroutine, so it may itself call tb.Fatal for
// a failure that waiting cannot fix. Until must be called from the test's
// goroutine, as tb.Fatalf must.
func Until(tb testing.TB, within time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			tb.Fatalf("after %v: %v", within, err)
			return // a testing.TB whose Fatalf returns
		}
		time.Sleep(Interval)
	}
}
