'use strict';
// Deliveries as Ferry's webhook sink makes them: Standard Webhooks headers
// signed with the secret, Ferry's own headers, canonical Extended JSON.

const crypto = require('node:crypto');
const { Webhook } = require('standardwebhooks');
const { EJSON } = require('mongodb').BSON;

const SECRET = 'whsec_' + Buffer.from('ferry-receiver-tests-0123456789abcdef').toString('base64');

/** eventId is what Ferry uses: hex sha256 of the resume token's bytes;
 * here of any unique string. */
function eventId(seed) {
  return crypto.createHash('sha256').update(String(seed)).digest('hex');
}

/** changeEvent is a change event for a document. */
function changeEvent(op, doc, extra = {}) {
  return {
    _id: { _data: crypto.randomBytes(16).toString('hex').toUpperCase() },
    operationType: op,
    clusterTime: { $timestamp: { t: Math.floor(Date.now() / 1000), i: 1 } },
    wallTime: { $date: new Date().toISOString() },
    ns: { db: 'app', coll: 'sessions' },
    documentKey: { _id: doc._id },
    ...(op === 'delete' ? {} : { fullDocument: doc }),
    ...extra,
  };
}

/** signed returns {headers, body} of a delivery of event (an object written
 * as canonical Extended JSON, or a string) with id. */
function signed(id, event, { stream = 'sessions', epoch = 1, secret = SECRET, operation, timestamp = new Date() } = {}) {
  const body = typeof event === 'string' ? event : EJSON.stringify(EJSON.deserialize(event, { relaxed: false }), { relaxed: false });
  const wh = new Webhook(secret);
  const headers = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': wh.sign(id, timestamp, body),
    'idempotency-key': id,
    'ferry-epoch': String(epoch),
    'ferry-operation': operation || (typeof event === 'object' ? event.operationType : undefined),
  };
  if (stream !== null) headers['ferry-stream'] = stream;
  if (!headers['ferry-operation']) delete headers['ferry-operation'];
  return { headers, body };
}

async function post(url, d) {
  const res = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, json, text };
}

module.exports = { SECRET, eventId, changeEvent, signed, post };
