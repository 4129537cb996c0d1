'use strict';
// Effects outside MongoDB: claim, effect, done.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { EJSON } = require('mongodb').BSON;
const { ferryReceiver } = require('..');
const { useMongo, uniqueDb } = require('./support/mongotest');
const { SECRET, eventId, changeEvent } = require('./support/deliver');

const mongo = useMongo();

function input(id, stream = 'emails') {
  return { id, stream, epoch: 3, body: EJSON.stringify(EJSON.deserialize(changeEvent('delete', { _id: id }), { relaxed: false }), { relaxed: false }) };
}

test('an external effect runs once and gets a stable idempotency key for the downstream call', async () => {
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: uniqueDb() });
  const sent = [];
  const send = async (ev, ctx) => {
    sent.push(ctx.idempotencyKey);
  };
  const id = eventId('mail');
  assert.equal((await r.deliver(input(id), send, { external: true })).outcome, 'applied');
  assert.equal((await r.deliver(input(id), send, { external: true })).outcome, 'duplicate');
  assert.deepEqual(sent, [`emails:${id}`]);
  const rec = await r.records.findOne({ _id: { stream: 'emails', id } });
  assert.equal(rec.state, 'done');
  assert.equal(rec.claims, 1);
});

test('while a claim runs, another delivery answers in-progress and runs nothing', async () => {
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: uniqueDb() });
  const id = eventId('claimed');
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  let runs = 0;
  const first = r.deliver(
    input(id),
    async () => {
      runs++;
      entered();
      await gate;
    },
    { external: true },
  );
  await inEffect;
  const second = await r.deliver(input(id), async () => runs++, { external: true });
  assert.equal(second.outcome, 'in-progress');
  assert.equal(second.inProgress, true);
  release();
  assert.equal((await first).outcome, 'applied');
  assert.equal(runs, 1);
});

test('a failed external effect releases its claim, so the retry runs it', async () => {
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: uniqueDb() });
  const id = eventId('fails');
  let fail = true;
  let runs = 0;
  const eff = async () => {
    runs++;
    if (fail) throw new Error('smtp down');
  };
  assert.equal((await r.deliver(input(id), eff, { external: true })).status, 500);
  assert.equal(await r.records.countDocuments({}), 0);
  fail = false;
  assert.equal((await r.deliver(input(id), eff, { external: true })).outcome, 'applied');
  assert.equal(runs, 2);
});

test('a claim left by a dead instance is taken over once it expires (by the server clock), and counted', async () => {
  const r = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: uniqueDb() });
  await r.ready();
  const id = eventId('orphan');
  const _id = { stream: 'emails', id };
  // A live claim: refused.
  await r.records.insertOne({ _id, state: 'claimed', claimant: 'dead', claimedUntil: new Date(Date.now() + 3600e3), claims: 1 });
  let runs = 0;
  const eff = async (ev, ctx) => {
    runs++;
    assert.equal(ctx.claims, 2, 'the effect knows it may be a repeat');
  };
  assert.equal((await r.deliver(input(id), eff, { external: true })).outcome, 'in-progress');
  assert.equal(runs, 0);
  // The same claim, expired: taken over.
  await r.records.updateOne({ _id }, { $set: { claimedUntil: new Date(Date.now() - 3600e3) } });
  assert.equal((await r.deliver(input(id), eff, { external: true })).outcome, 'applied');
  assert.equal(runs, 1);
  const rec = await r.records.findOne({ _id });
  assert.equal(rec.state, 'done');
  assert.equal(rec.claims, 2);
});
