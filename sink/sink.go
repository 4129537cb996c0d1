// Package sink is the contract between Ferry and the places change events are
// delivered to (an HTTP webhook, standard output, a message broker, ...).
//
// A Sink is connected once, written to in batches, and closed:
//
//	s, err := webhook.New("https://example.com/hook", webhook.Secret(secret))
//	if err := s.Connect(ctx); err != nil { ... }
//	defer s.Close(ctx)
//	c, err := ferry.NewBatchConsumer(client, sink.BatchHandler(s), ...)
//
// BatchHandler gives each Write the events a ferry lane has ready (up to
// ferry.BatchSize), so a sink that can put a batch in flight at once pays
// its round trip, syscall or transaction once per batch; Handler writes
// one event at a time, for ferry.NewConsumer.
//
// # Guarantees a sink gives
//
//   - Done means acknowledged: Write returns nil only when the destination
//     acknowledged every event of the batch (for the webhook, a 2xx
//     response). Anything else is a failure of that event, reported per
//     event in a *BatchError.
//   - Order per document: within a batch, events of one documentKey are
//     delivered in batch order, and once one of them fails the later ones of
//     the same key are not attempted (they fail too, retryably), so a
//     receiver never sees a document's change before an earlier one that
//     failed. Events of different documents are independent.
//   - Every delivery carries the event id (ferry.Event.ID, the sha256 of the
//     resume token) as its idempotency key and the lease epoch it is applied
//     under. The same event replayed after a crash or a takeover has the
//     same id, so duplicates are recognisable. Ferry's delivery is
//     at-least-once: dropping duplicates is the receiver's job, keyed by the
//     idempotency key (see examples/node-receiver).
//   - Write is safe for concurrent use: ferry calls the handler from several
//     lanes at once.
//   - Write before Connect or after Close fails with ErrNotConnected; nothing
//     is dropped silently.
//
// # Retry classes
//
// Each failure is either retryable (the default: timeouts, connection errors,
// 408, 429, 5xx for HTTP) or permanent (marked with Permanent: the receiver
// rejected the event and retrying cannot help, e.g. HTTP 400). Handler and
// BatchHandler hand retryable failures back to ferry marked
// ferry.Transient (the sink's failure, not the event's), so ferry retries
// them with backoff, counting an attempt towards MaxAttempts only while
// the sink accepts other events and dead-lettering nothing during an
// outage; and permanent ones wrapped with ferry.Permanent, so they go
// straight to the dead-letter policy. A failure may also carry a minimum delay (RetryAfter, from an
// HTTP Retry-After header); Handler waits that long (BatchHandler the
// longest delay of the batch), within its context, before returning, so
// ferry's next attempt comes no sooner.
//
// # Options
//
// Every sink's New takes that package's Options, in the style of package
// ferry: they only record values; New validates its arguments and options
// once, before it contacts anything, and its error matches the package's
// ErrInvalidOption and lists every problem, each naming its option or
// argument ("Topic: may contain only ASCII letters, digits, '.', '_' and
// '-', got \"a/b\""), never a secret. The checks a configuration file
// needs are exported (webhook.CheckHeader, kafka.CheckTopic, ...), so that
// the ferry daemon's `ferry validate` refuses exactly what New would.
//
// Every sink passes the shared behaviour suite in package sinktest.
package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-io/ferry"
)

// Sink delivers change events somewhere.
type Sink interface {
	// Connect prepares the sink; Write may be called after it returned nil.
	Connect(ctx context.Context) error
	// Write delivers a batch in order; it returns nil when every event was
	// acknowledged, or a *BatchError saying per event which failed and
	// whether each failure is retryable (see IsRetryable). Any other error
	// applies to every event of the batch.
	Write(ctx context.Context, batch []*ferry.Event) error
	// Close releases the sink's resources. Writes after Close fail with
	// ErrNotConnected.
	Close(ctx context.Context) error
}

// Errors to check with errors.Is.
var (
	// ErrNotConnected: Write was called before Connect or after Close.
	ErrNotConnected = errors.New("sink: not connected")
	// ErrRetryable marks a failure that may succeed if tried again (see
	// Retryable). Unmarked failures are retryable too; the mark documents
	// intent and carries a delay (RetryAfter). It is ferry.ErrTransient:
	// a retryable failure is the sink's, not the event's, and Handler and
	// BatchHandler mark every retryable failure so.
	ErrRetryable = ferry.ErrTransient
	// ErrPermanent marks a failure retrying cannot fix (see Permanent). It
	// is ferry.ErrPermanent, so errors.Is works on either side.
	ErrPermanent = ferry.ErrPermanent
	// ErrNotAttempted marks the failure of an event the sink did not
	// attempt because of another event of the batch (see ErrSkipped). It is
	// ferry.ErrNotAttempted: ferry retries such an event without counting
	// the attempt.
	ErrNotAttempted = ferry.ErrNotAttempted
	// ErrSkipped is the failure of an event that was not attempted because
	// an earlier event of the same documentKey failed in the same batch.
	// It matches ErrNotAttempted too.
	ErrSkipped error = &notAttempted{"sink: not attempted: an earlier event of the same document failed"}
	// ErrDraining is the failure of the events of a batch that EachInOrder
	// did not start because the consumer began draining (ferry.Draining):
	// retryable, not attempted, left for the next owner.
	ErrDraining = errors.New("sink: not attempted: the consumer is draining")
)

type notAttempted struct{ msg string }

func (e *notAttempted) Error() string        { return e.msg }
func (e *notAttempted) Is(target error) bool { return target == ErrNotAttempted }

// stoppedBy is the failure of an event EachInOrder did not attempt because
// an earlier event's failure stopped the batch: it wraps that failure (its
// class and RetryDelay hold) and matches ErrNotAttempted, so ferry neither
// counts it against the event nor judges the sink by it twice.
type stoppedBy struct{ err error }

func (e *stoppedBy) Error() string {
	return "sink: not attempted: an earlier event of the batch failed: " + e.err.Error()
}
func (e *stoppedBy) Unwrap() error        { return e.err }
func (e *stoppedBy) Is(target error) bool { return target == ErrNotAttempted }

// Retryable marks err as retryable.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err: err}
}

// RetryAfter marks err as retryable no sooner than after d.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryableError{err: err, after: d}
}

// Permanent marks err as not retryable: the event goes to the dead-letter
// policy. It is ferry.Permanent.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return ferry.Permanent(err)
}

// IsRetryable reports whether a failed event may be tried again: true for
// every non-nil error not marked Permanent.
func IsRetryable(err error) bool { return err != nil && !errors.Is(err, ErrPermanent) }

// RetryDelay returns the minimum delay before retrying that err carries
// (from RetryAfter), if any.
func RetryDelay(err error) (time.Duration, bool) {
	var r *retryableError
	if errors.As(err, &r) && r.after > 0 {
		return r.after, true
	}
	return 0, false
}

type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string {
	if e.after > 0 {
		return fmt.Sprintf("%v (retry after %s)", e.err, e.after)
	}
	return e.err.Error()
}
func (e *retryableError) Unwrap() []error { return []error{e.err, ErrRetryable} }

// BatchError reports which events of a batch failed. It is
// ferry.BatchError: a sink's Write and a ferry.BatchHandler report
// per-event failures the same way.
type BatchError = ferry.BatchError

// NewBatchError returns a BatchError for a batch of n events, all delivered
// until Set says otherwise.
func NewBatchError(n int) *BatchError { return ferry.NewBatchError(n) }

// Errors returns one error per event of a batch of n from the error Write
// returned: the BatchError's entries, or err for every event. It is
// ferry.EventErrors.
func Errors(err error, n int) []error { return ferry.EventErrors(err, n) }

// KeyOf returns the ordering key of an event: its namespace and documentKey
// bytes. Events without a documentKey (drop, rename, ...) share the key of
// their namespace.
func KeyOf(ev *ferry.Event) string {
	var b strings.Builder
	b.WriteString(ev.Namespace.String())
	b.WriteByte(0)
	b.Write(ev.DocumentKey)
	return b.String()
}

// EachInOrder is the delivery loop most sinks need: it calls deliver for
// each event in order and builds the BatchError. Once an event fails, later
// events of the same key (KeyOf) are not attempted and fail with ErrSkipped
// (retryable). If deliver returns an error for which stop reports true (nil
// stop: never), the remaining events are not attempted and fail with an
// error that wraps it (its class and RetryDelay) and matches
// ErrNotAttempted; a cancelled ctx (or one past its deadline) fails the
// remaining events the same way, with its error, retryable, and so does the
// start of its consumer's drain (ferry.Draining), with ErrDraining: only the
// event in flight then finishes.
func EachInOrder(ctx context.Context, batch []*ferry.Event, deliver func(context.Context, *ferry.Event) error, stop func(error) bool) error {
	be := NewBatchError(len(batch))
	eachInOrder(ctx, batch, be, func(_ int, ev *ferry.Event) error { return deliver(ctx, ev) }, stop)
	return be.Err()
}

// Submit is EachInOrder for sinks that put a whole batch in flight at once
// and learn each event's fate later (a producer's callback, a publish
// result): submit(i, ev) puts event i in flight, or returns why it could
// not, which Submit records in be. Later events of a key whose submit
// failed are not submitted (ErrSkipped, retryable); a cancelled ctx fails
// the events not yet submitted (retryable, not attempted). The sink
// records the fates of the submitted events in be itself.
func Submit(ctx context.Context, batch []*ferry.Event, be *BatchError, submit func(i int, ev *ferry.Event) error) {
	eachInOrder(ctx, batch, be, submit, nil)
}

func eachInOrder(ctx context.Context, batch []*ferry.Event, be *BatchError, deliver func(int, *ferry.Event) error, stop func(error) bool) {
	var failedKeys map[string]bool
	draining := ferry.Draining(ctx)
	for i, ev := range batch {
		err := ctx.Err()
		if err == nil && i > 0 {
			select {
			case <-draining:
				// The consumer is draining: what is not started stays for
				// the next owner, so the drain waits for one event, not
				// for the batch.
				err = ErrDraining
			default:
			}
		}
		if err != nil {
			for j := i; j < len(batch); j++ {
				be.Set(j, &stoppedBy{Retryable(err)})
			}
			return
		}
		// The key is built only once an event failed: a batch that
		// succeeds costs no key (nor its allocation) per event.
		if failedKeys != nil && failedKeys[KeyOf(ev)] {
			be.Set(i, Retryable(ErrSkipped))
			continue
		}
		err = deliver(i, ev)
		if err == nil {
			continue
		}
		be.Set(i, err)
		if stop != nil && stop(err) {
			for j := i + 1; j < len(batch); j++ {
				be.Set(j, &stoppedBy{err})
			}
			return
		}
		if failedKeys == nil {
			failedKeys = make(map[string]bool)
		}
		failedKeys[KeyOf(ev)] = true
	}
}
