package pubsub_test

import (
	"context"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// TestTraceParentAttribute: a message carries the handler context's
// traceparent in its traceparent attribute, and none without one.
func TestTraceParentAttribute(t *testing.T) {
	srv := startServer(t)
	r := newReceiver(srv)
	s := r.newSink(t)
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, plain := sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1)
	if err := s.Write(ferry.WithTraceParent(ctx, tp), []*ferry.Event{traced}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []*ferry.Event{plain}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	got := map[string]string{}
	for _, m := range r.messages() {
		got[m.d.EventID] = m.attrs[pubsub.TraceParentAttribute]
	}
	if got[traced.ID()] != tp || got[plain.ID()] != "" {
		t.Fatalf("traceparent attributes: %v", got)
	}
}
