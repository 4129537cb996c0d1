package ferry

import (
	"context"
	"log/slog"
	"time"
)

// call is one handler call (one attempt) as the delivery hooks and the
// logs see it.
type call struct {
	ctx context.Context // the handler's context
	end func(EventInfo) // the delivery hooks' end, until reported
	log *slog.Logger    // the partition's logger, with the trace id when there is one
	tp  string          // the traceparent ctx carries, "" when none
}

// startCall prepares a handler call of ev under ctx: the context carries
// the event's read batch traceparent, wrapped by the delivery hooks (which
// put their span's in), and the logger adds the trace id to every line, so
// a log line, a span and a dead-letter entry of one delivery join on the
// short event id and the trace id.
func (r *runner) startCall(ctx context.Context, ev *Event, attempt int) call {
	if ev.traceParent == "" && !r.c.delivery && ctx == r.handlerCtx {
		return call{ctx: ctx, log: r.plainLog, tp: r.plainTP} // the same for every call: worked out once
	}
	if ev.traceParent != "" {
		ctx = WithTraceParent(ctx, ev.traceParent)
	}
	c := call{ctx: ctx, log: r.c.log}
	if r.c.delivery {
		cfg := &r.c.cfg
		c.ctx, c.end = r.c.hooks.delivery(ctx, ev, EventInfo{Stream: cfg.name, Partition: cfg.partition,
			Operation: ev.OperationType, Namespace: ev.Namespace, EventID: ev.ID(), Attempt: attempt,
			ClusterTime: time.Unix(int64(ev.ClusterTime.T), 0)})
	}
	c.traced()
	return c
}

// traced sets c's traceparent and logger from its context.
func (c *call) traced() {
	c.tp = TraceParent(c.ctx)
	if id := TraceID(c.tp); id != "" {
		c.log = c.log.With("trace", id)
	}
}

// plainCalls works out the call of an event without a read batch
// traceparent and without delivery hooks, under the handlers' context
// (startCall's most common case), once per run.
func (r *runner) plainCalls() {
	c := call{ctx: r.handlerCtx, log: r.c.log}
	c.traced()
	r.plainTP, r.plainLog = c.tp, c.log
}

// finish reports the call's outcome to the delivery hooks, once.
func (c *call) finish(i EventInfo) {
	if end := c.end; end != nil {
		c.end = nil
		end(i)
	}
}
