'use strict';
// An example service for ferry's webhook sink, on @ferry-io/receiver
// (receivers/node). It is what our first users run on Cloud Run: several
// instances, each reacting to documents that expire (TTL) or change, each
// change's effect applied once whichever instance ferry delivers it to.
//
// The effect here records one document per applied event in the
// EFFECTS_COLLECTION collection, in the same transaction as the event's
// idempotency record, so a replay (after a crash, a takeover, a redeploy)
// is answered 200 and applied nowhere. Replace `effect` with your own
// writes, made with ctx.session.
//
// Environment:
//   WEBHOOK_SECRET      the whsec_… secret ferry signs with (required)
//   MONGODB_URI         where the records and the effects live (required)
//   DB                  their database (default "app")
//   EFFECTS_COLLECTION  the example effect's collection (default "effects")
//   TTL_FIELD           the source's TTL field, to tell TTL expiries from
//                       application deletes (default "expireAt")
//   PORT, HOST          where to listen (default 3000, all interfaces);
//                       Cloud Run sets PORT in the ingress container
//   EFFECT_DELAY_MS     make the effect take this long (demos, tests)
//   DRAIN_MS            how long SIGTERM waits for deliveries in flight
//                       (default 8000: Cloud Run kills at 10 s)
//   INSTANCE            a name recorded with each effect (default: hostname)
//   LOG_DELIVERIES=1    one JSON line on stdout when an effect starts
//                       ({"msg":"effect",stream,id}) and one per delivery
//                       ({"msg":"delivery",stream,id,outcome,status,ms});
//                       id is the event id's first 16 characters
//   DEDUPE=memory       the pattern the library replaces, for comparison
//                       only: ids remembered in this process's memory, the
//                       effect outside any transaction. Replays after a
//                       takeover reach another instance and apply twice.

const http = require('node:http');
const os = require('node:os');
const { MongoClient } = require('mongodb');
const { ferryReceiver, classifyDelete, parseEvent, verifier } = require('@ferry-io/receiver');

/** DEFAULT_PORT: not ferry's default ops port (8080) on one host. */
const DEFAULT_PORT = 3000;

// config reads the environment, naming every problem.
function config(env) {
  const problems = [];
  if (!env.WEBHOOK_SECRET) problems.push('WEBHOOK_SECRET is not set (the whsec_… secret ferry signs with)');
  if (!env.MONGODB_URI) problems.push('MONGODB_URI is not set (where the idempotency records and the effects live)');
  let port = DEFAULT_PORT;
  if (env.PORT !== undefined && env.PORT !== '') {
    if (!/^\d+$/.test(env.PORT) || Number(env.PORT) > 65535) problems.push(`PORT must be an integer from 0 to 65535, got ${JSON.stringify(env.PORT)}`);
    else port = Number(env.PORT);
  }
  const delay = Number(env.EFFECT_DELAY_MS || 0);
  if (!(delay >= 0)) problems.push(`EFFECT_DELAY_MS must be a number of milliseconds, got ${JSON.stringify(env.EFFECT_DELAY_MS)}`);
  const drain = Number(env.DRAIN_MS || 8000);
  if (!(drain >= 0)) problems.push(`DRAIN_MS must be a number of milliseconds, got ${JSON.stringify(env.DRAIN_MS)}`);
  if (env.DEDUPE && env.DEDUPE !== 'memory') problems.push(`DEDUPE may only be "memory" (the comparison mode), got ${JSON.stringify(env.DEDUPE)}`);
  if (env.LOG_DELIVERIES && !['0', '1'].includes(env.LOG_DELIVERIES)) problems.push(`LOG_DELIVERIES must be 1 (log) or 0, got ${JSON.stringify(env.LOG_DELIVERIES)}`);
  if (problems.length) throw new Error(problems.join('; '));
  return {
    secret: env.WEBHOOK_SECRET,
    uri: env.MONGODB_URI,
    db: env.DB || 'app',
    effects: env.EFFECTS_COLLECTION || 'effects',
    ttlField: env.TTL_FIELD || 'expireAt',
    port,
    host: env.HOST || undefined,
    delay,
    drain,
    instance: env.INSTANCE || os.hostname(),
    memory: env.DEDUPE === 'memory',
    logDeliveries: env.LOG_DELIVERIES === '1',
  };
}

// effectDoc is what the example effect records: which event, which
// stream, and (for a delete) whether it was a TTL expiry.
function effectDoc(cfg, event, ctx) {
  const doc = { stream: ctx.stream, id: ctx.id, op: event.operationType, key: event.documentKey, instance: cfg.instance, at: new Date() };
  if (event.operationType === 'delete') doc.cause = classifyDelete(event, { field: cfg.ttlField, expireAfterSeconds: 0 }).cause;
  return doc;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// deliveryLog returns the LOG_DELIVERIES lines' writers (no-ops when
// off): effect(stream, id) when an effect starts, delivery({stream, id,
// outcome, status, ms}) when a delivery is answered. Ids are shortened, as
// the library's own logs shorten them.
function deliveryLog(cfg) {
  if (!cfg.logDeliveries) return { effect: () => {}, delivery: () => {} };
  const short = (id) => (typeof id === 'string' ? id.slice(0, 16) : id);
  return {
    effect: (stream, id) => console.log(JSON.stringify({ msg: 'effect', stream, id: short(id) })),
    delivery: (d) => console.log(JSON.stringify({ msg: 'delivery', stream: d.stream, id: short(d.id), outcome: d.outcome, status: d.status, ms: d.ms })),
  };
}

function createService(cfg, client) {
  const effects = client.db(cfg.db).collection(cfg.effects);
  const log = deliveryLog(cfg);
  if (cfg.memory) return { server: http.createServer(memoryHandler(cfg, effects, log)), close: async () => {} };
  const receiver = ferryReceiver({ secret: cfg.secret, mongo: client, db: cfg.db, onDelivery: cfg.logDeliveries ? log.delivery : undefined });
  const handle = receiver.handler(async (event, ctx) => {
    log.effect(ctx.stream, ctx.id);
    if (cfg.delay) await sleep(cfg.delay);
    // Never log whole documents: ids and the operation only.
    await effects.insertOne(effectDoc(cfg, event, ctx), { session: ctx.session });
  });
  // The records' index and the effects' collection exist before the first
  // delivery: a transaction that creates a collection conflicts with every
  // other transaction creating it, which would only be retried.
  const ready = async () => {
    await receiver.ready();
    const have = await client.db(cfg.db).listCollections({ name: cfg.effects }, { nameOnly: true }).toArray();
    if (have.length === 0) await client.db(cfg.db).createCollection(cfg.effects).catch((err) => {
      if (err.code !== 48) throw err; // NamespaceExists: another instance made it
    });
  };
  return { server: http.createServer(handle), close: (timeoutMs) => receiver.close({ timeoutMs }), ready };
}

// memoryHandler is the pattern the library replaces: verify, remember ids
// in this process only, apply outside any transaction.
function memoryHandler(cfg, effects, log) {
  const verify = verifier(cfg.secret);
  const seen = new Set();
  return async (req, res) => {
    const started = Date.now();
    const answer = (status, outcome, stream, id) => {
      res.writeHead(status).end(outcome ? JSON.stringify({ outcome }) : undefined);
      if (id) log.delivery({ stream, id, outcome: outcome || 'failed', status, ms: Date.now() - started });
    };
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    let id;
    try {
      id = verify(body, req.headers);
    } catch {
      res.writeHead(401).end();
      return;
    }
    const stream = req.headers['ferry-stream'] || req.url;
    if (seen.has(stream + id)) {
      answer(200, 'duplicate', stream, id);
      return;
    }
    try {
      const event = parseEvent(body, { operation: req.headers['ferry-operation'] });
      log.effect(stream, id);
      if (cfg.delay) await sleep(cfg.delay);
      await effects.insertOne(effectDoc(cfg, event, { stream, id }));
      seen.add(stream + id);
      answer(200, 'applied', stream, id);
    } catch {
      answer(500, null, stream, id);
    }
  };
}

module.exports = { config, createService, DEFAULT_PORT };

if (require.main === module) {
  (async () => {
    let cfg;
    try {
      cfg = config(process.env);
    } catch (err) {
      console.error(JSON.stringify({ msg: 'cannot start', error: err.message }));
      process.exit(1);
    }
    const client = new MongoClient(cfg.uri);
    await client.connect();
    const svc = createService(cfg, client);
    if (svc.ready) await svc.ready();
    svc.server.listen(cfg.port, cfg.host, () => {
      const a = svc.server.address();
      console.log(JSON.stringify({ msg: 'listening', host: a.address, port: a.port, mode: cfg.memory ? 'memory' : 'library' }));
    });
    process.once('SIGTERM', async () => {
      // Stop taking deliveries (503: ferry retries them elsewhere), let
      // those in flight finish within DRAIN_MS, then exit.
      const drained = await svc.close(cfg.drain);
      svc.server.close();
      await client.close();
      console.log(JSON.stringify({ msg: 'stopped', drained }));
      process.exit(0);
    });
  })().catch((err) => {
    console.error(JSON.stringify({ msg: 'cannot start', error: err.message }));
    process.exit(1);
  });
}
