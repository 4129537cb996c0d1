'use strict';
// @ferry-io/receiver: receive Ferry's deliveries (webhook or Pub/Sub) and
// apply each MongoDB change once. See README.md for the guarantees.

const { ferryReceiver } = require('./lib/receiver');
const { PermanentError, RetryLaterError } = require('./lib/errors');
const { parseEvent, BACKFILL } = require('./lib/event');
const { rawJSON } = require('./lib/http');
const { verifier } = require('./lib/signature');
const { classifyDelete, readTtlIndex, prepareTtlSource } = require('./lib/ttl');
const { DEFAULT_COLLECTION, DEFAULT_RETENTION_SECONDS } = require('./lib/records');

module.exports = {
  ferryReceiver,
  PermanentError,
  RetryLaterError,
  parseEvent,
  rawJSON,
  verifier,
  classifyDelete,
  readTtlIndex,
  prepareTtlSource,
  BACKFILL,
  DEFAULT_COLLECTION,
  DEFAULT_RETENTION_SECONDS,
};
