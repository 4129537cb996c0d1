package kafka_test

import (
	"testing"

	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// TestRenderingUnchanged checks the record values of a varied event set
// are the bytes the driver's marshaller renders, in both modes, and their
// keys the documentKey as the driver renders it canonically (or the
// namespace): the partitioning of existing topics must not move.
func TestRenderingUnchanged(t *testing.T) {
	for _, canonical := range []bool{false, true} {
		r := newReceiver(t, startCluster(t, 1), 1)
		var opts []kafka.Option
		if canonical {
			opts = append(opts, kafka.Canonical())
		}
		sinktest.CheckRendering(t, r.newSink(t, opts...), r, canonical)
		keys := map[string]string{}
		for _, rec := range r.records() {
			keys[rec.d.EventID] = rec.key
		}
		for _, ev := range sinktest.VariedEvents(9) {
			want := sinktest.DriverKey(t, ev)
			if got, ok := keys[ev.ID()]; !ok || got != want {
				t.Errorf("%s event: record key %q, want %q", ev.OperationType, got, want)
			}
		}
	}
}
