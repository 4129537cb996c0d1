package sink

import (
	"context"
	"errors"
	"time"

	"github.com/ferry-io/ferry"
)

// MaxRetryWait caps how long Handler and BatchHandler wait for a failure's
// RetryDelay.
const MaxRetryWait = 5 * time.Minute

// Handler adapts a connected sink to a ferry handler: each event is written
// as a batch of one. A permanent failure is returned wrapped with
// ferry.Permanent, so it goes to the dead-letter policy at once; a retryable
// one wrapped with ferry.Transient (the sink's failure, not the event's),
// so ferry retries it with backoff and, while the sink fails for every
// event, waits for it without dead-lettering anything. When the
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
			waitRetry(ctx, d)
		}
		return transient(err)
	}
}

// transient marks a retryable failure of a sink as the destination's
// (ferry.Transient), unless it is marked so already: ferry then judges it
// as a possible outage of the sink, which dead-letters nothing however
// long it lasts, instead of as the handler's own failure, which counts
// towards MaxAttempts whatever else happens.
func transient(err error) error {
	if err == nil || errors.Is(err, ferry.ErrTransient) {
		return err
	}
	return ferry.Transient(err)
}

// BatchHandler adapts a connected sink to a ferry batch handler
// (ferry.NewBatchConsumer): the whole batch goes to one Write, so the sink
// puts it in flight at once (a bulk write, one buffered write, every
// publish before the first ack). Failures are reported per event, as
// Handler reports them: a *ferry.BatchError whose permanent failures are
// wrapped with ferry.Permanent and its retryable ones with
// ferry.Transient; an error of the whole Write is returned so marked too.
// When failures carry a RetryDelay, BatchHandler first waits the largest
// of them (at most MaxRetryWait, and no longer than ctx allows).
func BatchHandler(s Sink) ferry.BatchHandler {
	return func(ctx context.Context, batch []*ferry.Event) error {
		err := s.Write(ctx, batch)
		if err == nil {
			return nil
		}
		var be *BatchError
		if !errors.As(err, &be) || len(be.Errs) != len(batch) {
			// The whole Write failed: ferry retries each event alone.
			if !IsRetryable(err) {
				return ferry.Permanent(err)
			}
			if d, ok := RetryDelay(err); ok {
				waitRetry(ctx, d)
			}
			return transient(err)
		}
		out := NewBatchError(len(batch))
		var wait time.Duration
		for i, e := range be.Errs {
			switch {
			case e == nil:
			case !IsRetryable(e):
				out.Set(i, ferry.Permanent(e))
			default:
				out.Set(i, transient(e))
				if d, ok := RetryDelay(e); ok {
					wait = max(wait, d)
				}
			}
		}
		if wait > 0 {
			waitRetry(ctx, wait)
		}
		return out.Err()
	}
}

// waitRetry waits d (at most MaxRetryWait), or until ctx ends or its
// consumer starts draining (ferry.Draining: the event will not be retried
// by this consumer, so there is nothing to wait for).
func waitRetry(ctx context.Context, d time.Duration) {
	d = min(d, MaxRetryWait)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-ferry.Draining(ctx):
	}
}
