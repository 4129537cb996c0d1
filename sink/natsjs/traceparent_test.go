package natsjs_test

import (
	"context"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink/natsjs"
)

// TestTraceParentHeader: a message carries the handler context's
// traceparent in its traceparent header, and none without one.
func TestTraceParentHeader(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	s, err := natsjs.New(b.url, natsjs.Subject("ferry.trace.{op}.{db}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := s.Write(ferry.WithTraceParent(ctx, tp), []*ferry.Event{eventIn(1, "traced", "c", "insert")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []*ferry.Event{eventIn(2, "plain", "c", "insert")}); err != nil {
		t.Fatal(err)
	}
	m, err := b.stream.GetLastMsgForSubject(ctx, "ferry.trace.insert.traced")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(natsjs.TraceParentHeader); got != tp {
		t.Errorf("traceparent header %q, want %q", got, tp)
	}
	m, err = b.stream.GetLastMsgForSubject(ctx, "ferry.trace.insert.plain")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(natsjs.TraceParentHeader); got != "" {
		t.Errorf("traceparent header %q without a traceparent in the context", got)
	}
}
