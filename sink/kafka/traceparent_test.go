package kafka_test

import (
	"context"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// TestTraceParentHeader: a record carries the handler context's
// traceparent in its traceparent header, and none without one.
func TestTraceParentHeader(t *testing.T) {
	c := startCluster(t, 1)
	r := newReceiver(t, c, 1)
	s := r.newSink(t)
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := s.Write(ferry.WithTraceParent(ctx, tp), []*ferry.Event{sinktest.NewEvent(1, "a", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []*ferry.Event{sinktest.NewEvent(2, "b", 1)}); err != nil {
		t.Fatal(err)
	}
	recs := r.records()
	if len(recs) != 2 || recs[0].traceParent != tp || recs[1].traceParent != "" {
		t.Fatalf("records' traceparent headers: %+v", recs)
	}
}
