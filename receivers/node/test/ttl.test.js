'use strict';
// Telling a TTL expiry from an application delete, on events a change
// stream really produced (the emulator's TTL monitor runs every 200 ms).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { classifyDelete, readTtlIndex, prepareTtlSource } = require('..');
const { startMongo, uniqueDb } = require('./support/mongotest');

let mongo;
let client;

before(async () => {
  mongo = await startMongo(['-ttl-interval', '200ms']);
  client = new MongoClient(mongo.uri);
  await client.connect();
});

after(async () => {
  await client.close();
  await mongo.stop();
});

test('prepareTtlSource, then TTL expiries and application deletes told apart from their pre-images', async (t) => {
  if (!mongo.emulator) t.skip('needs the emulator: a real server runs its TTL monitor every 60 s');
  const db = client.db(uniqueDb());
  const ttl = await prepareTtlSource(db, 'sessions', { field: 'expireAt', expireAfterSeconds: 0 });
  const coll = db.collection('sessions');
  const indexes = await readTtlIndex(coll);
  assert.deepEqual(indexes.map(({ field, expireAfterSeconds }) => ({ field, expireAfterSeconds })), [{ field: 'expireAt', expireAfterSeconds: 0 }]);
  const info = (await db.listCollections({ name: 'sessions' }).toArray())[0];
  assert.equal(info.options.changeStreamPreAndPostImages.enabled, true, 'pre-images on');

  const stream = coll.watch([{ $match: { operationType: 'delete' } }], { fullDocumentBeforeChange: 'required' });
  await stream.tryNext(); // opened before the writes
  const future = new Date(Date.now() + 3600e3);
  await coll.insertMany([
    { _id: 'app-delete', expireAt: future },
    { _id: 'no-date', expireAt: 'tomorrow' },
    { _id: 'in-txn', expireAt: future },
  ]);
  await coll.deleteOne({ _id: 'app-delete' });
  await coll.deleteOne({ _id: 'no-date' });
  const s = client.startSession();
  await s.withTransaction(async () => {
    await coll.deleteOne({ _id: 'in-txn' }, { session: s });
  });
  await s.endSession();
  await coll.insertOne({ _id: 'expired', expireAt: new Date(Date.now() - 1000) }); // the TTL monitor's

  const got = {};
  while (Object.keys(got).length < 4) {
    const ev = await stream.next();
    got[ev.documentKey._id] = classifyDelete(ev, ttl);
  }
  await stream.close();
  assert.equal(got['expired'].cause, 'ttl', got['expired'].reason);
  assert.equal(got['app-delete'].cause, 'application');
  assert.match(got['app-delete'].reason, /before it expired/);
  assert.equal(got['no-date'].cause, 'application');
  assert.equal(got['in-txn'].cause, 'application');
  assert.match(got['in-txn'].reason, /transaction/);
});

test('classifyDelete: no pre-image is unknown; arrays use the earliest date; expireAfterSeconds counts', () => {
  const at = new Date('2026-01-01T00:01:00Z');
  const base = { operationType: 'delete', wallTime: at, documentKey: { _id: 1 } };
  assert.equal(classifyDelete(base, { field: 'expireAt', expireAfterSeconds: 0 }).cause, 'unknown');
  const arr = { ...base, fullDocumentBeforeChange: { expireAt: [new Date('2027-01-01'), new Date('2025-12-31T23:59:00Z')] } };
  assert.equal(classifyDelete(arr, { field: 'expireAt', expireAfterSeconds: 0 }).cause, 'ttl');
  const created = { ...base, fullDocumentBeforeChange: { createdAt: new Date('2026-01-01T00:00:30Z') } };
  assert.equal(classifyDelete(created, { field: 'createdAt', expireAfterSeconds: 60 }).cause, 'application', 'created 30 s before, expires after 60 s');
  assert.equal(classifyDelete(created, { field: 'createdAt', expireAfterSeconds: 30 }).cause, 'ttl');
  const nested = { ...base, fullDocumentBeforeChange: { meta: { until: new Date('2025-01-01') } } };
  assert.equal(classifyDelete(nested, [{ field: 'other', expireAfterSeconds: 0 }, { field: 'meta.until', expireAfterSeconds: 0 }]).cause, 'ttl');
  assert.equal(classifyDelete({ ...base, operationType: 'insert' }, { field: 'x' }).cause, 'application');
  assert.throws(() => classifyDelete({ ...base, fullDocumentBeforeChange: {} }, {}), /readTtlIndex/);
});
