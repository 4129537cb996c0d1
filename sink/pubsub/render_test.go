package pubsub_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// TestRenderingUnchanged checks the message data of a varied event set is
// the bytes the driver's marshaller renders, in both modes, and the
// ordering keys the documentKey as the driver renders it canonically (or
// the namespace, hashed when long).
func TestRenderingUnchanged(t *testing.T) {
	for _, canonical := range []bool{false, true} {
		r := newReceiver(startServer(t))
		var opts []pubsub.Option
		if canonical {
			opts = append(opts, pubsub.Canonical())
		}
		sinktest.CheckRendering(t, r.newSink(t, opts...), r, canonical)
		keys := map[string]string{}
		for _, m := range r.messages() {
			keys[m.d.EventID] = m.orderingKey
		}
		for _, ev := range sinktest.VariedEvents(9) {
			want := sinktest.DriverKey(t, ev)
			if len(want) > pubsub.MaxOrderingKeyBytes {
				sum := sha256.Sum256([]byte(want))
				want = "sha256:" + hex.EncodeToString(sum[:])
			}
			if got, ok := keys[ev.ID()]; !ok || got != want {
				t.Errorf("%s event: ordering key %q, want %q", ev.OperationType, got, want)
			}
		}
	}
}
