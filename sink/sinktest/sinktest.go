// Package sinktest is the one behaviour suite every sink passes.
//
//	func TestSuite(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) { ... })
//	}
//
// The suite builds change events itself (NewEvent: real change-event BSON
// with a resume token, decoded into ferry.Event) and checks, through the
// Receiver, what arrived at the destination:
//
//   - every delivery carries the event id as both event id and idempotency
//     key, the lease epoch, and the change event as Extended JSON;
//   - Write before Connect and after Close fails with sink.ErrNotConnected
//     and delivers nothing;
//   - across a restart (close, then a new sink instance replaying from an
//     earlier point, as a consumer does after a crash) nothing is lost and
//     every duplicate is byte-for-byte the same delivery (same idempotency
//     key, epoch and body);
//   - a partial failure in a batch is reported for exactly the failed events
//     (and the later events of the same document, which are not attempted),
//     with the right retry class, while the others are delivered; Handler
//     maps the classes onto ferry's retry and dead-letter paths;
//   - events of one documentKey arrive in order, also with concurrent
//     Writes from several goroutines.
package sinktest

import (
	"testing"

	"github.com/ferry-io/ferry/sink"
)

// Delivery is one event as it arrived at the destination.
type Delivery struct {
	// EventID is the event's identity as delivered (webhook-id header,
	// "id" field, ...).
	EventID string
	// IdempotencyKey is the key the receiver should deduplicate on.
	IdempotencyKey string
	// Epoch is the lease epoch the event was delivered under.
	Epoch int64
	// Body is the change event as Extended JSON (canonical or relaxed).
	Body []byte
}

// Fault is a failure a Receiver can inject.
type Fault int

const (
	// FaultRetryable makes a delivery fail in a way the sink must report as
	// retryable (an HTTP 500, a write error, ...).
	FaultRetryable Fault = iota + 1
	// FaultPermanent makes a delivery fail in a way the sink must report as
	// permanent (an HTTP 400, ...).
	FaultPermanent
)

// Receiver is the destination side of a sink under test.
type Receiver interface {
	// Received returns every accepted delivery in arrival order,
	// duplicates included. It is safe for concurrent use.
	Received() []Delivery
	// Fail makes every delivery of the event with that id fail with f,
	// until Heal; it reports false if the receiver cannot inject f.
	Fail(eventID string, f Fault) bool
	// Heal removes every injected fault.
	Heal()
	// NewSink returns another, unconnected sink instance delivering to this
	// receiver, as a restarted process would create.
	NewSink(t *testing.T) sink.Sink
}

// Run runs the suite. newSink returns an unconnected sink and its receiver;
// it is called once per case and should register its own cleanup.
func Run(t *testing.T, newSink func(t *testing.T) (sink.Sink, Receiver)) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s sink.Sink, r Receiver)
	}{
		{"DeliveryCarriesIDKeyEpochAndEvent", testDeliveryFields},
		{"NotConnected", testNotConnected},
		{"Restart", testRestart},
		{"PartialFailure", testPartialFailure},
		{"PermanentFailure", testPermanentFailure},
		{"PerKeyOrder", testPerKeyOrder},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, r := newSink(t)
			c.fn(t, s, r)
		})
	}
}
