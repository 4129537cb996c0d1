// Package ledger records which change events have been applied, for Ferry's
// idempotent and transactional delivery modes. An event is identified by
// its event id (ferry.Event.ID(): the hex sha256 of its resume token), the
// same whoever reads it, through whatever filter, however often.
//
// # Layout
//
// One document per applied event, in the collection "ledger" of the state
// database by default:
//
//	{_id: "<stream>/<event id>", stream, event: "<event id>",
//	 partition: Int64, epoch: Int64, appliedAt: Date}
//
// appliedAt is the server's clock ($$NOW) when the entry was first written.
// Neither the event's document nor its resume token is stored. New ensures a
// TTL index on appliedAt (expireAfterSeconds = Retention, 7 days by
// default): the server's TTL monitor prunes the ledger by age, at its own
// pace (every 60 s on a real server), so an entry may outlive its retention
// by that much. TTL deletes are ordinary deletes: a change stream watching
// the state database sees them.
//
// # Idempotent mode
//
// The consumer asks Seen before the effect, skips the event if it was
// seen, applies the effect otherwise (handing the event id to the sink as
// its idempotency key, and the lease epoch), then calls Record.
//
// Guarantee: no loss, and no duplicate effect for an event whose Record
// completed. The limit: a process that dies after the effect and before
// Record leaves no entry, the event is replayed and the effect happens again
// unless the sink itself de-duplicates by the idempotency key (HTTP
// Idempotency-Key, JetStream Nats-Msg-Id, a unique index, ...). Idempotent
// mode is exactly as strong as the receiver's use of the key.
//
// # Transactional mode
//
// The consumer group inserts the entry with RecordNew in the MongoDB
// transaction (RunTransaction) that also holds the handler's own writes
// (given the transaction's session context). What else that transaction
// holds (the lease check and the fence write), and what does not belong
// to it (the checkpoint), is described once, in package group's doc,
// "Transactional mode". RecordNew returning false means the effect was
// applied by a committed transaction: the consumer makes no effect in this
// one. The transaction commits the entry and the effect together or
// neither, so a crash anywhere replays the event, and the replay finds the
// entry. Two transactions recording the same event concurrently cannot
// both commit: the second fails with WriteConflict, is retried, and finds
// the entry.
//
// Guarantee: exactly-once effects, but only for effects written to the same
// MongoDB cluster (the state store's) inside the transaction with the
// session context. An HTTP call, a message to a broker, or a write through
// another client made from inside the transaction function is not undone by
// an abort and may run once per attempt: for those, idempotent mode is the
// strongest guarantee.
//
// # Batches
//
// A consumer group delivering batches (group.NewBatch) keeps the same
// orders with one round trip per step: SeenMany (one find with $in) before
// the batch's effects, RecordMany (one unordered insertMany, a duplicate key
// meaning "already recorded") after them, of the events whose effect was
// acknowledged. In transactional mode SeenMany, RecordMany of the absent
// events, the lease check and the effects run in one transaction per
// batch. Record, RecordNew and RecordMany write the same entries.
//
// # Options
//
// New takes Options and RunTransaction TxnOptions, in the style of package
// ferry: they only record values; the function validates once, before it
// sends anything, and its error matches ErrInvalid and lists every
// problem, each naming its option ("Retention: must be at least 1s, got
// 500ms").
//
// # Limits of both modes
//
//   - An entry lives Retention after it was applied. Keep Retention longer
//     than the source's oplog window: an event can be replayed only while its
//     token is in the oplog, and the event is older than its entry.
//   - The ledger de-duplicates per stream: the same change consumed by two
//     streams (two names) is two entries and two effects.
//   - Forget makes an event applicable again; it is for tests and operators.
package ledger
