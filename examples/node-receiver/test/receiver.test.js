'use strict';
const { test, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const { createReceiver, sign, decodeSecret } = require('../server.js');

// Produced by ferry's Go webhook sink for a fixed secret, event and clock;
// sink/webhook/webhook_test.go (TestNodeReceiverFixture) asserts the same
// values, so the two implementations are proven compatible.
const GO_SECRET = 'whsec_ZmVycnktbm9kZS1yZWNlaXZlci1maXh0dXJlLWtleSE=';
const GO_TIMESTAMP = 1700000000;
const GO_ID = 'a61261dd1ddfa054f1e69b60c20b8dbdad835223363bf61454bd630b77d6e413';
const GO_SIGNATURE = 'v1,MnMknB+urghTWwmse7Hh/SnQqGs4amu1an0Sc6m0H6I=';
const GO_BODY = String.raw`{"_id":{"_data":"8266A0F3C2000000012B042C0100296E5A10047F3A9C1E2B4D46A1B0C5D9E8F7A6B5C446645F6964"},"operationType":"update","clusterTime":{"$timestamp":{"t":1730000001,"i":1}},"wallTime":{"$date":"2024-10-27T03:33:21Z"},"ns":{"db":"shop","coll":"orders"},"documentKey":{"_id":"a"},"updateDescription":{"updatedFields":{"seq":1},"removedFields":[]},"fullDocument":{"_id":"a","seq":1,"note":"café \"quoted\" <b>&</b>\n","total":{"$numberDecimal":"19.99"}}}`;

let server;
let base;
let applied;
let clockMs;
let failApply;

before(async () => {
  server = createReceiver({
    secret: GO_SECRET,
    now: () => clockMs,
    apply: async (event, meta) => {
      if (failApply) throw new Error('database down');
      applied.push({ event, meta });
    },
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
});

after(() => new Promise((resolve) => server.close(resolve)));

beforeEach(() => {
  applied = [];
  clockMs = GO_TIMESTAMP * 1000 + 2000; // receiver clock 2 s ahead
  failApply = false;
});

function post(body, headers) {
  return fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: Buffer.from(body, 'utf8'),
  });
}

function goHeaders(overrides = {}) {
  return {
    'webhook-id': GO_ID,
    'webhook-timestamp': String(GO_TIMESTAMP),
    'webhook-signature': GO_SIGNATURE,
    'idempotency-key': GO_ID,
    'ferry-epoch': '5',
    ...overrides,
  };
}

let counter = 0;
function freshDelivery() {
  counter++;
  const id = `evt-${counter}-${Date.now()}`;
  const body = JSON.stringify({ operationType: 'insert', fullDocument: { n: counter } });
  const ts = Math.floor(clockMs / 1000);
  const signature = sign(decodeSecret(GO_SECRET), id, ts, Buffer.from(body));
  return { id, body, headers: { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signature } };
}

test('a delivery signed by the Go sink is accepted and applied once', async () => {
  const res = await post(GO_BODY, goHeaders());
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { id: GO_ID, applied: true });
  assert.equal(applied.length, 1);
  assert.equal(applied[0].meta.id, GO_ID);
  assert.equal(applied[0].meta.epoch, 5);
  assert.equal(applied[0].event.fullDocument.note, 'café "quoted" <b>&</b>\n');

  // The same event again (a retry after a lost response, a replay after a
  // crash): 200, not re-applied.
  const again = await post(GO_BODY, goHeaders());
  assert.equal(again.status, 200);
  assert.deepEqual(await again.json(), { id: GO_ID, duplicate: true });
  assert.equal(applied.length, 1);
});

test('a bad signature is rejected with 401', async () => {
  const d = freshDelivery();
  const tampered = d.body.replace('insert', 'delete');
  const res = await post(tampered, d.headers);
  assert.equal(res.status, 401);
  const wrongKey = sign(Buffer.alloc(32, 7), d.id, d.headers['webhook-timestamp'], Buffer.from(d.body));
  const res2 = await post(d.body, { ...d.headers, 'webhook-signature': wrongKey });
  assert.equal(res2.status, 401);
  const res3 = await post(d.body, { ...d.headers, 'webhook-signature': 'v1,' });
  assert.equal(res3.status, 401);
  const res4 = await post(d.body, { 'webhook-id': d.id });
  assert.equal(res4.status, 401);
  assert.equal(applied.length, 0);
  // The untouched delivery still goes through (nothing was marked seen).
  assert.equal((await post(d.body, d.headers)).status, 200);
  assert.equal(applied.length, 1);
});

test('one valid signature among several is enough (secret rotation)', async () => {
  const d = freshDelivery();
  const res = await post(d.body, { ...d.headers, 'webhook-signature': `v1,AAAA ${d.headers['webhook-signature']}` });
  assert.equal(res.status, 200);
  assert.equal(applied.length, 1);
});

test('a stale or future timestamp is rejected with 401', async () => {
  clockMs = (GO_TIMESTAMP + 301) * 1000;
  const res = await post(GO_BODY, goHeaders());
  assert.equal(res.status, 401);
  assert.match((await res.json()).error, /tolerance/);
  clockMs = (GO_TIMESTAMP - 301) * 1000;
  assert.equal((await post(GO_BODY, goHeaders())).status, 401);
  assert.equal(applied.length, 0);
});

test('a failed effect answers 500 and is applied on the retry', async () => {
  const d = freshDelivery();
  failApply = true;
  assert.equal((await post(d.body, d.headers)).status, 500);
  failApply = false;
  const res = await post(d.body, d.headers);
  assert.equal(res.status, 200);
  assert.equal((await res.json()).applied, true);
  assert.equal(applied.length, 1);
});
