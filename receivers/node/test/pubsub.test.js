'use strict';
// The Pub/Sub path end to end: ferry's pubsub sink publishing to Google's
// Pub/Sub emulator, a subscriber on pubsubHandler applying each change once
// although Pub/Sub redelivers and ferry may publish a change twice.
// Skipped, saying so, where the emulator is not installed
// (google-cloud-cli-pubsub-emulator; PUBSUB_EMULATOR_BIN names another).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const { MongoClient } = require('mongodb');
const { ferryReceiver } = require('..');
const { startMongo, uniqueDb } = require('./support/mongotest');
const { freePort, startFerry } = require('./support/ferry');

const EMULATOR = process.env.PUBSUB_EMULATOR_BIN || '/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator';
const PROJECT = 'ferry-receiver-test';

let emu;
let mongo;
let client;
let PubSub;

before(async () => {
  if (!fs.existsSync(EMULATOR)) return;
  ({ PubSub } = require('@google-cloud/pubsub'));
  const port = await freePort();
  // Its own process group: the script starts a JVM, stopped with it.
  const child = spawn(EMULATOR, [`--host=127.0.0.1`, `--port=${port}`], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const started = new Promise((resolve, reject) => {
    const onData = (b) => {
      if (/Server started, listening on/.test(b.toString())) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the Pub/Sub emulator exited with ${code}`)));
  });
  emu = { child, host: `127.0.0.1:${port}` };
  await started;
  mongo = await startMongo();
  client = new MongoClient(mongo.uri);
  await client.connect();
});

after(async () => {
  if (client) await client.close();
  if (mongo) await mongo.stop();
  if (emu) {
    const gone = new Promise((resolve) => emu.child.once('exit', resolve));
    process.kill(-emu.child.pid, 'SIGTERM');
    await gone;
  }
});

test('ferry → Pub/Sub → pubsubHandler: every change applied once, replays and redeliveries absorbed', { timeout: 120000 }, async (t) => {
  if (!emu) return t.skip(`no Pub/Sub emulator at ${EMULATOR} (install google-cloud-cli-pubsub-emulator, or set PUBSUB_EMULATOR_BIN)`);
  process.env.PUBSUB_EMULATOR_HOST = emu.host; // no credentials, no metadata server lookups
  const pubsub = new PubSub({ projectId: PROJECT });
  const [topic] = await pubsub.createTopic('ferry-orders');
  const [sub] = await topic.createSubscription('orders-app', { ackDeadlineSeconds: 10 });

  const src = uniqueDb('src');
  const app = uniqueDb('app');
  const listen = await freePort();
  const ferry = startFerry(`
listen: "127.0.0.1:${listen}"
state: {uri: "${mongo.uri}", database: ferry_${src}}
streams:
  - name: orders
    source: {uri: "${mongo.uri}", scope: {collection: ${src}.orders}}
    sink:
      pubsub: {project: ${PROJECT}, topic: ferry-orders, emulator: "${emu.host}", encoding: canonical}
`);
  t.after(() => ferry.stop());

  const receiver = ferryReceiver({ mongo: client, db: app });
  const effects = client.db(app).collection('effects');
  const seenAttrs = new Set();
  let duplicates = 0;
  const handle = receiver.pubsubHandler(async (event, ctx) => {
    await effects.insertOne({ id: ctx.id, stream: ctx.stream, n: event.fullDocument.n }, { session: ctx.session });
  });
  const republished = [];
  sub.on('message', async (m) => {
    seenAttrs.add(m.attributes['ferry-stream']);
    // Publish every message a second time, as ferry does after a takeover
    // (same ferry-event-id, new message id).
    if (!m.attributes.replayed) {
      republished.push(topic.publishMessage({ data: m.data, attributes: { ...m.attributes, replayed: '1' } }));
    }
    const res = await handle(m);
    if (res.outcome === 'duplicate') duplicates++;
  });
  t.after(() => sub.close());

  // Wait for ferry's stream to be open (readyz), then write.
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${listen}/readyz`)).status === 200) break;
    } catch {}
    if (i > 600) assert.fail('ferry never became ready:\n' + ferry.log());
    await new Promise((r) => setTimeout(r, 100));
  }
  const orders = client.db(src).collection('orders');
  const N = 30;
  for (let n = 0; n < N; n++) await orders.insertOne({ _id: `o${n}`, n });

  for (let i = 0; (await effects.countDocuments()) < N || duplicates < N; i++) {
    if (i > 1200) assert.fail(`effects ${await effects.countDocuments()}/${N}, duplicates ${duplicates}/${N}\n` + ferry.log());
    await new Promise((r) => setTimeout(r, 100));
  }
  await Promise.all(republished);
  const counts = await effects.aggregate([{ $group: { _id: '$id', k: { $sum: 1 } } }]).toArray();
  assert.equal(counts.length, N, 'every change applied');
  assert.ok(counts.every((c) => c.k === 1), 'none applied twice');
  assert.deepEqual([...seenAttrs], ['orders'], 'ferry-stream carries the stream');
  assert.deepEqual((await effects.distinct('n')).sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i));
});
