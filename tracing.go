package ferry

import (
	"context"
	"time"
)

// ResultAbandoned is the result HookDelivery's end function gets for a
// handler call whose event was left unfinished: the partition stopped or
// its drain deadline passed; the event is replayed by the next owner. It is
// never given to HookEvent.
const ResultAbandoned EventResult = "abandoned"

// ReadInfo describes one batch of events the reader took from the change
// stream (one server reply: the first batch of an aggregate or a getMore)
// or a backfill scan took from its collection.
type ReadInfo struct {
	Stream    string
	Partition int
	Backfill  bool      // a backfill scan's batch
	Start     time.Time // when the read that returned the batch began
	// Events and Bytes count what the batch handed to the handlers, and
	// Duration runs from Start until its last event was handed on (queue
	// waits included: reading pauses at the queue bound); set when the
	// batch ends.
	Events   int
	Bytes    int64
	Duration time.Duration
}

// HookRead is called when a batch begins: when the reader receives its
// first event. It returns the W3C traceparent the batch's events carry
// into their handler calls (see TraceParent and HookDelivery), or "", and
// a function Ferry calls once with the final ReadInfo when the batch was
// handed on (nil: none). With several HookRead hooks, the first non-empty
// traceparent is used.
type HookRead interface {
	OnRead(ReadInfo) (traceParent string, done func(ReadInfo))
}

// HookDelivery wraps every delivery: every event of every handler call
// (every attempt; a BatchHandler's call of n events is n deliveries).
// OnDelivery is called before the call with the context the handler is to
// get (carrying the traceparent of the event's read batch, if any) and the
// event; info has Stream, Partition, Operation, Namespace, EventID,
// Attempt and ClusterTime set. It returns the context to give the handler
// instead (a tracer puts its span's traceparent in, with WithTraceParent,
// so the sink sends it on; a call of several events gets the context it
// was given, and each event's traceparent is DeliveryTraceParent's) and a
// function Ferry calls once with the delivery's outcome: info with Result
// set — applied, retried, dead-lettered, stalled, or ResultAbandoned — and
// Err and Duration (nil: none). The end of an attempt that made the event
// poison is reported after the dead-letter write (or the stall), so it
// carries the final result.
//
// Like every hook it must be fast and must not block; it must return a
// context derived from the one it was given.
type HookDelivery interface {
	OnDelivery(ctx context.Context, ev *Event, info EventInfo) (context.Context, func(EventInfo))
}

// read begins a read batch with the HookRead hooks; it returns the
// batch's traceparent and its end functions.
func (h hooks) read(i ReadInfo) (string, []func(ReadInfo)) {
	var tp string
	var ends []func(ReadInfo)
	for _, x := range h {
		if f, ok := x.(HookRead); ok {
			p, end := f.OnRead(i)
			if tp == "" && ValidTraceParent(p) {
				tp = p
			}
			if end != nil {
				ends = append(ends, end)
			}
		}
	}
	return tp, ends
}

// delivery calls the HookDelivery hooks in order, each wrapping the
// context the previous one returned; the end functions run in reverse.
func (h hooks) delivery(ctx context.Context, ev *Event, i EventInfo) (context.Context, func(EventInfo)) {
	var ends []func(EventInfo)
	for _, x := range h {
		if f, ok := x.(HookDelivery); ok {
			c, end := f.OnDelivery(ctx, ev, i)
			if c != nil {
				ctx = c
			}
			if end != nil {
				ends = append(ends, end)
			}
		}
	}
	switch len(ends) {
	case 0:
		return ctx, nil
	case 1:
		return ctx, ends[0]
	}
	return ctx, func(i EventInfo) {
		for k := len(ends) - 1; k >= 0; k-- {
			ends[k](i)
		}
	}
}

// perEvent reports whether a hook is told of each handler call
// (HookEvent, HookDelivery).
func (h hooks) perEvent() bool {
	for _, x := range h {
		switch x.(type) {
		case HookEvent, HookDelivery:
			return true
		}
	}
	return false
}

// has reports whether any hook implements HookRead (read) or
// HookDelivery (!read).
func (h hooks) has(read bool) bool {
	for _, x := range h {
		if _, ok := x.(HookRead); ok && read {
			return true
		}
		if _, ok := x.(HookDelivery); ok && !read {
			return true
		}
	}
	return false
}

// readBatch follows the reader's batches for HookRead: begin at a batch's
// first event, add each event handed on (it carries the batch's
// traceparent), end when the server's batch is used up. The zero value,
// and one without HookRead hooks, does nothing.
type readBatch struct {
	h       hooks
	enabled bool
	open    bool
	info    ReadInfo
	tp      string
	ends    []func(ReadInfo)
}

func newReadBatch(h hooks, stream string, partition int, backfill bool) readBatch {
	return readBatch{h: h, enabled: h.has(true), info: ReadInfo{Stream: stream, Partition: partition, Backfill: backfill}}
}

// begin opens a batch whose read began at start, unless one is open.
func (b *readBatch) begin(start time.Time) {
	if !b.enabled || b.open {
		return
	}
	b.open = true
	b.info.Start, b.info.Events, b.info.Bytes, b.info.Duration = start, 0, 0, 0
	b.tp, b.ends = b.h.read(b.info)
}

// add counts an event of the open batch and gives it the batch's
// traceparent.
func (b *readBatch) add(ev *Event, size int64) {
	if !b.open {
		return
	}
	ev.traceParent = b.tp
	b.info.Events++
	b.info.Bytes += size
}

// end closes the open batch.
func (b *readBatch) end() {
	if !b.open {
		return
	}
	b.open = false
	b.info.Duration = time.Since(b.info.Start)
	for _, end := range b.ends {
		end(b.info)
	}
	b.tp, b.ends = "", nil
}

// isTraceHook reports whether h implements HookRead or HookDelivery.
func isTraceHook(h Hook) bool {
	switch h.(type) {
	case HookRead, HookDelivery:
		return true
	}
	return false
}

// DeliveryTraceParent returns the W3C traceparent of ev's delivery in the
// handler call whose context is ctx, or "": the one the HookDelivery hooks
// set for ev. A handler given one event gets it in ctx as well
// (TraceParent); a BatchHandler given several gets a context without one,
// since each event of the batch is its own delivery in its own read
// batch's trace. Sinks send it on with each event.
func DeliveryTraceParent(ctx context.Context, ev *Event) string {
	if ev != nil && ev.deliveryTP != "" {
		return ev.deliveryTP
	}
	return TraceParent(ctx)
}
