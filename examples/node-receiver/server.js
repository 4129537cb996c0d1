'use strict';
// A receiver for ferry's webhook sink, with no dependencies beyond Node 20.
//
// Every request is checked the Standard Webhooks way
// (https://www.standardwebhooks.com): the HMAC-SHA256 of
// `${webhook-id}.${webhook-timestamp}.${raw body}` under the secret's key
// must match one of the `v1,<base64>` signatures in `webhook-signature`
// (constant-time comparison), and the timestamp must be within the
// tolerance of this machine's clock. Anything else gets 401.
//
// Ferry delivers at least once: after a crash, a takeover or a lost
// response, the same event comes again with the same webhook-id /
// Idempotency-Key. The receiver remembers the ids it applied and answers a
// repeat with 200 without applying it again.
//
// Status codes are chosen for ferry's retry classes: 2xx = done; 401/400/413
// = rejected for good (ferry dead-letters the event); 500/503 = try again.

const http = require('node:http');
const crypto = require('node:crypto');
const fs = require('node:fs');

const MAX_BODY = 1 << 20; // 1 MiB

// decodeSecret returns the HMAC key of a "whsec_<base64>" secret.
function decodeSecret(secret) {
  if (typeof secret !== 'string' || !secret.startsWith('whsec_')) {
    throw new Error('secret must start with "whsec_" followed by base64');
  }
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  if (key.length < 24) throw new Error('secret must encode at least 24 bytes');
  return key;
}

// sign returns the v1 signature header value (used by tests and tools).
function sign(key, id, timestamp, body) {
  const mac = crypto.createHmac('sha256', key);
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return 'v1,' + mac.digest('base64');
}

// verify throws unless the headers carry a valid, fresh signature of body.
function verify(key, headers, body, nowMs, toleranceSeconds) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs) throw new Error('missing webhook headers');
  if (!/^\d+$/.test(ts)) throw new Error('bad webhook-timestamp');
  const age = Math.abs(nowMs / 1000 - Number(ts));
  if (age > toleranceSeconds) throw new Error('webhook-timestamp outside tolerance');
  const expected = crypto.createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest();
  for (const part of sigs.split(' ')) {
    const [version, b64] = part.split(',', 2);
    if (version !== 'v1' || !b64) continue;
    const given = Buffer.from(b64, 'base64');
    if (given.length === expected.length && crypto.timingSafeEqual(given, expected)) return id;
  }
  throw new Error('no valid signature');
}

// SeenIds remembers applied event ids, optionally in a file (one id per
// line) so a restarted receiver still recognises duplicates. A production
// receiver would record the id in the same database transaction as the
// effect.
class SeenIds {
  constructor(file) {
    this.file = file;
    this.ids = new Set();
    if (file && fs.existsSync(file)) {
      for (const line of fs.readFileSync(file, 'utf8').split('\n')) if (line) this.ids.add(line);
    }
  }
  has(id) { return this.ids.has(id); }
  add(id) {
    this.ids.add(id);
    if (this.file) fs.appendFileSync(this.file, id + '\n');
  }
}

// DEFAULT_PORT is where the receiver listens when PORT is unset. On Cloud
// Run, PORT is set in the ingress container from its containerPort (8080 in
// examples/cloudrun/service.yaml), and ferry's webhook URL points there.
const DEFAULT_PORT = 8080;

// portFromEnv returns the port to listen on: $PORT, or DEFAULT_PORT when it
// is unset or empty. Anything but an integer 0..65535 is an error naming
// PORT, rather than a silent listen on a port nobody posts to.
function portFromEnv(env) {
  const raw = env.PORT;
  if (raw === undefined || raw === '') return DEFAULT_PORT;
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) {
    throw new Error(`PORT must be an integer from 0 to 65535, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

// createReceiver returns an http.Server (not yet listening).
//   secret            "whsec_..." (required)
//   apply(event, meta) async: the effect; meta = {id, epoch, path} (path: the
//                     request path, e.g. /ferry/orders: one per ferry stream)
//   toleranceSeconds  allowed clock difference (default 300)
//   now()             milliseconds clock (default Date.now)
//   seenFile          optional file persisting applied ids
function createReceiver({ secret, apply, toleranceSeconds = 300, now = Date.now, seenFile } = {}) {
  const key = decodeSecret(secret);
  if (typeof apply !== 'function') throw new Error('apply must be a function');
  const seen = new SeenIds(seenFile);
  const inFlight = new Set();

  const reply = (res, code, obj, headers = {}) => {
    res.writeHead(code, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(obj));
  };

  return http.createServer((req, res) => {
    if (req.method !== 'POST') return reply(res, 405, { error: 'POST only' });
    const chunks = [];
    let size = 0;
    let tooBig = false;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) tooBig = true;
      else chunks.push(c);
    });
    req.on('end', async () => {
      if (tooBig) return reply(res, 413, { error: 'body too large' });
      const body = Buffer.concat(chunks);
      let id;
      try {
        id = verify(key, req.headers, body, now(), toleranceSeconds);
      } catch (err) {
        return reply(res, 401, { error: err.message });
      }
      if (seen.has(id)) return reply(res, 200, { id, duplicate: true });
      if (inFlight.has(id)) {
        // The same event is being applied by a concurrent request: ask
        // ferry to come back rather than apply it twice.
        return reply(res, 503, { error: 'delivery in progress' }, { 'retry-after': '1' });
      }
      let event;
      try {
        event = JSON.parse(body.toString('utf8'));
      } catch {
        return reply(res, 400, { error: 'body is not JSON' });
      }
      inFlight.add(id);
      try {
        await apply(event, { id, epoch: Number(req.headers['ferry-epoch'] || 0), path: req.url });
        seen.add(id);
        reply(res, 200, { id, applied: true });
      } catch (err) {
        // Not recorded as seen: ferry retries and the effect runs again.
        reply(res, 500, { error: 'apply failed' });
      } finally {
        inFlight.delete(id);
      }
    });
  });
}

module.exports = { createReceiver, verify, sign, decodeSecret, portFromEnv, DEFAULT_PORT };

if (require.main === module) {
  let server;
  let port;
  try {
    port = portFromEnv(process.env);
    if (!process.env.WEBHOOK_SECRET) throw new Error('WEBHOOK_SECRET is not set (the whsec_… secret ferry signs with)');
    server = createReceiver({
      secret: process.env.WEBHOOK_SECRET,
      seenFile: process.env.SEEN_FILE,
      apply: async (event, { id, epoch, path }) => {
        // Replace with the real effect. Never log whole documents.
        console.log(JSON.stringify({ msg: 'applied', id, epoch, path, op: event.operationType, ns: event.ns }));
      },
    });
  } catch (err) {
    console.error(JSON.stringify({ msg: 'cannot start', error: err.message }));
    process.exit(1);
  }
  // All interfaces: Cloud Run sends requests to the ingress port from
  // outside the container, and ferry posts to localhost.
  server.listen(port, () => console.log(JSON.stringify({ msg: 'listening', port: server.address().port })));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
