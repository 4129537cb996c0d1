'use strict';
// server.js as a process, as Cloud Run runs it, against the emulator (or
// FERRY_TEST_MONGODB_URI).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { useMongo, uniqueDb } = require('../../../receivers/node/test/support/mongotest');
const { SECRET, eventId, changeEvent, signed, post } = require('../../../receivers/node/test/support/deliver');

const SERVER = path.join(__dirname, '..', 'server.js');
const mongo = useMongo();

// start runs server.js with env; it resolves with {child, port, lines}
// once it printed "listening" (or with its exit when it does not start).
function start(t, env) {
  const child = spawn(process.execPath, [SERVER], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.exitCode === null && child.kill('SIGKILL'));
  const lines = [];
  const errs = [];
  readline.createInterface({ input: child.stderr }).on('line', (l) => errs.push(l));
  return new Promise((resolve) => {
    readline.createInterface({ input: child.stdout }).on('line', (l) => {
      lines.push(l);
      const m = JSON.parse(l);
      if (m.msg === 'listening') resolve({ child, port: m.port, host: m.host, lines, errs });
    });
    child.once('exit', (code) => resolve({ child, code, lines, errs }));
  });
}

function exited(child) {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', resolve));
}

test('applies each event once, records its effect in EFFECTS_COLLECTION, keyed by (stream, id)', async (t) => {
  const db = uniqueDb('ex');
  const s = await start(t, { WEBHOOK_SECRET: SECRET, MONGODB_URI: mongo.uri, DB: db, EFFECTS_COLLECTION: 'applied', PORT: '0', HOST: '127.0.0.1', INSTANCE: 'a' });
  assert.equal(s.host, '127.0.0.1', 'binds to HOST');
  const url = `http://127.0.0.1:${s.port}/ferry/sessions-expired`;
  const id = eventId('example');
  const ev = changeEvent('delete', { _id: 'sess-1' }, { fullDocumentBeforeChange: { _id: 'sess-1', expireAt: { $date: '2020-01-01T00:00:00Z' } } });
  assert.equal((await post(url, signed(id, ev, { stream: 'sessions-expired' }))).json.outcome, 'applied');
  assert.equal((await post(url, signed(id, ev, { stream: 'sessions-expired' }))).json.outcome, 'duplicate');
  assert.equal((await post(url, signed(id, ev, { stream: 'audit' }))).json.outcome, 'applied', 'another stream, same change: applied for it too');
  const effects = await mongo.client.db(db).collection('applied').find({ id }).toArray();
  assert.deepEqual(effects.map((e) => e.stream).sort(), ['audit', 'sessions-expired']);
  assert.ok(effects.every((e) => e.cause === 'ttl' && e.instance === 'a' && e.op === 'delete'));
  s.child.kill('SIGTERM');
  assert.equal(await exited(s.child), 0, 'SIGTERM: drains and exits 0');
  assert.ok(s.lines.some((l) => JSON.parse(l).msg === 'stopped'));
});

test('a missing secret or database URI, or a bad PORT, is refused naming each', async (t) => {
  const s = await start(t, { PORT: 'http' });
  assert.equal(s.code, 1);
  const msg = s.errs.join('\n');
  assert.match(msg, /WEBHOOK_SECRET is not set/);
  assert.match(msg, /MONGODB_URI is not set/);
  assert.match(msg, /PORT must be an integer/);
});

test('the default port is 3000, not ferry\'s ops port 8080', () => {
  const { config, DEFAULT_PORT } = require('../server.js');
  assert.equal(DEFAULT_PORT, 3000);
  assert.equal(config({ WEBHOOK_SECRET: SECRET, MONGODB_URI: 'mongodb://x' }).port, 3000);
  assert.equal(config({ WEBHOOK_SECRET: SECRET, MONGODB_URI: 'mongodb://x', PORT: '8081' }).port, 8081);
});

// deliveryLines waits until the server printed want "delivery" lines and
// returns its LOG_DELIVERIES lines (effect and delivery) parsed.
async function deliveryLines(s, want) {
  const parsed = () => s.lines.map((l) => JSON.parse(l)).filter((m) => m.msg === 'effect' || m.msg === 'delivery');
  const deadline = Date.now() + 10000;
  while (parsed().filter((m) => m.msg === 'delivery').length < want) {
    if (Date.now() > deadline) assert.fail(`after 10 s, ${want} delivery lines expected: ${s.lines.join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 10)); // polling the child's output
  }
  return parsed();
}

for (const mode of ['library', 'memory']) {
  test(`LOG_DELIVERIES=1 (${mode}): a line when the effect starts and one per delivery, ids shortened`, async (t) => {
    const db = uniqueDb('log');
    const env = { WEBHOOK_SECRET: SECRET, MONGODB_URI: mongo.uri, DB: db, PORT: '0', HOST: '127.0.0.1', LOG_DELIVERIES: '1' };
    if (mode === 'memory') env.DEDUPE = 'memory';
    const s = await start(t, env);
    const url = `http://127.0.0.1:${s.port}/ferry/sessions-expired`;
    const id = eventId(`log-${mode}`);
    const ev = changeEvent('delete', { _id: 'sess-log' });
    assert.equal((await post(url, signed(id, ev, { stream: 'sessions-expired' }))).status, 200);
    assert.equal((await post(url, signed(id, ev, { stream: 'sessions-expired' }))).status, 200);
    const lines = await deliveryLines(s, 2);
    const short = id.slice(0, 16);
    assert.deepEqual(
      lines.map((m) => [m.msg, m.stream, m.id, m.outcome, m.status]),
      [
        ['effect', 'sessions-expired', short, undefined, undefined],
        ['delivery', 'sessions-expired', short, 'applied', 200],
        ['delivery', 'sessions-expired', short, 'duplicate', 200],
      ],
    );
    assert.ok(lines.filter((m) => m.msg === 'delivery').every((m) => Number.isInteger(m.ms) && m.ms >= 0));
    assert.ok(!s.lines.some((l) => l.includes(id)), 'the full event id is never logged');
    s.child.kill('SIGTERM');
    assert.equal(await exited(s.child), 0);
  });
}

test('LOG_DELIVERIES other than 0 or 1 is refused, naming it', async (t) => {
  const s = await start(t, { WEBHOOK_SECRET: SECRET, MONGODB_URI: mongo.uri, LOG_DELIVERIES: 'yes' });
  assert.equal(s.code, 1);
  assert.match(s.errs.join('\n'), /LOG_DELIVERIES must be 1/);
});
