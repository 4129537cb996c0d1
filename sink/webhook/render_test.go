package webhook_test

import (
	"testing"

	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/webhook"
)

// TestRenderingUnchanged checks the bodies of a varied event set are the
// bytes the driver's marshaller renders, in both modes.
func TestRenderingUnchanged(t *testing.T) {
	for _, canonical := range []bool{false, true} {
		var opts []webhook.Option
		if canonical {
			opts = append(opts, webhook.Canonical())
		}
		r := newReceiver(t, opts...)
		sinktest.CheckRendering(t, r.NewSink(t), r, canonical)
	}
}
