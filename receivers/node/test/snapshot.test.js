'use strict';
// Snapshot rows end to end: ferry run with `start_at: backfill` delivers a
// collection's documents as snapshot rows (Ferry-Operation: backfill) while
// the application keeps updating, deleting and inserting; a handler that
// upserts rows and applies changes in the order it gets them keeps a copy
// equal to the source: no deleted document comes back, none is stale.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { MongoClient } = require('mongodb');
const { ferryReceiver } = require('..');
const { startMongo, uniqueDb } = require('./support/mongotest');
const { freePort, startFerry } = require('./support/ferry');
const { SECRET } = require('./support/deliver');

let mongo;
let client;

before(async () => {
  mongo = await startMongo();
  client = new MongoClient(mongo.uri);
  await client.connect();
});

after(async () => {
  if (client) await client.close();
  if (mongo) await mongo.stop();
});

async function until(what, f, ms, log) {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await f();
    if (r === true) return;
    if (Date.now() > deadline) assert.fail(`${what}: ${r}\n${log ? log() : ''}`);
    await new Promise((res) => setTimeout(res, 100)); // polling interval, not synchronisation
  }
}

test('snapshot rows and concurrent changes: the copy equals the source', { timeout: 180000 }, async (t) => {
  const src = uniqueDb('snap');
  const app = uniqueDb('app');
  const orders = client.db(src).collection('orders');
  const N = 2000;
  await orders.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, v: 0, pad: 'x'.repeat(200) })));

  const receiver = ferryReceiver({ secret: SECRET, mongo: client, db: app });
  const copy = client.db(app).collection('copy');
  const ops = new Map();
  const server = http.createServer(receiver.handler(async (event, ctx) => {
    ops.set(event.operationType, (ops.get(event.operationType) || 0) + 1);
    const _id = event.documentKey._id;
    switch (event.operationType) {
      case 'backfill':
      case 'insert':
      case 'replace':
      case 'update':
        if (event.fullDocument) {
          await copy.replaceOne({ _id }, event.fullDocument, { upsert: true, session: ctx.session });
        }
        break;
      case 'delete':
        await copy.deleteOne({ _id }, { session: ctx.session });
        break;
      default:
    }
  }));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));

  const listen = await freePort();
  const ferry = startFerry(`
listen: "127.0.0.1:${listen}"
state: {uri: "${mongo.uri}", database: ferry_${src}}
streams:
  - name: orders
    source:
      uri: "${mongo.uri}"
      scope: {collection: ${src}.orders}
      full_document: updateLookup
      start_at: backfill
    snapshot: {chunk_size: 100, max_rate: 4000}
    sink:
      webhook: {url: "http://127.0.0.1:${server.address().port}/ferry/orders", secret: "${SECRET}"}
`);
  t.after(() => ferry.stop());

  // Change documents while the snapshot reads them: updates, deletes and
  // inserts spread over the collection, until the snapshot has finished.
  let stop = false;
  let changes = 0;
  const writer = (async () => {
    for (let i = 1; !stop; i++) {
      const id = (i * 7919) % N;
      if (i % 10 === 0) await orders.deleteOne({ _id: id });
      else if (i % 10 === 5) await orders.insertOne({ _id: N + i, v: i });
      else await orders.updateOne({ _id: id }, { $set: { v: i } });
      changes++;
      await new Promise((res) => setTimeout(res, 2)); // a write rate, not synchronisation
    }
  })();
  const status = async () => {
    try {
      return await (await fetch(`http://127.0.0.1:${listen}/status`)).json();
    } catch {
      return null;
    }
  };
  await until('the snapshot finished', async () => {
    const s = await status();
    const snaps = (s?.streams || []).flatMap((st) => (st.partitions || []).map((p) => p.snapshot)).filter(Boolean);
    if (snaps.length > 0 && snaps.every((x) => x.finished_at || x.finished)) return true;
    return `snapshot ${JSON.stringify(snaps)}, ops ${JSON.stringify([...ops])}`;
  }, 150000, ferry.log);
  stop = true;
  await writer;

  const want = async () => JSON.stringify(await orders.find().sort({ _id: 1 }).toArray());
  await until('the copy equals the source', async () => {
    const [a, b] = [await want(), JSON.stringify(await copy.find().sort({ _id: 1 }).toArray())];
    return a === b || `copy ${await copy.countDocuments()} documents, source ${await orders.countDocuments()}`;
  }, 60000, ferry.log);
  assert.ok((ops.get('backfill') || 0) >= N * 0.8, `snapshot rows ${ops.get('backfill')}, want most of ${N}`);
  assert.ok(changes > 100, `only ${changes} changes during the snapshot`);
  t.diagnostic(`${ops.get('backfill')} snapshot rows, ${changes} changes during the snapshot, copy == source (${await copy.countDocuments()} documents)`);
});
