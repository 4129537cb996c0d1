'use strict';
// The idempotency record: one document per (stream, event id) applied, in a
// collection every instance of the service shares.
//
// A record is what makes a replay harmless, so it must be (1) shared: Ferry
// replays an event to whichever instance its new owner delivers to, not to
// the one that applied it; and (2) written with the effect: if the two can
// disagree, a crash between them either loses the effect or applies it
// twice. Records in "done" state come from the transaction path (committed
// with the effect) or from the claim path (marked after the effect);
// "claimed" is a claim in progress (claim path only).
//
// Records expire through a TTL index on expireAt, set to the record's
// time plus the retention. The retention must cover every replay Ferry
// can make: at least Ferry's ledger retention (7 days), which bounds how
// long Ferry itself remembers an applied event.

/** Default collection of the records. */
const DEFAULT_COLLECTION = 'ferry_receipts';
/** Default retention: Ferry's ledger retention (7 days) plus one day. */
const DEFAULT_RETENTION_SECONDS = 8 * 24 * 3600;
/** Name of the TTL index on expireAt. */
const TTL_INDEX = 'ferry_receipts_expireAt';

/** key is a record's _id: the stream and the event id (a change has the
 * same event id in every stream that sees it, so the id alone is not
 * enough). */
function key(stream, id) {
  return { stream, id };
}

/**
 * ensureRecords creates the records' TTL index (and so the collection)
 * unless it exists. It must run before the first transaction: a transaction
 * that creates its collection conflicts with every other one that does.
 */
async function ensureRecords(collection) {
  await collection.createIndex({ expireAt: 1 }, { name: TTL_INDEX, expireAfterSeconds: 0 });
}

module.exports = { key, ensureRecords, DEFAULT_COLLECTION, DEFAULT_RETENTION_SECONDS, TTL_INDEX };
