'use strict';
// The same core for a Pub/Sub subscriber. Ferry's pubsub sink publishes
// each event as one message whose data is the change event (Extended JSON)
// and whose attributes carry the event id (ferry-event-id), the stream
// (ferry-stream), the operation, the namespace and the lease epoch.
//
// Pub/Sub redelivers (at least once), and a replay Ferry publishes after a
// takeover is a second message with a new message id and the same
// ferry-event-id: the records absorb both. The message is acked once the
// effect and its record committed (or it was a duplicate) and nacked
// otherwise, so Pub/Sub delivers it again; a PermanentError is nacked too
// (give the subscription a dead-letter topic to take it after its delivery
// attempts). An "in progress" answer waits and tries again here: the
// client library extends the message's ack deadline meanwhile.

const { IN_PROGRESS, sleep } = require('./transaction');

const ATTR = {
  id: 'ferry-event-id',
  stream: 'ferry-stream',
  epoch: 'ferry-epoch',
  operation: 'ferry-operation',
  namespace: 'ferry-namespace',
};

function pubsubHandler(r, deliver, effect, opts) {
  const maxWaitMs = opts.inProgressWaitMs ?? 120000;
  return async function ferryMessage(message) {
    const a = message.attributes || {};
    const input = {
      id: a[ATTR.id],
      stream: opts.stream ?? a[ATTR.stream] ?? opts.subscription ?? '',
      epoch: Number(a[ATTR.epoch] || 0),
      operation: a[ATTR.operation],
      namespace: a[ATTR.namespace],
      body: message.data,
    };
    const until = Date.now() + maxWaitMs;
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      const res = await deliver(input, effect, opts);
      if (res.status === 200) {
        message.ack();
        return res;
      }
      if (res.outcome !== IN_PROGRESS || Date.now() + wait > until || r.closing) {
        message.nack();
        return res;
      }
      await sleep(wait, new AbortController().signal);
    }
  };
}

module.exports = { pubsubHandler, ATTR };
