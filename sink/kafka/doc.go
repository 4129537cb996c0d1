// Package kafka is a sink that produces change events to an Apache Kafka
// topic with franz-go.
//
//	s, err := kafka.New([]string{"localhost:9092"}, kafka.Topic("ferry.events"))
//	if err := s.Connect(ctx); err != nil { ... }
//	defer s.Close(ctx)
//
// Each event becomes one record:
//
//	key:    the event's documentKey as canonical Extended JSON, e.g.
//	        {"_id":{"$oid":"..."}} (the namespace, "db.coll", for events
//	        without one: drop, rename, ...)
//	value:  the change event as Extended JSON (relaxed, or canonical with
//	        Canonical)
//	headers:
//	        ferry-event-id: <event id>   (ferry.Event.ID, the idempotency key)
//	        ferry-epoch:    <lease epoch>
//	        ferry-operation: <operationType> (insert, update, delete, ...; "backfill" for a snapshot row)
//	        traceparent:    <W3C traceparent> (only when tracing is on: the delivery's span)
//
// The key is rendered canonically whatever Canonical says, so the partition
// of a document never changes with the value format.
//
// # Guarantees
//
//   - Done means acknowledged by every in-sync replica: the client requires
//     acks=all (kgo.AllISRAcks) and an event counts as delivered only once
//     the broker acknowledged its record.
//   - Order per document: the default partitioner hashes the key (murmur2,
//     as the Java client), so all events of a document go to one partition.
//     Write produces the batch in batch order and the idempotent producer
//     (franz-go's default, kept on) writes each partition's records in
//     produce order without gaps or reordering across its internal retries.
//     An event that fails before it is produced (it cannot be rendered)
//     stops the later events of the same document in the batch, which fail
//     with sink.ErrSkipped (retryable). An event the broker rejects may be
//     followed by a later record of the same document that was already in
//     flight; that one is reported as it really went (delivered or not).
//   - No duplicates from the client's own retries: the idempotent producer
//     numbers its records, and the broker drops a retried batch it already
//     wrote. A record reported failed after Timeout may still be written
//     later (see Failures), so ferry's retry can duplicate it even within
//     one session.
//   - Duplicates across sessions are possible: a replay after a crash
//     between the broker's ack and ferry's checkpoint, or after a lease
//     takeover, comes from a new producer id, which the broker cannot tie to
//     the first write, so the topic holds such events twice (with the same
//     ferry-event-id, key and value; ferry-epoch is the new owner's after a
//     takeover). Receivers de-duplicate on the
//     ferry-event-id header (keep the ids they applied, in the same
//     transaction as the effect or as a unique key); ferry-epoch tells an
//     older lease holder's write from a newer one's.
//   - Failures: a record above the batch limit (kerr.MessageTooLarge),
//     a rejected record (InvalidRecord, CorruptMessage, RecordListTooLarge),
//     missing write permission on the topic (TopicAuthorizationFailed) and
//     an invalid topic name (InvalidTopicException) are permanent: the event
//     goes to ferry's dead-letter policy. Timeouts (Timeout per produce, 10s
//     by default), unreachable brokers, a closed client and every error
//     kerr.IsRetriable reports (leader elections, not enough replicas, an
//     unknown topic or partition, ...) are retryable, and so is anything
//     unrecognised. A record still unacknowledged after Timeout (plus 1s
//     grace) is reported as failed (retryable) although the client may
//     still deliver it: the replay is then a duplicate, dropped by the
//     receiver like any other.
//
// # Why not Kafka transactions
//
// Kafka's exactly-once producer (a transactional.id and
// read_committed consumers) makes a set of writes atomic and fences an older
// producer instance. It gives exactly-once only when the input's position is
// committed in the same transaction (as Kafka Streams commits consumer
// offsets with its output). Ferry's input position is a MongoDB resume
// token, checkpointed in Ferry's state store, outside Kafka: a crash after
// the transaction commits and before the checkpoint still replays the
// events, and the replay, in a new transaction, is committed again. Getting
// exactly-once would mean moving the checkpoint into Kafka (a compacted
// topic written in the same transaction) and reading it back on start,
// which ties Ferry's state to one sink. Transactions would also cost a
// coordinator round trip per commit, hold back read_committed consumers
// until each commit, and need a stable transactional.id per lease holder.
// Ferry therefore uses the idempotent producer (no duplicates within a
// session, ordered partitions) and leaves cross-session duplicates to the
// receiver, keyed by ferry-event-id, as for every other sink.
//
// # Options
//
// New validates the seed brokers and every option once (see package sink,
// "Options"); its error matches ErrInvalidOption and lists every problem.
// Kafka's topic rules and the broker address rules are exported for
// configuration files: CheckTopic and CheckBroker.
package kafka
