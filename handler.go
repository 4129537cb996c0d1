package ferry

import (
	"context"
	"time"
)

// Handler applies one change. It is called at least once per event; it
// must return nil only after its side effect is durable. An error is
// retried with backoff up to the configured attempts (wrap it with
// Permanent to skip retries); a panic counts as an error.
//
// A Go handler is not a sink: an error of its own, or a panic, counts
// against the event every time, so a handler bug on one document is
// dead-lettered after MaxAttempts attempts even in a quiet partition.
// Failures of the destination it writes to are told apart (see Retry):
// network errors, timeouts and MongoDB's transient errors by their type,
// anything else by wrapping it with Transient (a service answering 503,
// say). Those are waited out as a sink outage, dead-lettering nothing.
//
// What its return means is all that counts, whenever it comes. Each call's
// context ends at HandlerTimeout (and when a drain runs out): that is the
// cancellation of the call, asking the handler to stop and return, not a
// verdict on it. A handler that returns nil after the deadline has applied
// the event: it is finished and not handed over again (Ferry logs the late
// return). One that returns an error, the context's included, failed, and
// the event is retried. A handler that stops on its context's end must
// therefore return an error unless its effect is durable.
type Handler func(ctx context.Context, ev *Event) error

// BatchHandler applies a batch of changes in one call (NewBatchConsumer):
// events read from the stream in order, at most BatchSize of them and
// BatchBytes of raw event, where events of one document (namespace and
// documentKey) appear in stream order. It must return nil only after the
// side effects of every event are durable, and apply a document's events
// in batch order.
//
// A nil error applies to every event; a *BatchError says per event which
// failed (see EventErrors); any other error fails every event of the
// batch, as a panic does. Each failed event is then retried alone, in
// batch order, as a Handler's event is: Permanent makes it poison at
// once, ErrNotAttempted retries it without counting the attempt,
// ErrStopPartition stops the partition, anything else is retried with
// backoff up to the configured attempts. Once the first failed event is
// finished (applied, or dead-lettered as poison), the others are tried
// together again. So an event already applied is never handed over again
// in the same run, and one document's events are applied in order as long
// as the handler applies none after one of them failed (package sink's
// EachInOrder and Submit take care of that). The slice is reused once the
// call returns: keep the events, not the slice. As with a Handler, the
// call's timeout cancels its context and judges nothing: a nil returned
// after it applies every event of the batch.
type BatchHandler func(ctx context.Context, batch []*Event) error

// Sweeper removes, after a backfill scan, what the scan did not touch:
// documents deleted while the stream's history was lost. since is when the
// scan began (the server's clock).
type Sweeper func(ctx context.Context, since time.Time) error
