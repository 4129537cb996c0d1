'use strict';
// A delivery exactly as ferry's Go webhook sink makes it, for a fixed
// secret, event and clock: sink/webhook/webhook_test.go
// (TestNodeReceiverFixture) asserts the Go side produces these bytes, this
// test that the receiver accepts them, so the two stay compatible.

const { test, mock } = require('node:test');
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { ferryReceiver, verifier } = require('..');

const GO_SECRET = 'whsec_ZmVycnktbm9kZS1yZWNlaXZlci1maXh0dXJlLWtleSE=';
const GO_TIMESTAMP = 1700000000;
const GO_ID = 'a61261dd1ddfa054f1e69b60c20b8dbdad835223363bf61454bd630b77d6e413';
const GO_SIGNATURE = 'v1,MnMknB+urghTWwmse7Hh/SnQqGs4amu1an0Sc6m0H6I=';
const GO_BODY = String.raw`{"_id":{"_data":"8266A0F3C2000000012B042C0100296E5A10047F3A9C1E2B4D46A1B0C5D9E8F7A6B5C446645F6964"},"operationType":"update","clusterTime":{"$timestamp":{"t":1730000001,"i":1}},"wallTime":{"$date":"2024-10-27T03:33:21Z"},"ns":{"db":"shop","coll":"orders"},"documentKey":{"_id":"a"},"updateDescription":{"updatedFields":{"seq":1},"removedFields":[]},"fullDocument":{"_id":"a","seq":1,"note":"café \"quoted\" <b>&</b>\n","total":{"$numberDecimal":"19.99"}}}`;

function headers(over = {}) {
  return { 'webhook-id': GO_ID, 'webhook-timestamp': String(GO_TIMESTAMP), 'webhook-signature': GO_SIGNATURE, ...over };
}

test('the Go sink\'s delivery verifies and parses', (t) => {
  mock.timers.enable({ apis: ['Date'], now: (GO_TIMESTAMP + 2) * 1000 });
  t.after(() => mock.timers.reset());
  const verify = verifier(GO_SECRET);
  assert.equal(verify(Buffer.from(GO_BODY), headers()), GO_ID);
  assert.throws(() => verify(Buffer.from(GO_BODY.replace('"seq":1', '"seq":2')), headers()), /signature/i);
  assert.throws(() => verify(Buffer.from(GO_BODY), headers({ 'webhook-id': GO_ID.replace('a', 'b') })), /signature/i);
  mock.timers.setTime((GO_TIMESTAMP + 301) * 1000);
  assert.throws(() => verify(Buffer.from(GO_BODY), headers()), /too old/);
});

test('parseEvent keeps the Go sink\'s values: Decimal128, Date, Timestamp, text', () => {
  const { parseEvent } = require('..');
  const ev = parseEvent(GO_BODY);
  assert.equal(ev.fullDocument.note, 'café "quoted" <b>&</b>\n');
  assert.equal(ev.fullDocument.total.toString(), '19.99');
  assert.equal(ev.wallTime.toISOString(), '2024-10-27T03:33:21.000Z');
  assert.equal(ev.clusterTime.getHighBits(), 1730000001);
  // The receiver takes it too (no server needed for the check above; the
  // constructor only validates its options).
  assert.ok(ferryReceiver({ secret: GO_SECRET, mongo: new MongoClient('mongodb://127.0.0.1:1'), db: 'app' }));
});
