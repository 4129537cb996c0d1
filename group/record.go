package group

import (
	"context"
	"time"
)

// recordTimeout bounds the ledger write that follows effects the handler
// acknowledged (idempotent mode).
const recordTimeout = 2 * time.Second

// recordContext returns the context of the ledger write after effects the
// sink acknowledged: ctx's values without its cancellation, bounded by
// recordTimeout. A drain that runs out cancels the handler's context, often
// while a lane's batch is posting; the events the receiver had already
// acknowledged in that batch must still be recorded, or the next owner
// sends every one of them again. Only the requests cut off in flight then
// come back. If the write still fails, the events are retried as before
// (the receiver drops them by their idempotency key).
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}
