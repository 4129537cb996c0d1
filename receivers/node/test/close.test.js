'use strict';
// close(): stop taking deliveries, drain those in flight, roll back what
// overruns the drain.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { EJSON } = require('mongodb').BSON;
const { ferryReceiver } = require('..');
const { useMongo, uniqueDb } = require('./support/mongotest');
const { SECRET, eventId, changeEvent } = require('./support/deliver');

const mongo = useMongo();

function input(id) {
  return { id, stream: 's', epoch: 1, body: EJSON.stringify(EJSON.deserialize(changeEvent('delete', { _id: id }), { relaxed: false }), { relaxed: false }) };
}

test('close drains the deliveries in flight and answers new ones 503', async () => {
  const db = uniqueDb();
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db });
  await r.ready();
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const id = eventId('drain');
  const running = r.deliver(input(id), async (ev, ctx) => {
    await ctx.db.collection('effects').insertOne({ id }, { session: ctx.session });
    entered();
    await gate;
  });
  await inEffect;
  const closed = r.close({ timeoutMs: 60000 });
  const late = await r.deliver(input(eventId('late')), async () => assert.fail('must not run'));
  assert.equal(late.status, 503);
  assert.equal(late.outcome, 'closing');
  release();
  assert.equal(await closed, 'drained');
  assert.equal((await running).outcome, 'applied');
  assert.equal(await mongo.client.db(db).collection('effects').countDocuments({ id }), 1);
});

test('a delivery still running when the drain time is up is rolled back and answered 503', async () => {
  const db = uniqueDb();
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db });
  await r.ready();
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  const id = eventId('overrun');
  const running = r.deliver(input(id), async (ev, ctx) => {
    await ctx.db.collection('effects').insertOne({ id }, { session: ctx.session });
    entered();
    // A slow effect that honours its signal.
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  });
  await inEffect;
  assert.equal(await r.close({ timeoutMs: 10 }), 'timeout');
  const res = await running;
  assert.equal(res.status, 503);
  assert.equal(await mongo.client.db(db).collection('effects').countDocuments({}), 0, 'rolled back: the replay applies it elsewhere');
  assert.equal(await r.records.countDocuments({}), 0);
});
