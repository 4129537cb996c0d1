'use strict';
// Change events as the official driver would hand them over.
//
// Ferry's webhook body is the change event as canonical Extended JSON
// (`{"$date": ...}`, `{"$numberLong": "..."}`), which JSON.parse turns into
// plain objects, and relaxed Extended JSON rounds 64-bit integers past 2^53.
// parseEvent reads it with the bson package's EJSON (canonical, so no value
// is rounded) and then through BSON, so each value comes out as the
// `mongodb` driver returns it from a find: numbers for int32 and double, a
// number for an int64 that fits exactly and a Long for one that does not
// (or a bigint for every int64 with useBigInt64), Date, ObjectId,
// Decimal128, Binary, Timestamp.

const { BSON } = require('mongodb');
const { EJSON } = BSON;
const { PermanentError } = require('./errors');

/** Operation of a document a snapshot (backfill) scan delivers. */
const BACKFILL = 'backfill';

/**
 * parseEvent returns the change event of a delivery body (a Buffer or
 * string of Extended JSON). operation is the Ferry-Operation header (or the
 * ferry-operation attribute), when there is one: for a snapshot row
 * ("backfill") the body is the bare document, which parseEvent wraps as
 * {operationType: "backfill", ns, documentKey: {_id}, fullDocument}.
 * A body that is not an Extended JSON object throws a PermanentError.
 */
function parseEvent(body, { operation, namespace, useBigInt64 = false } = {}) {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : String(body);
  let doc;
  try {
    // Canonical: every number keeps its BSON type, so nothing is rounded
    // before the round trip below decides how to present it.
    doc = EJSON.parse(text, { relaxed: false });
  } catch (err) {
    throw new PermanentError(`the body is not Extended JSON: ${err.message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new PermanentError('the body is not an Extended JSON object');
  }
  const event = BSON.deserialize(BSON.serialize(doc), { useBigInt64 });
  if (operation === BACKFILL) {
    const ns = splitNamespace(namespace);
    return { operationType: BACKFILL, ns, documentKey: { _id: event._id }, fullDocument: event };
  }
  return event;
}

function splitNamespace(ns) {
  if (!ns) return undefined;
  const dot = ns.indexOf('.');
  return dot < 0 ? { db: ns } : { db: ns.slice(0, dot), coll: ns.slice(dot + 1) };
}

module.exports = { parseEvent, BACKFILL };
