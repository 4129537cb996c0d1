// Package ferryotel traces Ferry with OpenTelemetry: a span per read batch
// and a span per delivery (one attempt of one event), and the W3C
// traceparent of the delivery's span handed to the sink, which sends it on
// (the webhook's traceparent header, Kafka and NATS headers, a Pub/Sub
// attribute), so the receiver's spans join the same trace.
//
// It is its own module, as package metrics is for Prometheus: the library
// (module github.com/ferry-io/ferry) depends on no tracing library. It
// talks to the library through two hooks and a context value:
// ferry.HookRead (the read side: one span per batch of the change stream
// or of a backfill scan), ferry.HookDelivery (one span per delivery: each
// event of each handler call, whose parent is its batch's span) and
// ferry.WithTraceParent / ferry.TraceParent / ferry.DeliveryTraceParent.
//
//	tr := ferryotel.New(ferryotel.TracerProvider(tp))
//	c, err := ferry.NewConsumer(client, handler, ferry.WithHooks(tr), ...)
//
// The handler's context carries the delivery span (trace.SpanFromContext)
// and its traceparent (ferry.TraceParent), so spans the handler starts are
// children of the delivery. A batch handler's call of several events
// (ferry.NewBatchConsumer) has a deliver span per event; its context
// carries none of them, and ferry.DeliveryTraceParent gives each event's
// traceparent, which the sinks send with that event.
//
// # Spans
//
//	read <stream>      kind consumer; ferry.stream, ferry.partition, ferry.backfill,
//	                   ferry.batch.events, ferry.batch.bytes
//	deliver <stream>   kind producer, child of its batch's read span; ferry.stream,
//	                   ferry.partition, ferry.operation, ferry.namespace,
//	                   ferry.event_id (the event id's first 16 hex digits, as in
//	                   the logs), ferry.attempt, ferry.result (applied, retried,
//	                   dead-lettered, stalled, abandoned); status Error with the
//	                   error's message when the call failed
//
// A retried event has one deliver span per attempt, all in the trace of
// the batch that read it; its log lines carry the same short event id and
// trace id, and so does its dead-letter entry (TraceID), so a log line, a
// span and a DLQ entry join.
//
// What never becomes an attribute: resume tokens (error messages quoting
// one are shortened by ferry.RedactTokens), document bodies (the change
// event, its documentKey), URIs and credentials. Ids (event ids, trace
// ids) are span attributes only, never metric labels.
//
// # Configuration from the environment
//
// FromEnv builds the tracer from the standard OpenTelemetry variables, as
// the ferry daemon does: tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or an endpoint is given), off
// otherwise and when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// Spans are exported over OTLP/HTTP (protobuf), batched; the exporter and
// the SDK read the other variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE, OTEL_TRACES_SAMPLER, OTEL_BSP_*,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
package ferryotel
