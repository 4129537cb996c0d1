'use strict';
// What an effect can say about its own failure, and how each answer maps to
// what Ferry does next.
//
// An effect that throws anything else is retried by Ferry (the receiver
// answers 500 or nacks): the transaction rolled back, or the claim was
// released, so nothing was recorded and the retry applies the event again.

/**
 * PermanentError marks an event that can never be applied (bad data, a
 * reference that will never exist). The receiver answers 422, which Ferry's
 * webhook sink dead-letters without retrying; fix the cause, then
 * `ferry dlq replay`. Over Pub/Sub the message is nacked (the subscription's
 * dead-letter policy takes it after its delivery attempts).
 */
class PermanentError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'PermanentError';
  }
}

/**
 * RetryLaterError asks Ferry to come back after `retryAfterSeconds`
 * (answered 503 with Retry-After; Ferry honours it up to 60 s). Nothing is
 * recorded.
 */
class RetryLaterError extends Error {
  constructor(message, retryAfterSeconds = 1, options) {
    super(message, options);
    this.name = 'RetryLaterError';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

module.exports = { PermanentError, RetryLaterError };
