// Types of @ferry-io/receiver. See README.md for the guarantees.

import type { ClientSession, Collection, Db, Document, MongoClient } from 'mongodb';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** A change event as the mongodb driver presents documents (numbers, Long
 * past 2^53 or bigint with useBigInt64, Date, ObjectId, ...). */
export interface ChangeEvent<TSchema extends Document = Document> {
  _id?: Document;
  operationType: 'insert' | 'update' | 'replace' | 'delete' | 'backfill' | string;
  ns?: { db: string; coll?: string };
  documentKey?: { _id: unknown } & Document;
  fullDocument?: TSchema | null;
  fullDocumentBeforeChange?: TSchema | null;
  updateDescription?: Document;
  clusterTime?: unknown;
  wallTime?: Date;
  lsid?: Document;
  txnNumber?: unknown;
  [field: string]: unknown;
}

/** What every effect receives besides the event. */
export interface EffectContext {
  /** The event id (hex sha256 of the resume token): webhook-id. */
  id: string;
  /** The Ferry stream that delivered it. */
  stream: string;
  /** The lease epoch it was delivered under. */
  epoch: number;
  /** `${stream}:${id}`: hand it to downstream calls as their idempotency key. */
  idempotencyKey: string;
  /** The records' database. */
  db: Db;
  client: MongoClient;
  /** Aborted when close()'s drain time runs out. */
  signal: AbortSignal;
}

/** handler() effects: their writes go through session and commit with the record. */
export interface TransactionContext extends EffectContext {
  session: ClientSession;
}

/** externalHandler() effects: claims counts how many times the event was claimed (2+: a repeat is possible). */
export interface ClaimContext extends EffectContext {
  claims: number;
}

export type Effect<C extends EffectContext, TSchema extends Document = Document> = (event: ChangeEvent<TSchema>, ctx: C) => Promise<void> | void;

export interface ReceiverOptions {
  /** "whsec_…": the webhook sink's secret (required for webhook handlers). */
  secret?: string;
  mongo: MongoClient;
  /** Database (name or Db) of the records. */
  db: string | Db;
  /** Records' collection (default "ferry_receipts"). */
  collection?: string;
  /** How long records are kept, in seconds (default 8 days; at least 3600). */
  retentionSeconds?: number;
  /** External effects: how long a claim holds (default 60). */
  claimSeconds?: number;
  /** How long a delivery waits for a concurrent delivery of the same event (default 2000). */
  conflictWaitMs?: number;
  useBigInt64?: boolean;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown>) => void;
  onDelivery?: (info: DeliveryInfo) => void;
}

export type Outcome = 'applied' | 'duplicate' | 'in-progress' | 'rejected' | 'permanent' | 'retry' | 'failed' | 'closing';

export interface DeliveryInfo {
  stream: string;
  id: string;
  outcome: Outcome;
  status: number;
  ms: number;
  error?: unknown;
}

export interface DeliveryResult {
  outcome: Outcome;
  status: number;
  retryAfter?: number;
  inProgress?: boolean;
  message?: string;
  error?: unknown;
}

export interface DeliveryInput {
  id: string;
  stream: string;
  epoch?: number;
  operation?: string;
  namespace?: string;
  body: Buffer | string;
}

export interface HandlerOptions {
  /** The stream this route serves (default: the Ferry-Stream header, else the path). */
  stream?: string;
  /** Largest body accepted (default 64 MiB). */
  maxBodyBytes?: number;
}

export interface ExternalOptions extends HandlerOptions {
  claimSeconds?: number;
}

/** A request handler for node:http and Express ((req, res)) and Fastify ((request, reply)). */
export type RequestHandler = (req: IncomingMessage | any, res: ServerResponse | any) => Promise<unknown>;

export interface PubSubMessage {
  data: Buffer;
  attributes: Record<string, string>;
  ack(): void;
  nack(): void;
}

export interface Receiver {
  handler<TSchema extends Document = Document>(effect: Effect<TransactionContext, TSchema>, options?: HandlerOptions): RequestHandler;
  handler<TSchema extends Document = Document>(effect: Effect<ClaimContext, TSchema>, options: ExternalOptions & { external: true }): RequestHandler;
  externalHandler<TSchema extends Document = Document>(effect: Effect<ClaimContext, TSchema>, options?: ExternalOptions): RequestHandler;
  pubsubHandler<TSchema extends Document = Document>(effect: Effect<TransactionContext, TSchema>, options?: { stream?: string; inProgressWaitMs?: number }): (message: PubSubMessage) => Promise<DeliveryResult>;
  pubsubHandler<TSchema extends Document = Document>(effect: Effect<ClaimContext, TSchema>, options: { stream?: string; inProgressWaitMs?: number; external: true; claimSeconds?: number }): (message: PubSubMessage) => Promise<DeliveryResult>;
  deliver(input: DeliveryInput, effect: Effect<any>, options?: { external?: boolean; claimSeconds?: number }): Promise<DeliveryResult>;
  ready(): Promise<void>;
  close(options?: { timeoutMs?: number }): Promise<'drained' | 'timeout'>;
  readonly inFlight: number;
  readonly records: Collection;
}

export function ferryReceiver(options: ReceiverOptions): Receiver;

export class PermanentError extends Error {
  constructor(message: string, options?: ErrorOptions);
}

export class RetryLaterError extends Error {
  constructor(message: string, retryAfterSeconds?: number, options?: ErrorOptions);
  retryAfterSeconds: number;
}

export function parseEvent(body: Buffer | string, options?: { operation?: string; namespace?: string; useBigInt64?: boolean }): ChangeEvent;

/** verifier(secret) returns a function(body, headers) returning the verified webhook-id (Standard Webhooks), or throwing. */
export function verifier(secret: string): (body: Buffer | string, headers: Record<string, string | string[] | undefined>) => string;

/** Fastify content-type parser keeping the body as bytes. */
export function rawJSON(req: unknown, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void;

export interface TtlIndex {
  field: string;
  expireAfterSeconds: number;
  name?: string;
}

export interface DeleteCause {
  cause: 'ttl' | 'application' | 'unknown';
  reason: string;
}

export function classifyDelete(event: ChangeEvent, ttl: TtlIndex | TtlIndex[]): DeleteCause;
export function readTtlIndex(collection: Collection): Promise<TtlIndex[]>;
export function prepareTtlSource(db: Db, collection: string, options: { field: string; expireAfterSeconds?: number }): Promise<TtlIndex>;

export const BACKFILL: 'backfill';
export const DEFAULT_COLLECTION: string;
export const DEFAULT_RETENTION_SECONDS: number;
