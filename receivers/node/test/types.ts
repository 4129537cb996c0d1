// Compiled (not run) by types.test.js: what a TypeScript user writes.
import http from 'node:http';
import { MongoClient } from 'mongodb';
import { ferryReceiver, classifyDelete, PermanentError, type ChangeEvent } from '..';

interface Session {
  _id: string;
  userId: string;
  expireAt: Date;
}

const client = new MongoClient('mongodb://localhost:27017');
const receiver = ferryReceiver({ secret: 'whsec_x', mongo: client, db: 'app' });

const expired = receiver.handler<Session>(async (event: ChangeEvent<Session>, { session, id }) => {
  const before = event.fullDocumentBeforeChange;
  if (!before) throw new PermanentError(`event ${id} has no pre-image`);
  if (classifyDelete(event, { field: 'expireAt', expireAfterSeconds: 0 }).cause !== 'ttl') return;
  await client.db('app').collection('audit').insertOne({ userId: before.userId, at: before.expireAt }, { session });
});
http.createServer(expired).listen(8081);

const emails = receiver.externalHandler(async (_event, { idempotencyKey, claims }) => {
  const key: string = idempotencyKey;
  const n: number = claims;
  void key;
  void n;
});
void emails;

// @ts-expect-error: a claim context has no session
receiver.externalHandler(async (_e, { session }) => void session);
// @ts-expect-error: the effect is required
receiver.handler();
void receiver.close({ timeoutMs: 8000 });
