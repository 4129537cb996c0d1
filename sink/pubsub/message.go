package pubsub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	gps "cloud.google.com/go/pubsub/v2"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/sink"
)

// Attribute names set on every message.
const (
	// EventIDAttribute carries the event id (ferry.Event.ID), the
	// idempotency key receivers de-duplicate on.
	EventIDAttribute = "ferry-event-id"
	// EpochAttribute carries the lease epoch the event was published under.
	EpochAttribute = "ferry-epoch"
	// OperationAttribute carries the event's operationType.
	OperationAttribute = "ferry-operation"
	// NamespaceAttribute carries the event's namespace, "db.coll".
	NamespaceAttribute = "ferry-namespace"
	// StreamAttribute carries the stream's name (with Stream).
	StreamAttribute = "ferry-stream"
	// TraceParentAttribute carries the W3C traceparent of the delivery's
	// span (ferry.DeliveryTraceParent of the event), when tracing is
	// on.
	TraceParentAttribute = "traceparent"
)

// MaxOrderingKeyBytes is Pub/Sub's limit on an ordering key; longer keys
// are replaced by their sha256.
const MaxOrderingKeyBytes = 1024

// maxAttributeValueBytes is Pub/Sub's limit on an attribute value.
const maxAttributeValueBytes = 1024

// message builds the message of an event.
func (s *Sink) message(ctx context.Context, ev *ferry.Event) (*gps.Message, error) {
	data, err := extjson.Marshal(ev.Raw, s.cfg.canonical)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("pubsub: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	key, err := OrderingKey(ev)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("pubsub: event %s: rendering the documentKey: %w", ev.ID(), err))
	}
	attrs := map[string]string{
		EventIDAttribute: ev.ID(),
		EpochAttribute:   strconv.FormatInt(ev.Epoch, 10),
	}
	if op := ev.OperationType; op != "" && len(op) <= maxAttributeValueBytes {
		attrs[OperationAttribute] = op
	}
	if ns := ev.Namespace.String(); ns != "" && len(ns) <= maxAttributeValueBytes {
		attrs[NamespaceAttribute] = ns
	}
	if st := s.cfg.stream; st != "" && len(st) <= maxAttributeValueBytes {
		attrs[StreamAttribute] = st
	}
	if tp := ferry.DeliveryTraceParent(ctx, ev); tp != "" {
		attrs[TraceParentAttribute] = tp
	}
	return &gps.Message{Data: data, Attributes: attrs, OrderingKey: key}, nil
}

// OrderingKey returns the ordering key of an event: its documentKey as
// canonical Extended JSON, or its namespace when it has none, replaced by
// "sha256:<hex>" of itself when longer than MaxOrderingKeyBytes.
func OrderingKey(ev *ferry.Event) (string, error) {
	var key string
	if len(ev.DocumentKey) == 0 {
		key = ev.Namespace.String()
	} else {
		b, err := extjson.Marshal(ev.DocumentKey, true)
		if err != nil {
			return "", err
		}
		key = string(b)
	}
	if len(key) > MaxOrderingKeyBytes {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return key, nil
}
