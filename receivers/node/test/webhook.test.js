'use strict';
// The webhook path on node:http against the emulator (or
// FERRY_TEST_MONGODB_URI): each event applied once, keyed by (stream, id),
// its effect and record committed together.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { Long, ObjectId } = require('mongodb');
const { ferryReceiver, PermanentError } = require('..');
const { useMongo, uniqueDb } = require('./support/mongotest');
const { SECRET, eventId, changeEvent, signed, post } = require('./support/deliver');

const mongo = useMongo();

// serve starts a node:http server on handler and returns its URL.
async function serve(t, handler) {
  const server = http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${server.address().port}/ferry/sessions`;
}

// setup returns a receiver on a fresh database and an effect that records
// one document per application in its "effects" collection.
function setup(opts = {}) {
  const db = uniqueDb();
  const receiver = ferryReceiver({ secret: SECRET, mongo: mongo.client, db, ...opts });
  const effects = mongo.client.db(db).collection('effects');
  const effect = async (event, ctx) => {
    await effects.insertOne({ stream: ctx.stream, id: ctx.id, op: event.operationType }, { session: ctx.session });
  };
  return { receiver, effects, effect, db };
}

test('an event is applied once; a replay is answered 200 as a duplicate', async (t) => {
  const { receiver, effects, effect } = setup();
  const url = await serve(t, receiver.handler(effect));
  const id = eventId('once');
  const d = signed(id, changeEvent('delete', { _id: 'u1' }));
  const first = await post(url, d);
  assert.equal(first.status, 200);
  assert.equal(first.json.outcome, 'applied');
  for (let i = 0; i < 3; i++) {
    const again = await post(url, signed(id, changeEvent('delete', { _id: 'u1' })));
    assert.equal(again.status, 200);
    assert.equal(again.json.outcome, 'duplicate');
  }
  assert.equal(await effects.countDocuments({ id }), 1);
  const rec = await receiver.records.findOne({ _id: { stream: 'sessions', id } });
  assert.equal(rec.state, 'done');
  assert.ok(rec.expireAt > rec.appliedAt, 'a record expires after it was applied');
});

test('one event delivered by two streams is applied once per stream', async (t) => {
  const { receiver, effects, effect } = setup();
  const url = await serve(t, receiver.handler(effect));
  const id = eventId('two-streams');
  const ev = changeEvent('delete', { _id: 'u2' });
  assert.equal((await post(url, signed(id, ev, { stream: 'audit' }))).json.outcome, 'applied');
  assert.equal((await post(url, signed(id, ev, { stream: 'billing' }))).json.outcome, 'applied');
  assert.equal((await post(url, signed(id, ev, { stream: 'billing' }))).json.outcome, 'duplicate');
  assert.deepEqual((await effects.find({ id }).toArray()).map((e) => e.stream).sort(), ['audit', 'billing']);
});

test('a failed effect commits nothing; the retry applies it', async (t) => {
  const { receiver, effects } = setup();
  let fail = true;
  const url = await serve(
    t,
    receiver.handler(async (event, ctx) => {
      await effects.insertOne({ id: ctx.id }, { session: ctx.session });
      if (fail) throw new Error('downstream hiccup');
    }),
  );
  const id = eventId('retry');
  const r1 = await post(url, signed(id, changeEvent('delete', { _id: 'u3' })));
  assert.equal(r1.status, 500, 'retryable for Ferry');
  assert.equal(await effects.countDocuments({ id }), 0, 'the effect rolled back with the record');
  assert.equal(await receiver.records.countDocuments({}), 0);
  fail = false;
  const r2 = await post(url, signed(id, changeEvent('delete', { _id: 'u3' })));
  assert.equal(r2.json.outcome, 'applied');
  assert.equal(await effects.countDocuments({ id }), 1);
});

test('a PermanentError is answered 422 (dead-lettered by Ferry) and records nothing', async (t) => {
  const { receiver } = setup();
  const url = await serve(
    t,
    receiver.handler(async () => {
      throw new PermanentError('no such customer');
    }),
  );
  const r = await post(url, signed(eventId('perm'), changeEvent('insert', { _id: 'p' })));
  assert.equal(r.status, 422);
  assert.match(r.json.error, /no such customer/);
  assert.equal(await receiver.records.countDocuments({}), 0);
});

test('bad signatures, stale timestamps and other methods are refused before anything runs', async (t) => {
  const { receiver } = setup();
  let calls = 0;
  const url = await serve(
    t,
    receiver.handler(async () => {
      calls++;
    }),
  );
  const id = eventId('sig');
  const ev = changeEvent('insert', { _id: 's' });
  const wrongKey = signed(id, ev, { secret: 'whsec_' + Buffer.from('another-secret-of-enough-bytes!!').toString('base64') });
  assert.equal((await post(url, wrongKey)).status, 401);
  const tampered = signed(id, ev);
  tampered.body = tampered.body.replace('"s"', '"t"');
  assert.equal((await post(url, tampered)).status, 401);
  const stale = signed(id, ev, { timestamp: new Date(Date.now() - 10 * 60 * 1000) });
  assert.equal((await post(url, stale)).status, 401);
  const get = await fetch(url);
  assert.equal(get.status, 405);
  assert.equal(calls, 0);
});

test('events are read with EJSON: Dates, ObjectIds and 64-bit integers exact', async (t) => {
  const { receiver } = setup();
  let seen;
  const url = await serve(
    t,
    receiver.handler(async (event) => {
      seen = event;
    }),
  );
  const oid = new ObjectId();
  const body = JSON.stringify({
    _id: { _data: '82AB' },
    operationType: 'delete',
    wallTime: { $date: { $numberLong: '1700000000123' } },
    ns: { db: 'app', coll: 'sessions' },
    documentKey: { _id: { $oid: oid.toHexString() } },
    fullDocumentBeforeChange: {
      _id: { $oid: oid.toHexString() },
      expireAt: { $date: { $numberLong: '1700000000000' } },
      big: { $numberLong: '9007199254740993' },
      small: { $numberLong: '42' },
      n: { $numberInt: '7' },
      price: { $numberDecimal: '19.99' },
    },
  });
  const r = await post(url, signed(eventId('ejson'), body));
  assert.equal(r.status, 200);
  const pre = seen.fullDocumentBeforeChange;
  assert.ok(pre.expireAt instanceof Date && pre.expireAt.getTime() === 1700000000000);
  assert.ok(seen.documentKey._id instanceof ObjectId && seen.documentKey._id.equals(oid));
  assert.ok(pre.big instanceof Long, 'an int64 past 2^53 stays a Long');
  assert.equal(pre.big.toString(), '9007199254740993');
  assert.equal(pre.small, 42);
  assert.equal(pre.n, 7);
  assert.equal(pre.price.toString(), '19.99');
  assert.ok(seen.wallTime instanceof Date);
});

test('a snapshot row (Ferry-Operation: backfill) arrives as a backfill event of its document', async (t) => {
  const { receiver, effects } = setup();
  let seen;
  const url = await serve(
    t,
    receiver.handler(async (event, ctx) => {
      seen = event;
      await effects.insertOne({ id: ctx.id }, { session: ctx.session });
    }),
  );
  const d = signed(eventId('row'), { _id: 'doc-1', status: 'active' }, { operation: 'backfill' });
  d.headers['ferry-namespace'] = 'app.sessions';
  assert.equal((await post(url, d)).status, 200);
  assert.equal(seen.operationType, 'backfill');
  assert.deepEqual(seen.documentKey, { _id: 'doc-1' });
  assert.equal(seen.fullDocument.status, 'active');
  assert.deepEqual(seen.ns, { db: 'app', coll: 'sessions' });
});

test('a route bound to a stream refuses another stream\'s deliveries (400, dead-lettered, not applied)', async (t) => {
  const { receiver, effects, effect } = setup();
  const url = await serve(t, receiver.handler(effect, { stream: 'sessions' }));
  const r = await post(url, signed(eventId('misrouted'), changeEvent('delete', { _id: 'm' }), { stream: 'orders' }));
  assert.equal(r.status, 400);
  assert.match(r.json.error, /sink\.webhook\.url/);
  assert.equal(await effects.countDocuments({}), 0);
});

test('without a Ferry-Stream header the request path keys the record', async (t) => {
  const { receiver } = setup();
  const url = await serve(t, receiver.handler(async () => {}));
  const id = eventId('path');
  assert.equal((await post(url + '?x=1', signed(id, changeEvent('delete', { _id: 'q' }), { stream: null }))).status, 200);
  assert.ok(await receiver.records.findOne({ _id: { stream: '/ferry/sessions', id } }));
});

test('the records collection has a TTL index, so records expire after the retention', async () => {
  const { receiver } = setup({ retentionSeconds: 3600 });
  await receiver.ready();
  const ix = (await receiver.records.listIndexes().toArray()).find((i) => i.key && i.key.expireAt === 1);
  assert.ok(ix, 'a TTL index on expireAt');
  assert.equal(ix.expireAfterSeconds, 0);
});

test('bad options are refused, each named with its fix', () => {
  assert.throws(() => ferryReceiver({}), (err) => /mongo: a MongoClient is required/.test(err.message) && /db: /.test(err.message));
  assert.throws(() => ferryReceiver({ mongo: mongo.client, db: 'x', secret: 'plain' }), /whsec_/);
  assert.throws(() => ferryReceiver({ mongo: mongo.client, db: 'x', retentionSeconds: 60 }), /retentionSeconds: .*7 days/);
  assert.throws(() => ferryReceiver({ mongo: mongo.client, db: 'x' }).handler(async () => {}), /needs the webhook secret/);
});
