package ferryotel

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferry-io/ferry"
)

// ScopeName is the instrumentation scope of Ferry's spans.
const ScopeName = "github.com/ferry-io/ferry/otel"

// Attribute keys of Ferry's spans.
const (
	AttrStream      = attribute.Key("ferry.stream")
	AttrPartition   = attribute.Key("ferry.partition")
	AttrBackfill    = attribute.Key("ferry.backfill")
	AttrBatchEvents = attribute.Key("ferry.batch.events")
	AttrBatchBytes  = attribute.Key("ferry.batch.bytes")
	AttrOperation   = attribute.Key("ferry.operation")
	AttrNamespace   = attribute.Key("ferry.namespace")
	AttrEventID     = attribute.Key("ferry.event_id")
	AttrAttempt     = attribute.Key("ferry.attempt")
	AttrResult      = attribute.Key("ferry.result")
)

// maxStatusLen bounds a span's error description.
const maxStatusLen = 512

// Tracer is a ferry hook (ferry.HookRead and ferry.HookDelivery) that
// makes the spans of package ferryotel. Pass it with ferry.WithHooks (or
// group.ConsumerOptions(ferry.WithHooks(...))). It is safe for concurrent
// use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// Option configures New.
type Option interface{ apply(*config) }

type config struct{ provider trace.TracerProvider }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// TracerProvider sets the provider of the tracer (default: otel's global
// provider, otel.GetTracerProvider).
func TracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.provider = tp })
}

// New returns a Tracer.
func New(opts ...Option) *Tracer {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.provider == nil {
		c.provider = otel.GetTracerProvider()
	}
	return &Tracer{tracer: c.provider.Tracer(ScopeName, trace.WithInstrumentationVersion(version()))}
}

var (
	_ ferry.HookRead     = (*Tracer)(nil)
	_ ferry.HookDelivery = (*Tracer)(nil)
)

// OnRead implements ferry.HookRead: a read span per batch; its
// traceparent is the parent of the batch's deliveries.
func (t *Tracer) OnRead(i ferry.ReadInfo) (string, func(ferry.ReadInfo)) {
	ctx, span := t.tracer.Start(context.Background(), "read "+i.Stream,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(), trace.WithTimestamp(i.Start),
		trace.WithAttributes(AttrStream.String(i.Stream), AttrPartition.Int(i.Partition), AttrBackfill.Bool(i.Backfill)))
	return t.traceParent(ctx), func(end ferry.ReadInfo) {
		span.SetAttributes(AttrBatchEvents.Int(end.Events), AttrBatchBytes.Int64(end.Bytes))
		span.End(trace.WithTimestamp(end.Start.Add(end.Duration)))
	}
}

// OnDelivery implements ferry.HookDelivery: a deliver span per handler
// call, the child of its batch's read span (the traceparent ctx carries),
// or of the span ctx holds when there is none; the handler's context
// carries the new span and its traceparent.
func (t *Tracer) OnDelivery(ctx context.Context, ev *ferry.Event, i ferry.EventInfo) (context.Context, func(ferry.EventInfo)) {
	parent := ctx
	if tp := ferry.TraceParent(ctx); tp != "" {
		pctx := t.prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
		if sc := trace.SpanContextFromContext(pctx); sc.IsValid() {
			// The read span is this process's own: a local parent.
			parent = trace.ContextWithSpanContext(ctx, sc.WithRemote(false))
		}
	}
	start := time.Now()
	ctx, span := t.tracer.Start(parent, "deliver "+i.Stream,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(start),
		trace.WithAttributes(AttrStream.String(i.Stream), AttrPartition.Int(i.Partition),
			AttrOperation.String(i.Operation), AttrNamespace.String(i.Namespace.String()),
			AttrEventID.String(shortID(i.EventID)), AttrAttempt.Int(i.Attempt)))
	ctx = ferry.WithTraceParent(ctx, t.traceParent(ctx))
	return ctx, func(end ferry.EventInfo) {
		span.SetAttributes(AttrResult.String(string(end.Result)))
		if end.Err != nil && end.Result != ferry.ResultApplied {
			span.SetStatus(codes.Error, statusText(end.Err))
		}
		if end.Duration > 0 {
			span.End(trace.WithTimestamp(start.Add(end.Duration)))
			return
		}
		span.End()
	}
}

// traceParent is the W3C traceparent of ctx's span.
func (t *Tracer) traceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return c["traceparent"]
}

// statusText is an error as a span's status description: resume tokens
// shortened, bounded in length.
func statusText(err error) string {
	s := ferry.RedactTokens(err.Error())
	if len(s) > maxStatusLen {
		s = strings.ToValidUTF8(s[:maxStatusLen], "") + "…"
	}
	return s
}

// shortID is an event id as the logs print it: its first 16 hex digits.
func shortID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
