'use strict';
// Exactly once for effects in MongoDB: the idempotency record and the
// effect's writes commit in one transaction.
//
// The record is written first, as an upsert whose update only sets fields
// on insert ($setOnInsert), and upsertedCount says whether this delivery
// made it:
//   - 1: first delivery; the effect runs in the same transaction and both
//     commit together, or neither does;
//   - 0: the record was there, committed: a replay. Nothing is written and
//     the delivery is answered as a duplicate.
// Never insert-and-catch-11000: a duplicate key error aborts the whole
// transaction on the server, so the commit that follows fails with
// NoSuchTransaction (TransientTransactionError) and a withTransaction loop
// runs the callback again, into the same error, for 120 s.
//
// Two deliveries of one event at once (a takeover while the old owner's
// request is still running) race on the record's key: the second write
// fails at once with WriteConflict (TransientTransactionError) while the
// first transaction is open. The loser retries for up to conflictWaitMs,
// then reports "in progress", which Ferry retries later without counting it
// as a failed attempt; by then the first transaction committed (the retry
// is a duplicate) or aborted (the retry applies).

const { key } = require('./records');

const IN_PROGRESS = 'in-progress';

/**
 * applyInTransaction applies delivery d once with effect (an async
 * function(event, ctx) doing its writes with ctx.session) and returns
 * 'applied', 'duplicate' or 'in-progress'. Other failures throw: nothing
 * was committed.
 */
async function applyInTransaction(r, d, effect) {
  const deadline = Date.now() + r.conflictWaitMs;
  for (let wait = 25; ; wait = Math.min(wait * 2, 400)) {
    try {
      return await once(r, d, effect);
    } catch (err) {
      if (!isConflict(err) || d.signal.aborted) throw err;
      if (Date.now() + wait > deadline) return IN_PROGRESS;
      await sleep(wait, d.signal);
    }
  }
}

async function once(r, d, effect) {
  const session = r.client.startSession();
  try {
    session.startTransaction({
      readConcern: { level: 'snapshot' },
      writeConcern: { w: 'majority' },
      readPreference: 'primary',
    });
    const now = new Date();
    const res = await r.records.updateOne(
      { _id: key(d.stream, d.id) },
      {
        $setOnInsert: {
          state: 'done',
          appliedAt: now,
          expireAt: new Date(now.getTime() + r.retentionSeconds * 1000),
          epoch: d.epoch,
          op: d.operation,
        },
      },
      { upsert: true, session },
    );
    if (res.upsertedCount !== 1) {
      const rec = await r.records.findOne({ _id: key(d.stream, d.id) }, { session, projection: { state: 1 } });
      await session.abortTransaction();
      return rec && rec.state === 'claimed' ? IN_PROGRESS : 'duplicate';
    }
    await effect(d.event, { ...d.ctx, session });
    if (d.signal.aborted) {
      // The receiver is closing and its drain time is up: roll back, so the
      // replay Ferry makes elsewhere applies the event there.
      throw d.signal.reason || new Error('receiver closing');
    }
    await commit(session);
    return 'applied';
  } catch (err) {
    if (session.inTransaction()) await session.abortTransaction().catch(() => {});
    throw err;
  } finally {
    await session.endSession().catch(() => {});
  }
}

// commit commits, retrying a commit whose outcome is unknown (a retried
// commit of a committed transaction succeeds). If the outcome stays unknown
// the error propagates: the delivery is answered retryable, and the replay
// finds the record if the commit happened.
async function commit(session) {
  for (let i = 0; ; i++) {
    try {
      return await session.commitTransaction();
    } catch (err) {
      if (i < 3 && hasLabel(err, 'UnknownTransactionCommitResult')) continue;
      throw err;
    }
  }
}

// isConflict reports whether err is the other delivery's open transaction
// holding the record (or another transient transaction failure): the
// whole transaction may be tried again.
function isConflict(err) {
  return err && (err.code === 112 || hasLabel(err, 'TransientTransactionError'));
}

function hasLabel(err, label) {
  return !!(err && typeof err.hasErrorLabel === 'function' && err.hasErrorLabel(label));
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

module.exports = { applyInTransaction, isConflict, hasLabel, sleep, IN_PROGRESS };
