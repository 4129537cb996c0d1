'use strict';
// Telling a TTL expiry from an application delete.
//
// MongoDB puts no TTL marker on a change event: the TTL monitor's removals
// are ordinary deletes (no lsid/txnNumber, no fullDocument). What tells
// them apart is the pre-image (the document as it was before the delete,
// with `full_document_before_change: required` in Ferry and pre-images
// enabled on the collection) read against the TTL index:
//   - "application", certain: the delete ran inside a transaction (lsid or
//     txnNumber on the event), or the pre-image had no date in the TTL
//     field (the TTL monitor never deletes such a document), or the
//     document had not expired yet when it was deleted (its date plus
//     expireAfterSeconds is after the event's wallTime);
//   - "ttl": the document had expired when it was deleted. This is what a
//     TTL expiry looks like, but an application delete of an already
//     expired document (before the monitor, which runs every 60 s, got to
//     it) looks the same: the helper cannot tell those apart, and nothing
//     on the event can;
//   - "unknown": no pre-image (enable pre-images, ask Ferry for
//     full_document_before_change), or no time on the event.

/**
 * classifyDelete returns {cause: 'ttl'|'application'|'unknown', reason} for a
 * delete event. ttl is the TTL index ({field, expireAfterSeconds}, as
 * readTtlIndex returns it), or a list of them.
 */
function classifyDelete(event, ttl) {
  if (!event || event.operationType !== 'delete') return { cause: 'application', reason: `not a delete (${event && event.operationType})` };
  if (event.lsid !== undefined || event.txnNumber !== undefined) return { cause: 'application', reason: 'deleted inside a transaction' };
  const pre = event.fullDocumentBeforeChange;
  if (!pre) return { cause: 'unknown', reason: 'no pre-image: enable changeStreamPreAndPostImages and full_document_before_change' };
  const at = eventTime(event);
  if (!at) return { cause: 'unknown', reason: 'the event has no wallTime or clusterTime' };
  const indexes = Array.isArray(ttl) ? ttl : [ttl];
  let dated = false;
  for (const ix of indexes) {
    if (!ix || typeof ix.field !== 'string') throw new TypeError('classifyDelete: ttl must be {field, expireAfterSeconds} (readTtlIndex)');
    const d = earliestDate(getPath(pre, ix.field));
    if (!d) continue;
    dated = true;
    if (d.getTime() + (ix.expireAfterSeconds || 0) * 1000 <= at.getTime()) {
      return { cause: 'ttl', reason: `${ix.field} + ${ix.expireAfterSeconds || 0}s had passed when it was deleted` };
    }
  }
  if (!dated) return { cause: 'application', reason: 'the TTL field held no date, so the TTL monitor would not delete it' };
  return { cause: 'application', reason: 'deleted before it expired' };
}

function eventTime(event) {
  if (event.wallTime instanceof Date) return event.wallTime;
  const ct = event.clusterTime;
  if (ct && typeof ct.getHighBits === 'function') return new Date(ct.getHighBits() * 1000);
  return null;
}

// earliestDate: the TTL monitor uses the earliest date of an array.
function earliestDate(v) {
  if (v instanceof Date) return v;
  if (Array.isArray(v)) {
    let min = null;
    for (const x of v) if (x instanceof Date && (!min || x < min)) min = x;
    return min;
  }
  return null;
}

function getPath(doc, path) {
  let v = doc;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[part];
  }
  return v;
}

/** readTtlIndex returns the TTL indexes of a collection as
 * [{field, expireAfterSeconds, name}] (empty when it has none). */
async function readTtlIndex(collection) {
  const out = [];
  for (const ix of await collection.listIndexes().toArray()) {
    if (ix.expireAfterSeconds === undefined) continue;
    const fields = Object.keys(ix.key || {});
    if (fields.length === 1) out.push({ field: fields[0], expireAfterSeconds: Number(ix.expireAfterSeconds), name: ix.name });
  }
  return out;
}

/**
 * prepareTtlSource makes a collection ready for Ferry's TTL expiries: it
 * creates the collection if needed, a TTL index on field (expireAfterSeconds,
 * default 0: expire at the field's date) and turns on pre-images
 * (changeStreamPreAndPostImages), which full_document_before_change needs.
 * It needs the collMod and createIndex privileges on the source database.
 */
async function prepareTtlSource(db, name, { field, expireAfterSeconds = 0 } = {}) {
  if (typeof field !== 'string' || field === '') throw new TypeError('prepareTtlSource: field (the date field documents expire by) is required');
  const exists = (await db.listCollections({ name }, { nameOnly: true }).toArray()).length > 0;
  if (!exists) await db.createCollection(name, { changeStreamPreAndPostImages: { enabled: true } });
  else await db.command({ collMod: name, changeStreamPreAndPostImages: { enabled: true } });
  await db.collection(name).createIndex({ [field]: 1 }, { expireAfterSeconds });
  return { field, expireAfterSeconds };
}

module.exports = { classifyDelete, readTtlIndex, prepareTtlSource };
