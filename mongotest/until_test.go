package mongotest_test

import (
	"testing"
	"time"
)

// until calls cond every 10 ms until it returns nil; when within has
// passed and cond still fails, it fails tb with "after <within>: <cond's
// last error>". It is for state a test can only observe (the server's
// waiting commands, a change stream's resume token); where a test can wait
// on a channel, it must.
//
// It is a copy of Ferry's internal/poll.Until: this module does not
// depend on Ferry, so it cannot import it.
func until(tb testing.TB, within time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			tb.Fatalf("after %v: %v", within, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
