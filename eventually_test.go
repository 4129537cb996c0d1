package ferry_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ferry-io/ferry/internal/poll"
)

// eventually is poll.Until for a condition described by a function: the
// batch and tracing tests (merged from the batch branch, written before
// internal/poll replaced this helper) call it.
func eventually(t *testing.T, within time.Duration, describe func() string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, func() error {
		if cond() {
			return nil
		}
		return errors.New(describe())
	})
}
