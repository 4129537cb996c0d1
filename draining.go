package ferry

import "context"

// drainingKey carries, in a handler call's context, the channel closed when
// its consumer starts draining.
type drainingKey struct{}

// Draining returns a channel closed once the consumer whose handler was
// called with ctx started draining (Run's context was cancelled): from then
// on a failed event is not retried but left for the next owner. A handler
// that waits before returning a failure (a sink honouring a receiver's
// Retry-After) can stop waiting then, so the drain ends with the calls in
// flight instead of with their waits. It returns nil (a channel that never
// closes) for any other context.
func Draining(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(drainingKey{}).(chan struct{})
	return ch
}
