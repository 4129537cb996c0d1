'use strict';
// The same handler served by Express and Fastify.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const express = require('express');
const Fastify = require('fastify');
const { ferryReceiver, rawJSON } = require('..');
const { useMongo, uniqueDb } = require('./support/mongotest');
const { SECRET, eventId, changeEvent, signed, post } = require('./support/deliver');

const mongo = useMongo();

function setup() {
  const db = uniqueDb();
  const receiver = ferryReceiver({ secret: SECRET, mongo: mongo.client, db, log: () => {} });
  const effects = mongo.client.db(db).collection('effects');
  const effect = async (event, ctx) => {
    await effects.insertOne({ id: ctx.id }, { session: ctx.session });
  };
  return { receiver, effects, effect };
}

async function listen(t, app) {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${server.address().port}`;
}

async function appliesOnce(url, effects) {
  const id = eventId(url + Math.random());
  assert.equal((await post(url, signed(id, changeEvent('delete', { _id: 'x' })))).json.outcome, 'applied');
  assert.equal((await post(url, signed(id, changeEvent('delete', { _id: 'x' })))).json.outcome, 'duplicate');
  assert.equal(await effects.countDocuments({ id }), 1);
}

test('Express, no body parser on the route', async (t) => {
  const { receiver, effects, effect } = setup();
  const app = express();
  app.post('/ferry/sessions', receiver.handler(effect));
  await appliesOnce((await listen(t, app)) + '/ferry/sessions', effects);
});

test('Express with express.raw', async (t) => {
  const { receiver, effects, effect } = setup();
  const app = express();
  app.post('/ferry/sessions', express.raw({ type: 'application/json' }), receiver.handler(effect));
  await appliesOnce((await listen(t, app)) + '/ferry/sessions', effects);
});

test('Express with express.json: refused with a retryable 500 that says how to mount it, nothing applied', async (t) => {
  const { effects, effect } = setup();
  const logged = [];
  const receiver = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: uniqueDb(), log: (level, msg) => logged.push(msg) });
  const app = express();
  app.use(express.json());
  app.post('/ferry/sessions', receiver.handler(effect));
  const url = (await listen(t, app)) + '/ferry/sessions';
  const r = await post(url, signed(eventId('parsed'), changeEvent('delete', { _id: 'x' })));
  assert.equal(r.status, 500);
  assert.ok(logged.some((m) => /express\.raw/.test(m)), 'the log says how to mount the handler');
  assert.equal(await effects.countDocuments({}), 0);
});

test('Fastify with the rawJSON content-type parser', async (t) => {
  const { receiver, effects, effect } = setup();
  const app = Fastify();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, rawJSON);
  app.post('/ferry/sessions', receiver.handler(effect));
  const addr = await app.listen({ port: 0, host: '127.0.0.1' });
  t.after(() => app.close());
  await appliesOnce(addr + '/ferry/sessions', effects);
  // An in-progress answer keeps its headers through Fastify.
  const id = eventId('fastify-503');
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  let entered;
  const inEffect = new Promise((resolve) => (entered = resolve));
  const slow = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: receiver.records.dbName, conflictWaitMs: 0 });
  const first = slow.deliver(
    { id, stream: 'sessions', epoch: 1, body: signed(id, changeEvent('delete', { _id: 'y' })).body },
    async (ev, ctx) => {
      await ctx.db.collection('effects').insertOne({ id }, { session: ctx.session });
      entered();
      await gate;
    },
  );
  await inEffect;
  const fast = ferryReceiver({ secret: SECRET, mongo: mongo.client, db: receiver.records.dbName, conflictWaitMs: 0 });
  const app2 = Fastify();
  app2.addContentTypeParser('application/json', { parseAs: 'buffer' }, rawJSON);
  app2.post('/ferry/sessions', fast.handler(effect));
  const addr2 = await app2.listen({ port: 0, host: '127.0.0.1' });
  t.after(() => app2.close());
  const r = await post(addr2 + '/ferry/sessions', signed(id, changeEvent('delete', { _id: 'y' })));
  assert.equal(r.status, 503);
  assert.equal(r.headers.get('retry-after'), '1');
  assert.equal(r.headers.get('ferry-retry'), 'in-progress');
  release();
  assert.equal((await first).outcome, 'applied');
});
