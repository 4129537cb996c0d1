// Package pubsub is a sink that publishes change events to a Google Cloud
// Pub/Sub topic with cloud.google.com/go/pubsub/v2.
//
//	s, err := pubsub.New("my-project", "ferry-events")
//	if err := s.Connect(ctx); err != nil { ... }
//	defer s.Close(ctx)
//
// Credentials come from Application Default Credentials (the service
// account of a Cloud Run service or GKE workload, or
// GOOGLE_APPLICATION_CREDENTIALS); ClientOptions passes anything else.
// Emulator (or the PUBSUB_EMULATOR_HOST environment variable) connects to
// the Pub/Sub emulator or pstest without TLS and credentials.
//
// Each event becomes one message:
//
//	data:         the change event as Extended JSON (relaxed, or canonical with Canonical)
//	ordering key: the event's documentKey as canonical Extended JSON, e.g.
//	              {"_id":{"$oid":"..."}}; the namespace ("db.coll") for events without
//	              one (drop, rename, ...); "sha256:<hex>" of that when it is longer than
//	              Pub/Sub's 1,024-byte limit
//	attributes:
//	              ferry-event-id:  <event id>      (ferry.Event.ID, the idempotency key)
//	              ferry-epoch:     <lease epoch>
//	              ferry-operation: <operationType> (insert, update, delete, ...)
//	              ferry-namespace: <db.coll>
//	              ferry-stream:    <stream name>   (with Stream; the daemon sets it)
//	              traceparent:     <W3C traceparent> (only when tracing is on: the delivery's span)
//
// The attributes let subscriptions filter without reading the data, e.g.
// `attributes.ferry-operation = "delete"`.
//
// # Guarantees
//
//   - Done means acknowledged by Pub/Sub: an event counts as delivered only
//     once the Publish call returned its message id, i.e. Pub/Sub stored it.
//   - Order per document: the publisher has message ordering on and every
//     message carries its document's ordering key, so Pub/Sub delivers a
//     document's changes in publish order to subscriptions with message
//     ordering enabled (publish from one region; Pub/Sub orders per key
//     within a region). Write publishes the batch in batch order. When a
//     publish of a key fails, the client pauses that key and fails its later
//     messages (reported retryable, as sink.ErrSkipped); Write resumes the
//     key before it returns, so ferry's retry publishes them again in order.
//   - Replays are not dropped by Pub/Sub: it has no publish-side
//     de-duplication. A replay after a crash between Pub/Sub's ack and
//     ferry's checkpoint, after a lease takeover, or after a publish the
//     client retried internally (its ack was lost) is stored as a second
//     message with a new message id and the same ferry-event-id, data and
//     ordering key (ferry-epoch is the new owner's after a takeover). That is within Pub/Sub's at-least-once
//     contract; receivers drop such duplicates by ferry-event-id.
//   - Failures: a message above Pub/Sub's request limit
//     (pubsub.ErrOversizedMessage), a request Pub/Sub rejects as invalid
//     (InvalidArgument) and missing permission to publish (PermissionDenied)
//     are permanent: the event goes to ferry's dead-letter policy, from
//     which `ferry dlq replay` re-delivers it once the cause is fixed.
//     Unavailable, DeadlineExceeded, ResourceExhausted, Internal, Aborted,
//     Unknown and Canceled are retried inside the client until Timeout (10s
//     by default) and then reported retryable; a missing topic (NotFound)
//     and anything unrecognised are retryable too. A publish still
//     unacknowledged after Timeout (plus 1s grace) is reported retryable
//     although the client may still deliver it: the replay is then a
//     duplicate, dropped by the receiver like any other.
//
// # Receivers: exactly-once delivery plus the event id
//
// A subscription with exactly-once delivery enabled guarantees that a
// message (one message id) is not redelivered after its ack succeeded,
// within the subscription's region; use AckWithResult and apply the effect
// only for acks that report success, or make the effect idempotent. It does
// not merge two messages that carry the same event: the duplicates above
// have different message ids. A receiver that must apply each change once
// therefore also keeps the ferry-event-id values it applied (a unique key
// in its database, written in the same transaction as the effect) and
// skips ids it has seen. Together: exactly-once delivery removes
// redeliveries of one message, the event id removes replays of one change,
// and ordering keys keep each document's changes in order. ferry-epoch
// tells an older lease holder's publish from a newer one's.
//
// # Options
//
// New validates the project, the topic and every option once (see package
// sink, "Options"); its error matches ErrInvalidOption and lists every
// problem. Pub/Sub's naming rules are exported for configuration files:
// CheckProject and CheckTopic.
package pubsub
