package sink

import (
	"context"
	"time"

	"github.com/ferry-io/ferry"
)

// MaxRetryWait caps how long Handler waits for a failure's RetryDelay.
const MaxRetryWait = 5 * time.Minute

// Handler adapts a connected sink to a ferry handler: each event is written
// as a batch of one. A permanent failure is returned wrapped with
// ferry.Permanent, so it goes to the dead-letter policy at once; a retryable
// one is returned plainly, so ferry retries it with backoff. When the
// failure carries a RetryDelay, Handler first waits that long (at most
// MaxRetryWait, and no longer than ctx allows), so the next attempt honours
// the receiver's Retry-After.
func Handler(s Sink) ferry.Handler {
	return func(ctx context.Context, ev *ferry.Event) error {
		err := Errors(s.Write(ctx, []*ferry.Event{ev}), 1)[0]
		if err == nil {
			return nil
		}
		if !IsRetryable(err) {
			return ferry.Permanent(err) // idempotent if already marked
		}
		if d, ok := RetryDelay(err); ok {
			if d > MaxRetryWait {
				d = MaxRetryWait
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		return err
	}
}
