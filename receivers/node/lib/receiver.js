'use strict';
// ferryReceiver: one object per service instance, holding what every
// delivery needs (the signing secret, the MongoDB client, the shared
// records) and the deliveries in flight, so close() can drain them.

const { verifier, WebhookVerificationError } = require('./signature');
const { parseEvent } = require('./event');
const { ensureRecords, DEFAULT_COLLECTION, DEFAULT_RETENTION_SECONDS } = require('./records');
const { applyInTransaction, IN_PROGRESS } = require('./transaction');
const { applyWithClaim, shortId } = require('./claim');
const { PermanentError, RetryLaterError } = require('./errors');
const { httpHandler } = require('./http');
const { pubsubHandler } = require('./pubsub');

const DEFAULT_CLAIM_SECONDS = 60;
const DEFAULT_CONFLICT_WAIT_MS = 2000;
const DEFAULT_CLOSE_TIMEOUT_MS = 8000;
const CLOSE_GRACE_MS = 1000;

/**
 * ferryReceiver returns a receiver for Ferry's deliveries. Options:
 *   secret          "whsec_…": the webhook sink's secret (required for
 *                   webhook handlers; Pub/Sub messages are not signed)
 *   mongo           a connected MongoClient (required): the records live
 *                   there, and handler() effects run in its transactions
 *   db              database name (or Db) of the records (required)
 *   collection      records' collection (default "ferry_receipts")
 *   retentionSeconds how long a record is kept (default 8 days: Ferry's
 *                   ledger keeps 7)
 *   claimSeconds    external effects: how long a claim holds (default 60)
 *   conflictWaitMs  how long a delivery waits for a concurrent delivery of
 *                   the same event before answering "in progress" (2000)
 *   useBigInt64     int64 values as bigint (default: number when exact,
 *                   else Long, as the driver does)
 *   log             function(level, message, fields) (default: warn and
 *                   error as JSON lines on stderr)
 *   onDelivery      function({stream, id, outcome, status, ms, error})
 *                   called after every delivery (metrics, tests)
 */
function ferryReceiver(options = {}) {
  const problems = [];
  const { mongo } = options;
  if (!mongo || typeof mongo.startSession !== 'function') problems.push('mongo: a MongoClient is required (the records and the transactions use it)');
  let db = options.db;
  if (typeof db === 'string') {
    if (db === '') problems.push('db: a database name is required');
    else if (mongo && typeof mongo.db === 'function') db = mongo.db(db);
  } else if (!db || typeof db.collection !== 'function') {
    problems.push('db: a database name (or Db) is required for the records');
  }
  const retentionSeconds = options.retentionSeconds ?? DEFAULT_RETENTION_SECONDS;
  if (!(Number.isInteger(retentionSeconds) && retentionSeconds >= 3600)) problems.push(`retentionSeconds: an integer of at least 3600 is required (Ferry's ledger keeps events 7 days; default ${DEFAULT_RETENTION_SECONDS}), got ${retentionSeconds}`);
  const claimSeconds = options.claimSeconds ?? DEFAULT_CLAIM_SECONDS;
  if (!(claimSeconds > 0)) problems.push(`claimSeconds: must be positive, got ${claimSeconds}`);
  const conflictWaitMs = options.conflictWaitMs ?? DEFAULT_CONFLICT_WAIT_MS;
  if (!(conflictWaitMs >= 0)) problems.push(`conflictWaitMs: must be 0 or more, got ${conflictWaitMs}`);
  let verify = null;
  if (options.secret !== undefined) {
    try {
      verify = verifier(options.secret);
    } catch (err) {
      problems.push(err.message.replace(/^ferryReceiver: /, ''));
    }
  }
  if (problems.length) throw new TypeError('ferryReceiver: ' + problems.join('; '));

  const r = {
    client: mongo,
    db,
    records: db.collection(options.collection || DEFAULT_COLLECTION),
    retentionSeconds,
    conflictWaitMs,
    useBigInt64: !!options.useBigInt64,
    log: logger(options.log),
    onDelivery: typeof options.onDelivery === 'function' ? options.onDelivery : null,
    verify,
    closing: false,
    inFlight: new Set(),
    ready: null,
  };

  // ready creates the records' index once; every delivery waits for it.
  const ready = () => {
    if (!r.ready) {
      r.ready = ensureRecords(r.records).catch((err) => {
        r.ready = null; // try again with the next delivery
        throw err;
      });
    }
    return r.ready;
  };

  // deliver applies one delivery and returns its outcome:
  // {outcome, status, retryAfter?, inProgress?, message?}.
  async function deliver(input, effect, { external = false, claimSeconds: cs = claimSeconds } = {}) {
    const started = Date.now();
    const res = await decide(input, effect, external, cs);
    if (r.onDelivery) {
      try {
        r.onDelivery({ stream: input.stream, id: input.id, outcome: res.outcome, status: res.status, ms: Date.now() - started, error: res.error });
      } catch {
        // a hook's failure is not the delivery's
      }
    }
    return res;
  }

  async function decide(input, effect, external, cs) {
    if (r.closing) return { outcome: 'closing', status: 503, retryAfter: 1, message: 'receiver closing' };
    if (!input.id) return { outcome: 'rejected', status: 400, message: 'no event id' };
    let event;
    try {
      event = parseEvent(input.body, { operation: input.operation, namespace: input.namespace, useBigInt64: r.useBigInt64 });
    } catch (err) {
      return { outcome: 'rejected', status: 400, message: err.message };
    }
    const ac = new AbortController();
    const d = {
      id: input.id,
      stream: input.stream,
      epoch: input.epoch,
      operation: event.operationType,
      event,
      signal: ac.signal,
      ctx: {
        id: input.id,
        stream: input.stream,
        epoch: input.epoch,
        db: r.db,
        client: r.client,
        idempotencyKey: `${input.stream}:${input.id}`,
        signal: ac.signal,
      },
    };
    const entry = { abort: (why) => ac.abort(why), done: null };
    entry.done = (async () => {
      try {
        await ready();
        const outcome = external ? await applyWithClaim(r, d, effect, cs) : await applyInTransaction(r, d, effect);
        if (outcome === IN_PROGRESS) return { outcome, status: 503, retryAfter: 1, inProgress: true, message: 'another delivery of this event is being applied' };
        return { outcome, status: 200 };
      } catch (err) {
        return failure(err, d);
      }
    })();
    r.inFlight.add(entry);
    try {
      return await entry.done;
    } finally {
      r.inFlight.delete(entry);
    }
  }

  function failure(err, d) {
    if (err instanceof PermanentError) {
      r.log('warn', 'ferry receiver: effect failed for good', { stream: d.stream, id: shortId(d.id), error: err.message });
      return { outcome: 'permanent', status: 422, message: err.message, error: err };
    }
    if (err instanceof RetryLaterError) {
      return { outcome: 'retry', status: 503, retryAfter: err.retryAfterSeconds, message: err.message, error: err };
    }
    if (d.signal.aborted) return { outcome: 'closing', status: 503, retryAfter: 1, message: 'receiver closing', error: err };
    r.log('error', 'ferry receiver: effect failed; Ferry will retry', { stream: d.stream, id: shortId(d.id), error: err && err.message });
    return { outcome: 'failed', status: 500, message: 'effect failed', error: err };
  }

  const receiver = {
    /** handler(effect, {stream, external, claimSeconds}) serves Ferry's
     * webhook on node:http, Express or Fastify. effect(event, ctx) runs in
     * a MongoDB transaction (ctx.session) unless external is set. */
    handler(effect, opts = {}) {
      if (!verify) throw new TypeError('ferryReceiver: handler needs the webhook secret (option secret)');
      checkEffect(effect);
      return httpHandler(r, verify, deliver, effect, opts);
    },
    /** externalHandler(effect, opts) is handler with external: true. */
    externalHandler(effect, opts = {}) {
      return receiver.handler(effect, { ...opts, external: true });
    },
    /** pubsubHandler(effect, {stream, external}) returns a function(message)
     * for a Pub/Sub subscription's "message" event. */
    pubsubHandler(effect, opts = {}) {
      checkEffect(effect);
      return pubsubHandler(r, deliver, effect, opts);
    },
    /** deliver(input, effect, opts) is the framework-free core. */
    deliver,
    /** ready() creates the records' TTL index; deliveries call it too. */
    ready,
    /** close({timeoutMs}) stops taking deliveries (503) and waits for those
     * in flight; at timeoutMs their transactions are rolled back (Ferry
     * replays them elsewhere) and their ctx.signal aborts. */
    async close({ timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS } = {}) {
      r.closing = true;
      const all = () => Promise.allSettled([...r.inFlight].map((e) => e.done));
      let timer;
      const expired = new Promise((resolve) => {
        timer = setTimeout(resolve, timeoutMs, 'timeout');
      });
      const first = await Promise.race([all().then(() => 'drained'), expired]);
      clearTimeout(timer);
      if (first === 'timeout') {
        for (const e of r.inFlight) e.abort(new Error('receiver closed before the effect finished'));
        // An effect that ignores ctx.signal may run on; its transaction is
        // rolled back when it returns. close does not wait for it past a
        // short grace.
        let grace;
        await Promise.race([all(), new Promise((resolve) => (grace = setTimeout(resolve, CLOSE_GRACE_MS)))]);
        clearTimeout(grace);
      }
      return first;
    },
    get inFlight() {
      return r.inFlight.size;
    },
    records: r.records,
  };
  return receiver;
}

function checkEffect(effect) {
  if (typeof effect !== 'function') throw new TypeError('ferryReceiver: the effect must be an async function(event, ctx)');
}

function logger(log) {
  if (typeof log === 'function') return log;
  return (level, message, fields) => {
    if (level === 'warn' || level === 'error') process.stderr.write(JSON.stringify({ level, msg: message, ...fields }) + '\n');
  };
}

module.exports = { ferryReceiver };
