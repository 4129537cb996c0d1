// Package ferry consumes a MongoDB change stream reliably: every change's
// side effect happens at least once, in order per document, and the stream's
// position (the resume token) advances only after the effect succeeded.
//
//	c, err := ferry.NewConsumer(client, handle,
//		ferry.Stream("orders"),
//		ferry.WatchCollection("shop", "orders"),
//		ferry.Checkpoints(store),          // checkpoint/mongostore or checkpoint/boltstore
//		ferry.DeadLetters(dlq),
//	)
//	err = c.Run(ctx) // blocks; cancel ctx to drain and stop
//
// A BatchHandler (ferry.NewBatchConsumer) takes the events in batches
// instead: see BatchHandler for its contract.
//
// # Data path
//
//	MongoDB ─getMore─► fetcher ─runs─► reader ─► lanes (one per key hash) ─► handler
//	                     │ reserves      │ numbers in stream order             │
//	                     ▼               ▼                                     │
//	              bounded window     tracker (read → finished) ◄───────────────┘
//	                                     │ contiguous finished prefix
//	                                     ▼
//	                           checkpoint store (compare-and-set)
//
// The fetcher takes events from the driver's batches on a goroutine of
// its own and issues the next getMore while the reader decodes, numbers
// and dispatches the events before them. It does not copy them: an
// event's bytes alias the server's reply it came in, which the driver
// never reuses (see CopyEvents), while at most three replies are so held;
// the events of further replies (read while a lane lags) are copied, so a
// few events cannot keep many replies in memory. An event holds its room
// in the window from the fetcher's read until it is finished, so the read-ahead
// is bounded by QueueLimit too, and a full window stops the fetcher. The
// driver sends the next getMore only once the fetcher has taken the whole
// batch, so the fetcher does as little as it can per event: it takes
// window room in bulk (credit for the rest of the server batch, given back
// unused before the next getMore) and hands events over in runs; the
// reader sends each lane its share of a run at once.
//
// The files follow the data path, one stage each: window.go, tracker.go,
// lanes.go (applying events), committer.go (checkpoints), backfill.go,
// fetch.go, reader.go, and run.go wiring them together; the vocabulary
// (errors, events, failures, hooks, handlers, options) comes first. A file
// uses only what the files before it declare (layering_test.go checks it).
//
// # Guarantees
//
//   - The checkpoint never passes an event that is neither applied nor
//     dead-lettered: it advances to the end of the contiguous prefix of
//     finished events, batched by count and time (CommitEvery). A crash
//     replays at most the events after the last checkpoint.
//   - Events of one document (namespace + documentKey) are applied in stream
//     order; different documents in parallel (Concurrency lanes).
//   - Reading pauses when the events read but not finished reach QueueLimit
//     (count or bytes), those read ahead of the lanes included: memory
//     stays bounded under a slow handler.
//   - A quiet stream's checkpoint still advances, with the server's
//     postBatchResumeToken, so its token does not fall off the oplog.
//   - Nothing is skipped silently: a resume token no longer in the oplog
//     stops with ErrHistoryLost (or backfills, by policy); an invalidated
//     stream stops with ErrInvalidated (or restarts after the invalidate, by
//     policy), also when the pipeline filters the invalidate event out (the
//     server then closes the stream without it, and Ferry finds it); a
//     changed stream definition stops with ErrIdentityChanged; a
//     checkpoint written by a newer lease epoch stops with ErrFenced.
//   - Handler errors are retried with exponential backoff and jitter; a
//     panic counts as an error; each call has a timeout (HandlerTimeout),
//     which cancels the call's context and judges nothing: a nil returned
//     after it is success, so an effect that completes late is applied
//     once (see Handler). An attempt counts
//     towards MaxAttempts only as evidence that the event itself is poison.
//     Whose failure it is decides. A failure of the destination (marked
//     Transient, as package sink marks every retryable failure of its
//     sinks; a network error, a timeout, a MongoDB error of the cluster's
//     state or a transient transaction error) counts only when it failed
//     while the handler accepted other events around it. Any other error,
//     and a panic, is the handler's own (a Go handler is not a sink): every
//     such attempt counts, so a deterministic failure is dead-lettered in
//     bounded time (MaxAttempts attempts, about 1.5 s with the default
//     Retry), even as the only event of a quiet partition. Permanent is
//     poison at once. After MaxAttempts counted attempts the event is
//     dead-lettered or, with PoisonStall, the partition stops.
//   - A sink outage is not poison: while the handler fails for every event
//     with the destination's failures (refused connections, timeouts, 5xx
//     marked Transient, a broker down), no attempt counts and nothing is
//     dead-lettered, however long it lasts. In a
//     batch, only events applied after a failed one (in batch order) show
//     the sink accepting events: those before it were delivered before the
//     sink went down. While Run drains after its context was cancelled, a
//     failed event is not retried: it is left, with the later events of its
//     lane, for the next owner. Events
//     wait in order with backoff, reading pauses at the queue bound, the
//     consumer's state is StateWaitingForSink (HookState, and Status with
//     the delivery error in LastError), and when the
//     sink accepts an event again every lane waiting out a backoff retries
//     at once. RetryMaxElapsed is the explicit time bound, off by default.
//   - Batches (NewBatchConsumer, BatchHandler) change the cost, not the
//     guarantees: each lane hands the events ready in it (up to BatchSize
//     and BatchBytes, after an optional BatchLinger) to one handler call;
//     the handler reports per event (BatchError) and every event is then
//     finished, retried and checkpointed on its own. The failed events of
//     a batch are retried alone, in batch order, so one document's order
//     holds and a poison event is judged by its own failures only: an
//     error of the whole batch (a panic, a timeout, an aborted
//     transaction), and ErrNotAttempted, never count against the events
//     of a batch.
//   - Cancelling Run's context stops reading, lets the handler calls in
//     flight finish within DrainTimeout (events read but not yet handed to
//     the handler are not started, and a failed one is not retried: they
//     are left, in order, for the next run or owner), cancels the calls
//     still running, writes the final checkpoint and closes the cursor: Run
//     returns within DrainTimeout + DrainMargin (10 s with the defaults),
//     and only after every goroutine it started has ended, but one: the
//     lane of a handler call that ignores its cancelled context, which is
//     left running, logged, and not checkpointed (see DrainMargin).
//   - A Consumer runs once at a time: a second Run while one has not
//     returned fails at once with ErrAlreadyRunning; a Run after the
//     previous one returned resumes from the checkpoint.
//
// # Stream identity
//
// A stream is identified by its name and a digest of its definition: scope,
// pipeline, options, partition count and, with more than one partition
// under HashRange, its partitioning (canonical BSON, sha256; HashMod, the
// partitioning of streams created before HashRange, is left out, so their
// digest is the one they checkpointed under). A
// checkpoint written under one definition is never used by another: change
// the pipeline and Run refuses, saying what changed and how to proceed (a
// new stream name started at the old one's checkpoints, a backfill, or an
// explicit reset).
//
// # Partitions and control events
//
// Partition p of n appends a filter on the hashed-index key of the
// document's _id, {$toHashedIndexKey: "$documentKey._id"}, to the
// pipeline, so each document's events land in one partition. Under
// HashRange, the default, the int64 hash space is cut into n contiguous
// ranges of equal size, as MongoDB's hashed sharding cuts it into chunks:
// partition p holds [lo, hi] = PartitionRange(p, n), lo = MinInt64 +
// ⌊p·2^64/n⌋, and its filter is {$expr: {$and: [{$gte: [hash, lo]},
// {$lte: [hash, hi]}]}} (PartitionMatch). A partition is then a range of a
// {_id: "hashed"} index, which a snapshot of one partition can read alone.
// Streams created before HashRange used HashMod, {$expr: {$eq: [{$abs:
// {$mod: [hash, n]}}, p]}}, which no index range serves (each partition's
// snapshot reads the whole collection); such a stream keeps it, and a Run
// logs so once (see WithPartitioning and ResolvePartitioning: a stream's
// partitions always agree). Events without a documentKey (drop, rename,
// dropDatabase, invalidate) would evaluate $documentKey._id as missing,
// which hashes like null, and reach only the one partition null hashes to;
// the server would close every other partition's cursor on invalidation
// without telling it why. Ferry therefore widens the filter with
// {documentKey: {$exists: false}}: every partition sees the control events
// and applies the invalidate policy itself, and only partition 0 hands them
// to the handler, so they take effect once.
//
// The filter hashes _id only, not the whole documentKey: on a sharded
// collection, where the documentKey is the shard key's fields then _id and
// _id is unique only per shard, documents that share an _id share a
// partition, which is harmless (one document's events still land in one
// partition, because its _id does not change). The lanes that order a
// partition's events go by namespace and _id for the same reason: a
// document's documentKey can change shape ({_id} while it lacks a shard key
// field, or before a shard learns that its collection is sharded, then
// {shardKey..., _id}), and its events must keep one lane; documents that
// share an _id share a lane, which only orders them together. Nothing
// merges or deduplicates by _id: everything that identifies a document
// uses the namespace and the whole documentKey — the sinks' ordering keys
// (sink.KeyOf, Kafka's record key, Pub/Sub's ordering key), the mongodb
// projection's key, verify's projection diff, and the documentKey of
// snapshot rows (backfill events), which on a sharded collection is built
// from its shard key (config.collections, read through mongos) as the
// server builds a change's. A snapshot's chunks never end between two
// documents of one _id. The event id is the sha256 of the resume token
// (whose event identifier holds the documentKey), or for a snapshot row of
// its snapshot, read time, namespace and documentKey; the ledger and the
// idempotency keys are event ids.
//
// # Sharded clusters
//
// Connect to the mongos. Chunk migrations are invisible to a stream
// through mongos (fromMigrate): each change is handed over once, before and
// after a move. An idle shard holds the merged stream back until its
// periodic no-op (periodicNoopIntervalSecs): events arrive late, never
// lost. Documents are keyed as the previous section says, never by _id
// alone. Events without a documentKey — drop, rename, dropDatabase,
// invalidate and, with ShowExpandedEvents, the DDL events (shardCollection,
// reshardCollection, refineCollectionShardKey, ...) — reach every
// partition, and partition 0 alone hands them to the handler.
//
// reshardCollection (also moveCollection and unshardCollection, reported as
// reshardCollection with another provenance) changes the collection's UUID
// and shard key but invalidates no stream: OnInvalidate and OnHistoryLost
// are not involved (the stream goes on, and resumes across it); without
// ShowExpandedEvents its event is not in the stream, with it partition 0
// hands it over once, and OnPoison applies only if the handler fails it.
// The events after it carry the new documentKey, so a sink keyed by
// documentKey sees a document under two keys (the mongodb projection must
// be rebuilt, with a snapshot); lanes go by _id, so the document's changes
// stay in order. docs/sharded.md says the same for ferry.yaml.
//
// # Errors and failures
//
// MongoDB errors are classified by package mongoerr: resumable ones reopen
// the stream from the last token read (after the driver's own resume
// attempt), counted through HookResume; fatal ones stop Run with the
// server's message (ErrFatal).
//
// AsFailure says which of Run's stops are failures that retrying at once
// cannot fix (a changed identity, lost history under HistoryLostFail, an
// invalidated stream under InvalidateStop, a stall, a pipeline modifying
// _id, a required image missing, missing privileges, an event too large,
// a corrupt checkpoint, another fatal server error), with a FailureClass
// and whether the condition can clear by itself. Whoever runs the consumer
// (package group, the ferry daemon) then stops taking the stream and
// re-checks with backoff, only when it can clear. Any other stop (ErrFenced
// after a takeover, a network error writing a checkpoint) is a hand-off or
// a transient error: restart with backoff.
//
// # Snapshots
//
// A snapshot delivers the documents already in the stream's scope, each as
// a backfill event (OperationType "backfill", FullDocument the document as
// of the chunk's cluster time, ClusterTime that time), while the stream
// goes on. It starts with StartAt(StartWithBackfill()) (the first load of
// a new sink: the stream starts now, the snapshot beside it), with
// OnHistoryLost(HistoryLostBackfill) (the stream starts again from now and
// the partition is snapshotted; a sweeper, WithSweeper, then removes what
// the snapshot did not touch), or on an operator's request recorded in the
// checkpoint store (checkpoint.SnapshotRequests: `ferry snapshot`, with an
// optional filter), which the partition's owner picks up within
// SnapshotPollInterval, and which can be cancelled.
//
// Its guarantees:
//
//   - Chunks with a checkpoint. A partition reads SnapshotChunkSize
//     documents at a time (less when a reply reaches 16 MiB); after every
//     document of a chunk is finished, where the next chunk starts is
//     written with the checkpoint (Checkpoint.Snapshot), fenced by the
//     lease epoch like a checkpoint. A crash, takeover or redeploy goes on
//     at the first chunk not finished: at most one chunk per partition is
//     delivered again. Memory holds one chunk per partition beside the
//     window.
//   - Ordered with the stream. Each chunk is read as of the reader's
//     position (readConcern snapshot at that cluster time) while the
//     reader holds back later events, and its documents are dispatched
//     there: per document, its changes before that time, its snapshot copy,
//     then its changes after, in the source's order. A document changed or
//     deleted during the snapshot ends in its latest state: never
//     resurrected, never stale. The stream is held for one chunk read at
//     most, so its lag stays bounded however long the snapshot runs, and
//     the oplog only has to hold the stream's own window.
//   - Read once. With hash-range partitions (WithPartitioning, the
//     default) and an {_id: "hashed"} index, each partition reads its
//     range of that index (find with hint, min and max): over all
//     partitions the server examines and returns each document once. Without
//     the index, each partition walks the _id index with the partition
//     filter evaluated by the server: each document is returned once and
//     examined once per partition (and so N times for N partitions).
//     Through a mongos the hashed range is read in spans read whole (a
//     mongos merges the shards' parts of a min/max range unordered, so a
//     chunk cannot end at its last hashed value), each about a chunk of
//     documents by the collection's estimated count: the same reads, plus
//     a span read again when it held more than two chunks. Reads are
//     routed by the chunk placement at the chunk's cluster time, so a
//     migration during the snapshot neither hides nor repeats documents.
//   - Read-only on the source: all of its state is in the checkpoint store.
//   - Progress: Status.Snapshot (done, estimated total, rate, ETA, the
//     collection being read), HookSnapshot after every chunk, and
//     SnapshotOf on a checkpoint (its record carries the owner's rate as
//     of its last chunk, so a reader of the store sees it too); a
//     documents-per-second cap per partition with SnapshotMaxRate.
//
// A stream that loses its own place in the oplog three times in a row
// before its recovery snapshot finished a chunk fails with FailHistoryLost
// (the oplog holds less than the stream needs to keep up).
//
// # Lag
//
// Status.Lag, the metrics package's ferry_lag_seconds and `ferry status`
// share one definition (LagOf): 0 when nothing is pending, otherwise now
// minus the clusterTime of the oldest event read and not yet applied or
// dead-lettered. Checkpoints record that clusterTime (Pending) for readers
// of the state store.
//
// Lag starts when an event is read. What happens before is the read
// delay (Status.ReadDelay, QueueInfo.ReadDelay, Checkpoint.ReadDelay, the
// metrics package's ferry_read_delay_seconds, `ferry status`'s read delay
// column): how long the first event of the newest server batch waited
// between its write (its wallTime) and its arrival. On a replica set it is
// milliseconds. Through a mongos it is the latency an idle shard adds:
// mongos returns an event only once every shard has reported progress past
// it, and a shard without writes reports progress only with its periodic
// no-op, every periodicNoopIntervalSecs (10 s by default, 1 to 10, a
// startup parameter of mongod), so while a shard is idle an event on
// another waits up to that long, and up to twice that just after the idle
// shard's own last write (a no-op is written only at a tick that saw no
// write since the one before: noop_writer.cpp). Measured against the emulator with a 2 s
// no-op: 2.0 s through the mongos with one shard idle, 1-2 ms on a replica
// set (TestReadDelayShowsIdleShard).
//
// # Tracing
//
// The library depends on no tracing library. HookRead is told of every
// batch the reader takes from the server (or a backfill scan) and returns
// the W3C traceparent the batch's events carry; HookDelivery wraps every
// handler call and returns the context the handler gets. The handler's
// context carries the delivery's traceparent (TraceParent; set with
// WithTraceParent), which the sinks send on (the webhook's traceparent
// header, Kafka and NATS headers, a Pub/Sub attribute), and every log line
// of a delivery carries its short event id and trace id. In a
// BatchHandler's call of several events each event is a delivery of its
// own, in its own read batch's trace: its traceparent is
// DeliveryTraceParent's, and the call's context carries none. The module
// github.com/ferry-io/ferry/otel implements both hooks for OpenTelemetry.
//
// # Options
//
// NewConsumer takes Options in the one style every Ferry constructor with
// options shares (group, lease, ledger, the checkpoint stores, the sinks),
// franz-go kgo's: an Option only records a value; the constructor applies the options in
// order, a later one overriding an earlier one, and validates the result
// once, before it contacts anything. Its error lists every problem, each
// prefixed by the option to fix ("Concurrency: must be at least 1, got
// 0"); here it is a *ConfigError. A nil option is a problem, and only the
// package itself makes its Options. The one constructor with nothing
// optional, deadletter.NewMongo(db, collection), takes its two arguments
// positionally and returns no error (it checks nothing and contacts
// nothing; its methods report a nil db).
//
// # Definition changes
//
// A checkpoint's token is never reused under another definition. The
// lossless way to a new definition is a new stream name started with
// StartAt(StartAtCheckpointsOf(store, old)): the old stream's oldest
// position as a cluster time (startAtOperationTime). It is also how a
// stream moves from HashMod to HashRange partitioning.
package ferry
