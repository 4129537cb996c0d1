// Package natsjs is a sink that publishes change events to NATS JetStream.
//
//	s, err := natsjs.New("nats://localhost:4222", natsjs.Subject("ferry.{db}.{coll}.{op}"))
//	if err := s.Connect(ctx); err != nil { ... }
//	defer s.Close(ctx)
//
// Each event becomes one message: the subject is the template with {db},
// {coll} and {op} filled in from the event's namespace and operation type
// (characters a subject token cannot hold — '.', '*', '>', whitespace and
// control characters — become '_', and an empty value becomes "_", so
// "a.b" and "a_b" share a subject: filter on the body's ns when that
// matters); the payload is the change event as Extended JSON (relaxed, or
// canonical with Canonical); the headers are
//
//	Nats-Msg-Id: <event id>      (ferry.Event.ID, the idempotency key)
//	Ferry-Epoch: <lease epoch>
//	traceparent: <W3C traceparent> (only when tracing is on: the delivery's span)
//
// # Guarantees
//
//   - Done means acknowledged by JetStream: an event counts as delivered
//     only once the stream's publish ack arrived, i.e. the message is
//     stored (replicated, for a replicated stream). An ack that says
//     Duplicate counts as delivered too: the stream already holds it.
//   - Replays are dropped by the broker: JetStream drops a message whose
//     Nats-Msg-Id it saw within the stream's duplicate window
//     (StreamConfig.Duplicates, 2 minutes by default). A replay after a
//     crash between the ack and ferry's checkpoint, or after a lease
//     takeover, therefore leaves no duplicate in the stream as long as it
//     comes within the window. Set the window above the longest replay you
//     expect (checkpoint interval plus restart or takeover time).
//   - Order per document: Write puts a batch in flight at once, but a
//     document's event is published only after the ack of its event before
//     it (waves: the first event of every document, then the next ones),
//     so a stream holds the events of a document in change order and a
//     batch of distinct documents costs one round trip; once one fails, the
//     later events of the same document in the batch are not attempted
//     (sink.ErrSkipped, retryable).
//   - Failures: no stream bound to the subject, an invalid subject or a
//     message above the server's max payload are permanent (the event goes
//     to ferry's dead-letter policy); timeouts (Timeout per publish until
//     its ack, 10s by default), no responders while a stream exists, connection loss and
//     other server errors are retryable.
//
// # Subjects and credentials
//
// The template rules (package internal/natssubject) are shared with package
// config, so `ferry validate` rejects what Subject would: placeholders other
// than {db}, {coll} and {op}, unbalanced braces, the wildcards '*' and '>',
// whitespace or control characters, and empty tokens.
//
// Credentials in the server URL (nats://user:password@host,
// nats://token@host) never appear in errors: they name the servers as
// scheme://host:port, and New refuses a URL that does not parse without
// repeating it. Other credentials (NKeys, creds files, TLS) go through
// NATSOptions.
//
// # Idempotent consumers beyond the window
//
// The duplicate window is bounded, so a replay older than it (a consumer
// down for longer than the window, a restore of an old checkpoint) is
// stored again. JetStream consumers are at-least-once as well (a message
// not acked in time is redelivered). A consumer that must apply each change
// once keeps the Nats-Msg-Id of what it applied (in the same transaction as
// the effect, or as a unique key) and skips ids it has seen; Ferry-Epoch
// tells an older lease holder's write from a newer one's.
//
// # Options
//
// New validates the server URLs and every option once (see package sink,
// "Options"); its error matches ErrInvalidOption and lists every problem,
// without the URLs' credentials.
package natsjs
