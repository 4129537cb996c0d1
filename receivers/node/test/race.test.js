'use strict';
// Two instances racing on one event, and the livelock of the naive MongoDB
// form (insert the id inside withTransaction, catch 11000) that the
// library's upsert avoids.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { ferryReceiver } = require('..');
const { startMongo, uniqueDb } = require('./support/mongotest');
const { SECRET, eventId, changeEvent } = require('./support/deliver');

let mongo;
let clients = [];

before(async () => {
  mongo = await startMongo();
  // Two clients: two instances of the service, each with its own pool.
  for (let i = 0; i < 2; i++) {
    const c = new MongoClient(mongo.uri, { monitorCommands: true });
    await c.connect();
    clients.push(c);
  }
});

after(async () => {
  for (const c of clients) await c.close();
  await mongo.stop();
});

function input(id, stream = 'sessions') {
  const ev = changeEvent('delete', { _id: id });
  const { EJSON } = require('mongodb').BSON;
  return { id, stream, epoch: 1, body: EJSON.stringify(EJSON.deserialize(ev, { relaxed: false }), { relaxed: false }) };
}

test('two instances racing on one event: one applies, the other answers in-progress, then duplicate', async () => {
  const db = uniqueDb();
  const [a, b] = clients.map((c) => ferryReceiver({ secret: SECRET, mongo: c, db, conflictWaitMs: 0 }));
  await a.ready();
  const effects = clients[0].db(db).collection('effects');
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const slow = async (event, ctx) => {
    await effects.insertOne({ id: ctx.id, by: 'a' }, { session: ctx.session });
    entered();
    await gate; // a's transaction stays open while b delivers the same event
  };
  const fast = async (event, ctx) => {
    await ctx.db.collection('effects').insertOne({ id: ctx.id, by: 'b' }, { session: ctx.session });
  };
  const id = eventId('race');
  const first = a.deliver(input(id), slow);
  await inEffect;
  const second = await b.deliver(input(id), fast);
  assert.equal(second.outcome, 'in-progress');
  assert.equal(second.status, 503);
  assert.equal(second.inProgress, true, 'Ferry retries it without counting an attempt');
  release();
  assert.equal((await first).outcome, 'applied');
  const retry = await b.deliver(input(id), fast);
  assert.equal(retry.outcome, 'duplicate');
  assert.deepEqual((await effects.find({ id }).toArray()).map((e) => e.by), ['a']);
});

test('a racing delivery that waits (conflictWaitMs) sees the winner commit and answers duplicate', async () => {
  const db = uniqueDb();
  const [a, b] = clients.map((c) => ferryReceiver({ secret: SECRET, mongo: c, db, conflictWaitMs: 30000 }));
  await a.ready();
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const effects = clients[0].db(db).collection('effects');
  const id = eventId('race-wait');
  const first = a.deliver(input(id), async (ev, ctx) => {
    await effects.insertOne({ id, by: 'a' }, { session: ctx.session });
    entered();
    await gate;
  });
  await inEffect;
  const second = b.deliver(input(id), async (ev, ctx) => {
    await ctx.db.collection('effects').insertOne({ id, by: 'b' }, { session: ctx.session });
  });
  release();
  assert.equal((await first).outcome, 'applied');
  assert.equal((await second).outcome, 'duplicate');
  assert.equal(await effects.countDocuments({ id }), 1);
});

test('many concurrent deliveries of many events over two instances: each applied exactly once', async () => {
  const db = uniqueDb();
  const rs = clients.map((c) => ferryReceiver({ secret: SECRET, mongo: c, db, conflictWaitMs: 50 }));
  await rs[0].ready();
  const effects = clients[0].db(db).collection('effects');
  const ids = Array.from({ length: 40 }, (_, i) => eventId('many-' + i));
  const effect = async (ev, ctx) => {
    await ctx.db.collection('effects').insertOne({ id: ctx.id }, { session: ctx.session });
  };
  // Each event is delivered 3 times at once, spread over both instances,
  // and retried (as Ferry does) until it is answered 200.
  const deliverUntilDone = async (r, id) => {
    for (let i = 0; i < 200; i++) {
      const res = await r.deliver(input(id), effect);
      if (res.status === 200) return res.outcome;
      assert.equal(res.outcome, 'in-progress', `unexpected ${res.outcome}: ${res.message}`);
    }
    throw new Error('never answered 200');
  };
  const outcomes = await Promise.all(ids.flatMap((id) => [0, 1, 2].map((k) => deliverUntilDone(rs[k % 2], id))));
  assert.equal(outcomes.filter((o) => o === 'applied').length, ids.length);
  assert.equal(outcomes.filter((o) => o === 'duplicate').length, 2 * ids.length);
  const counts = await effects.aggregate([{ $group: { _id: '$id', n: { $sum: 1 } } }]).toArray();
  assert.equal(counts.length, ids.length);
  assert.ok(counts.every((c) => c.n === 1), 'no event applied twice');
});

test('the naive form (insert the id in withTransaction, catch 11000) livelocks; the library answers a replay at once', async () => {
  const db = uniqueDb();
  const c = clients[0];
  const seen = c.db(db).collection('seen');
  await seen.insertOne({ _id: 'evt' }); // applied before: this is a replay
  // The literal translation of "record the id in the same transaction".
  let runs = 0;
  const session = c.startSession();
  const naive = session.withTransaction(async (s) => {
    runs++;
    if (runs >= 5) throw new Error('stopped after 5 runs');
    try {
      await seen.insertOne({ _id: 'evt' }, { session: s });
    } catch (err) {
      if (err.code !== 11000) throw err;
      return; // "already applied": but the server aborted the transaction
    }
  });
  await assert.rejects(naive, /stopped after 5 runs/);
  await session.endSession();
  assert.equal(runs, 5, 'withTransaction ran the callback again and again: the duplicate key error aborted the transaction, so each commit failed with NoSuchTransaction (TransientTransactionError)');

  // The library: a replay costs one upsert and one read, no effect.
  const r = ferryReceiver({ secret: SECRET, mongo: c, db });
  const id = eventId('replay');
  let effects = 0;
  const effect = async () => {
    effects++;
  };
  assert.equal((await r.deliver(input(id), effect)).outcome, 'applied');
  let updates = 0;
  const count = (ev) => {
    if (ev.commandName === 'update' && ev.command.update === r.records.collectionName) updates++;
  };
  c.on('commandStarted', count);
  const again = await r.deliver(input(id), effect);
  c.off('commandStarted', count);
  assert.equal(again.outcome, 'duplicate');
  assert.equal(effects, 1);
  assert.equal(updates, 1, 'one upsert, no retry loop');
});
