package ferry

import (
	"context"
	"time"
)

// Handler applies one change. It is called at least once per event; it
// must return nil only after its side effect is durable. An error is
// retried with backoff up to the configured attempts (wrap it with
// Permanent to skip retries); a panic counts as an error.
type Handler func(ctx context.Context, ev *Event) error

// Sweeper removes, after a backfill scan, what the scan did not touch:
// documents deleted while the stream's history was lost. since is when the
// scan began (the server's clock).
type Sweeper func(ctx context.Context, since time.Time) error
