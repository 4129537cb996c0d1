'use strict';
// The webhook handler on plain node:http, Express and Fastify.
//
// The signature covers the raw body, so the handler needs the bytes Ferry
// sent, not a parsed object:
//   - node:http, or Express without a body parser on the route: the handler
//     reads the request itself;
//   - Express with express.raw({type: 'application/json'}): req.body is the
//     Buffer;
//   - Fastify: register the content-type parser `rawJSON` exported by this
//     package (parseAs buffer) in the route's context, so request.body is the
//     Buffer.
// A body already parsed into an object cannot be verified: the handler
// answers 500 (retryable: nothing is lost while the route is fixed) and
// logs how to mount it.

const { WebhookVerificationError } = require('./signature');

const DEFAULT_MAX_BODY = 64 << 20; // change events are at most 16 MiB of BSON

/** httpHandler returns the request handler of handler(). */
function httpHandler(r, verify, deliver, effect, opts) {
  const maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY;
  return async function ferryWebhook(req, res) {
    // Fastify passes (request, reply): the Node objects are .raw.
    const fastify = res && typeof res.code === 'function' && res.raw !== undefined;
    const send = fastify ? sendFastify(res) : sendNode(res);
    if ((req.method || (req.raw && req.raw.method)) !== 'POST') return send(405, { error: 'POST only' });
    const headers = req.headers || (req.raw && req.raw.headers) || {};
    let body;
    try {
      body = await rawBody(req, maxBody);
    } catch (err) {
      if (err.status === 413) return send(413, { error: 'body too large' });
      if (err.status === 500) {
        r.log('error', err.message, {});
        return send(500, { error: 'receiver misconfigured: body already parsed' });
      }
      return send(400, { error: 'could not read the body' });
    }
    let id;
    try {
      id = verify(body, headers);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return send(401, { error: err.message });
      throw err;
    }
    const fromHeader = headers['ferry-stream'];
    const stream = opts.stream ?? fromHeader ?? pathOf(req);
    if (opts.stream !== undefined && fromHeader !== undefined && fromHeader !== opts.stream) {
      return send(400, { error: `this route serves stream ${JSON.stringify(opts.stream)}, the delivery is of ${JSON.stringify(fromHeader)}: check sink.webhook.url` });
    }
    const res2 = await deliver(
      {
        id,
        stream,
        epoch: Number(headers['ferry-epoch'] || 0),
        operation: headers['ferry-operation'],
        namespace: headers['ferry-namespace'],
        body,
      },
      effect,
      opts,
    );
    const extra = {};
    if (res2.retryAfter) extra['retry-after'] = String(res2.retryAfter);
    // Ferry retries an in-progress answer without counting it as a failed
    // attempt: the event is not at fault, another delivery of it is
    // running.
    if (res2.inProgress) extra['ferry-retry'] = 'in-progress';
    const payload = { outcome: res2.outcome, id };
    if (res2.status >= 300 && res2.message) payload.error = res2.message;
    return send(res2.status, payload, extra);
  };
}

function pathOf(req) {
  const url = req.originalUrl || req.url || (req.raw && req.raw.url) || '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

// rawBody returns the request's bytes: a Buffer body a framework already
// read, or the stream read here (at most max bytes).
async function rawBody(req, max) {
  if (Buffer.isBuffer(req.body)) {
    if (req.body.length > max) throw Object.assign(new Error('too large'), { status: 413 });
    return req.body;
  }
  if (req.body !== undefined && req.body !== null && !(typeof req.body === 'object' && Object.keys(req.body).length === 0 && !req.readableEnded)) {
    throw Object.assign(
      new Error('ferry receiver: the request body was parsed before the handler, so its signature cannot be checked: mount the handler without a JSON body parser (Express: express.raw({type: "application/json"}); Fastify: addContentTypeParser("application/json", {parseAs: "buffer"}, rawJSON))'),
      { status: 500 },
    );
  }
  const stream = req.raw && typeof req.raw.on === 'function' ? req.raw : req;
  const chunks = [];
  let size = 0;
  for await (const c of stream) {
    size += c.length;
    if (size > max) throw Object.assign(new Error('too large'), { status: 413 });
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

function sendNode(res) {
  return (status, obj, headers = {}) => {
    if (res.headersSent) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(obj));
  };
}

function sendFastify(reply) {
  return (status, obj, headers = {}) => {
    reply.code(status).headers({ 'content-type': 'application/json', ...headers });
    return reply.send(JSON.stringify(obj));
  };
}

/** rawJSON is a Fastify content-type parser that keeps the body as bytes:
 * fastify.addContentTypeParser('application/json', {parseAs: 'buffer'}, rawJSON). */
function rawJSON(_req, body, done) {
  done(null, body);
}

module.exports = { httpHandler, rawJSON };
