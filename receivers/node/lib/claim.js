'use strict';
// Effects outside MongoDB (an email, a payment API call): a claim with a
// timeout, then the effect, then "done".
//
// No transaction can span MongoDB and a third party, so this path cannot
// promise exactly once by itself. What it gives:
//   - a claimed or done event is never started again while its claim runs
//     or after it is done (replays answer "in progress" or "duplicate");
//   - the effect can run a second time only if the instance that claimed
//     it dies (or overruns claimSeconds) after starting the effect and
//     before marking it done; the claim then expires and a replay claims it
//     again. Hand ctx.idempotencyKey to the downstream call (Stripe's
//     Idempotency-Key, an email provider's message id) and the downstream
//     absorbs that repeat too: exactly once end to end, for downstreams that
//     honour such a key; at least once for those that do not.
// Claim expiry is judged by the database server's clock ($$NOW), never by
// comparing instances' clocks.

const crypto = require('node:crypto');
const { key } = require('./records');
const { IN_PROGRESS } = require('./transaction');

/**
 * applyWithClaim applies delivery d with effect (an async function(event,
 * ctx)) under a claim and returns 'applied', 'duplicate' or 'in-progress'.
 * If the effect throws, the claim is released (the next delivery runs it
 * again) and the error propagates.
 */
async function applyWithClaim(r, d, effect, claimSeconds) {
  const claimant = crypto.randomUUID();
  const _id = key(d.stream, d.id);
  const claimMs = claimSeconds * 1000;
  let claimed;
  try {
    // Matches only a claim that expired; otherwise the upsert inserts a new
    // claim, or fails with a duplicate key error when a record exists that
    // is done or still claimed.
    claimed = await r.records.findOneAndUpdate(
      { _id, state: 'claimed', $expr: { $lt: ['$claimedUntil', '$$NOW'] } },
      [
        {
          $set: {
            state: 'claimed',
            claimant,
            claimedUntil: { $add: ['$$NOW', claimMs] },
            claims: { $add: [{ $ifNull: ['$claims', 0] }, 1] },
            expireAt: { $add: ['$$NOW', claimMs + r.retentionSeconds * 1000] },
            epoch: d.epoch,
            op: d.operation,
          },
        },
      ],
      { upsert: true, returnDocument: 'after' },
    );
  } catch (err) {
    if (err && err.code === 11000) {
      const rec = await r.records.findOne({ _id }, { projection: { state: 1 } });
      if (rec && rec.state === 'done') return 'duplicate';
      return IN_PROGRESS; // claimed by another delivery, not expired (or gone: retry)
    }
    throw err;
  }
  if (!claimed || claimed.claimant !== claimant) return IN_PROGRESS;
  try {
    await effect(d.event, { ...d.ctx, claims: claimed.claims });
  } catch (err) {
    await r.records.deleteOne({ _id, claimant, state: 'claimed' }).catch(() => {});
    throw err;
  }
  const done = await r.records.updateOne(
    { _id, claimant },
    [{ $set: { state: 'done', appliedAt: '$$NOW', expireAt: { $add: ['$$NOW', r.retentionSeconds * 1000] } } }],
  );
  if (done.matchedCount !== 1) {
    // The claim expired during the effect and another delivery claimed the
    // event: the effect may have run twice (the downstream's idempotency
    // key is what absorbs it). Reported, not hidden.
    r.log.warn('ferry receiver: claim expired during the effect; raise claimSeconds', {
      stream: d.stream,
      id: shortId(d.id),
      claimSeconds,
    });
  }
  return 'applied';
}

function shortId(id) {
  return typeof id === 'string' ? id.slice(0, 16) : id;
}

module.exports = { applyWithClaim, shortId };
