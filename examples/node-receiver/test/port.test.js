'use strict';
// The receiver listens on $PORT (default 8080): on Cloud Run that is the
// ingress container's containerPort, and ferry's webhook URL in
// examples/cloudrun/ferry.yaml points at it. These tests run server.js as
// a process, the way its container does.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const readline = require('node:readline');
const { portFromEnv, DEFAULT_PORT, sign, decodeSecret } = require('../server.js');

const SERVER = path.join(__dirname, '..', 'server.js');
const SECRET = 'whsec_ZmVycnktbm9kZS1yZWNlaXZlci1maXh0dXJlLWtleSE=';
const DEADLINE_MS = 10000;

test('portFromEnv: $PORT, else 8080', () => {
  assert.equal(DEFAULT_PORT, 8080);
  assert.equal(portFromEnv({}), 8080);
  assert.equal(portFromEnv({ PORT: '' }), 8080);
  assert.equal(portFromEnv({ PORT: '8080' }), 8080);
  assert.equal(portFromEnv({ PORT: '9091' }), 9091);
  assert.equal(portFromEnv({ PORT: '0' }), 0);
  for (const bad of ['abc', '80.5', '-1', '65536', ' 8080', '8080x']) {
    assert.throws(() => portFromEnv({ PORT: bad }), /PORT must be an integer/, bad);
  }
});

// freePort returns a port nothing listens on right now.
async function freePort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

// start runs server.js with env; lines() yields its stdout JSON lines.
function start(env) {
  const child = spawn(process.execPath, [SERVER], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = [];
  child.stderr.on('data', (c) => stderr.push(c));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr: Buffer.concat(stderr).toString() })));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return { child, exited, lines };
}

// nextLine returns the next stdout line parsed as JSON whose msg is msg,
// failing after DEADLINE_MS.
async function nextLine(lines, msg) {
  const deadline = Date.now() + DEADLINE_MS;
  while (Date.now() < deadline) {
    const timeout = new Promise((_, reject) => {
      const t = setTimeout(() => reject(new Error(`no "${msg}" line within ${DEADLINE_MS} ms`)), deadline - Date.now());
      t.unref();
    });
    const { value, done } = await Promise.race([lines.next(), timeout]);
    if (done) throw new Error(`stdout ended before a "${msg}" line`);
    const obj = JSON.parse(value);
    if (obj.msg === msg) return obj;
  }
  throw new Error(`no "${msg}" line within ${DEADLINE_MS} ms`);
}

test('server.js listens on $PORT and reports the request path', async () => {
  const port = await freePort();
  const { child, exited, lines } = start({ PORT: String(port), WEBHOOK_SECRET: SECRET });
  try {
    const listening = await nextLine(lines, 'listening');
    assert.equal(listening.port, port);

    const id = 'evt-port-test';
    const body = JSON.stringify({ operationType: 'delete', ns: { db: 'shop', coll: 'sessions' } });
    const ts = Math.floor(Date.now() / 1000);
    const res = await fetch(`http://localhost:${port}/ferry/sessions-expired`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(ts),
        'webhook-signature': sign(decodeSecret(SECRET), id, ts, Buffer.from(body)),
      },
      body,
    });
    assert.equal(res.status, 200);
    const applied = await nextLine(lines, 'applied');
    assert.equal(applied.id, id);
    assert.equal(applied.path, '/ferry/sessions-expired');
  } finally {
    child.kill('SIGTERM');
  }
  const { code, signal } = await exited;
  assert.equal(signal, null);
  assert.equal(code, 0, 'SIGTERM closes the server and exits 0');
});

test('server.js refuses a bad PORT or a missing secret, naming it', async () => {
  let r = await start({ PORT: 'http', WEBHOOK_SECRET: SECRET }).exited;
  assert.equal(r.code, 1);
  assert.match(r.stderr, /PORT must be an integer/);

  r = await start({ PORT: String(await freePort()) }).exited;
  assert.equal(r.code, 1);
  assert.match(r.stderr, /WEBHOOK_SECRET is not set/);
});
