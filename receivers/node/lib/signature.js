'use strict';
// Webhook signatures, checked by the Standard Webhooks reference library
// (https://www.standardwebhooks.com): the HMAC-SHA256 of
// `${webhook-id}.${webhook-timestamp}.${raw body}` under the key of the
// `whsec_…` secret, compared in constant time with each `v1,` signature of
// webhook-signature, and a timestamp within 5 minutes of this clock.
//
// Only the id, the timestamp and the body are signed. Ferry's other headers
// (Ferry-Stream, Ferry-Operation, Ferry-Epoch) are not: they select how a
// verified body is handled, never what it says.

const { Webhook, WebhookVerificationError } = require('standardwebhooks');

/** verifier returns a function(body, headers) that returns the verified
 * event id or throws a WebhookVerificationError. */
function verifier(secret) {
  if (typeof secret !== 'string' || !secret.startsWith('whsec_')) {
    throw new TypeError('ferryReceiver: secret must be the "whsec_…" secret Ferry signs with (sink.webhook.secret)');
  }
  const wh = new Webhook(secret);
  return (body, headers) => {
    wh.verify(body, headers, { jsonParse: false });
    return headers['webhook-id'];
  };
}

module.exports = { verifier, WebhookVerificationError };
