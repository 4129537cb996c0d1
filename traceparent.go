package ferry

import "context"

// Trace context without a tracing library: Ferry carries a W3C Trace
// Context traceparent (https://www.w3.org/TR/trace-context/) from the read
// of an event to its handler call and on to the sink, which sends it with
// the delivery (the webhook's traceparent header, Kafka and NATS headers,
// a Pub/Sub attribute). Ferry starts no span itself: a hook does (the
// ferry/otel module's does, for OpenTelemetry), and hands Ferry the
// traceparent of its span (HookRead, HookDelivery).

type traceParentKey struct{}

// WithTraceParent returns ctx carrying the W3C traceparent tp
// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"). A malformed tp
// is not carried: ctx is returned as it is.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if !ValidTraceParent(tp) {
		return ctx
	}
	return context.WithValue(ctx, traceParentKey{}, tp)
}

// TraceParent returns the traceparent ctx carries, or "". A handler's
// context carries the one of its delivery when tracing is on; sinks send
// it on.
func TraceParent(ctx context.Context) string {
	tp, _ := ctx.Value(traceParentKey{}).(string)
	return tp
}

// TraceID returns the trace id (32 hex digits) of a traceparent, or "".
func TraceID(tp string) string {
	if !ValidTraceParent(tp) {
		return ""
	}
	return tp[3:35]
}

// ValidTraceParent reports whether tp is a version-00 traceparent: lower
// case hex fields of 2, 32, 16 and 2 digits separated by '-', with a trace
// id and a span id that are not all zeros.
func ValidTraceParent(tp string) bool {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || tp[:2] != "00" {
		return false
	}
	for i, f := range [][2]int{{0, 2}, {3, 35}, {36, 52}, {53, 55}} {
		zero := true
		for _, c := range tp[f[0]:f[1]] {
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			default:
				return false
			}
			if c != '0' {
				zero = false
			}
		}
		if zero && (i == 1 || i == 2) {
			return false
		}
	}
	return true
}
