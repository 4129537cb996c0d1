package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// TestRenderingUnchanged checks the message data of a varied event set is
// the bytes the driver's marshaller renders, in both modes.
func TestRenderingUnchanged(t *testing.T) {
	for _, canonical := range []bool{false, true} {
		r := newReceiver(t, startBroker(t))
		opts := []natsjs.Option{natsjs.Timeout(5 * time.Second)}
		if canonical {
			opts = append(opts, natsjs.Canonical())
		}
		s, err := natsjs.New(r.b.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		r.mu.Lock()
		r.sinks = append(r.sinks, s)
		r.mu.Unlock()
		sinktest.CheckRendering(t, s, r, canonical)
	}
}
