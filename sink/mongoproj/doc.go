// Package mongoproj is a sink that maintains a projection (a read model) of
// the source in a target MongoDB collection, keyed by the documentKey: its
// _id, or on a sharded collection the whole documentKey (see "Keys").
//
//	s, err := mongoproj.New(client.Database("read").Collection("orders"))
//	if err := s.Connect(ctx); err != nil { ... }
//	c, err := ferry.NewBatchConsumer(client, sink.BatchHandler(s),
//		ferry.WatchCollection("shop", "orders"),
//		ferry.FullDocument("updateLookup"),
//		ferry.WithSweeper(s.Sweep), ...)
//
// In a consumer group with more than one partition, each partition
// backfills only its slice: give the group the per-partition sweeper,
// group.Sweeper(s.SweepPartition), not ferry.WithSweeper(s.Sweep).
//
// # What each event does
//
//	operation                 effect on the target
//	insert, replace, update   upsert of the event's fullDocument (the stream must carry one:
//	                          FullDocument("updateLookup"), or post-images with "required"; not
//	                          "whenAvailable", see Limits); an update event without a fullDocument field is a
//	                          permanent error naming that fix; an update whose fullDocument is
//	                          null (the document was deleted before the lookup) is skipped: its
//	                          delete event follows
//	delete                    the document becomes a tombstone (see below)
//	backfill                  upsert of the scanned document, unconditionally, stamped bf: true
//	anything else             ignored: drop, rename, dropDatabase, invalidate and DDL events
//	                          have no documentKey; what a dropped source means for the read
//	                          model is the operator's decision
//
// Every document the sink writes carries a hidden field, Field ("_ferry"):
//
//	_ferry: {ct: <clusterTime>, tok: <resume token _data>, op, id: <event id>,
//	         epoch, at: <server time of the write ($$NOW)>, del: true (tombstones), bf: true (backfill),
//	         key: true (the _id is the whole documentKey)}
//
// # Keys
//
// A target document's _id is its source document's _id when the event's
// documentKey is {_id} (an unsharded collection, or one sharded on _id).
// On a collection sharded on other fields the documentKey is those fields
// then _id ({region: "eu", _id: 7}), and _id is unique only per shard, so
// the target _id is that whole documentKey, in the server's field order
// (look a document up with {_id: {region: "eu", _id: 7}}), and the stamp
// has key: true. Two documents with one _id on two shards are then two
// documents, and a document moved across shards by a change of its shard
// key value — a delete under the old documentKey and an insert under the
// new, which the server may send in either order — ends live under its new
// key and a tombstone under the old. Keyed by _id alone, an insert seen
// before the delete would leave it deleted. A document without a value for
// a shard key field has that field left out of its documentKey by the
// server, and so of its key. TargetID is the rule; ferry verify's
// projection diff (verify.Projection) matches source and target documents
// by it, reading the source's shard key from config.collections.
//
// # Guarantees
//
//   - Per-document monotonic: each write is ONE update command, an upsert
//     with an update pipeline that keeps the stored document unless its
//     (ct, tok) is older than the event's. tok is the resume token's _data
//     hex string, which sorts like the server's resume tokens, so events
//     of one transaction (same clusterTime) are ordered by their
//     txnOpIndex. An event older than what the target holds is a no-op, so
//     out-of-order or replayed delivery never moves a document back.
//   - Idempotent under replays: applying the same event again matches the
//     same (ct, tok) and changes nothing.
//   - Deletes keep a tombstone ({_id, _ferry: {..., del: true}}) instead of
//     removing the document, so an older event replayed after the delete
//     cannot resurrect it, and a delete older than the stored version does
//     not remove a newer document. Readers filter tombstones with Live()
//     (and hide the bookkeeping with Hidden()); PurgeTombstones removes
//     old tombstones: call it with a bound before which no older event can
//     be replayed any more, i.e. every partition's checkpoint is past the
//     deletes (`ferry run` does this with the mongodb sink's
//     tombstone_retention); Sweep removes them after a backfill.
//   - Exactly-once effect in transactional mode: when Write's ctx is a
//     session context inside a transaction (group.DeliveryMode
//     Transactional) and the target collection lives in the state store's
//     cluster and is reached through the client of the group's
//     StateDatabase (the transaction's), the write commits
//     or aborts together with the ledger and checkpoint. A write that fails
//     inside a transaction is returned retryable when the server labels it
//     TransientTransactionError, so the whole transaction is retried.
//   - Snapshots: snapshot rows (backfill events: start_at backfill,
//     on_history_lost backfill, on-demand snapshots) replace whatever the
//     target holds, tombstones included, and store no ct, so every
//     streamed event after them supersedes them. The consumer splices
//     each chunk's rows into the stream at the chunk's read time (see
//     package ferry, "Snapshots"), so a row never follows a newer change of
//     its document; a row still never overwrites what a streamed change
//     since the snapshot began wrote (its stamp's ct at or after the row's
//     ScanMarker, its at at or after ScanStarted: the change may be newer
//     than the row), and replaces anything else. Sweep(ctx, since), a ferry.Sweeper, then deletes every target
//     document not written since the scan began (documents deleted while
//     the history was lost, stale tombstones, documents the sink never
//     wrote); SweepPartition(scheme, p, n) does the same for the documents
//     of one partition only (under the stream's partitioning, which
//     group.Sweeper passes), for partitioned streams.
//   - Done means acknowledged: Write returns nil only after the server
//     acknowledged the write (with the collection's write concern). A
//     batch of several events is one ordered bulk write (one round trip,
//     each statement still one guarded server-side step): if the server
//     rejects a statement, the events before it are applied, it fails with
//     its error's class, and the later ones are reported not attempted
//     (retryable).
//
// # Limits
//
//   - One source collection per target: the projection is keyed by
//     documentKey alone, so two source collections with colliding keys
//     would overwrite each other. Events of any namespace are applied.
//   - Sharding a projected collection (or changing its shard key) changes
//     its documents' keys: rebuild the projection with a backfill.
//   - An update event whose fullDocument is null is skipped. Under
//     "updateLookup" that is right (the document was deleted before the
//     lookup; its delete, or a later insert, follows), but under
//     "whenAvailable" it also happens when no post-image was recorded, and
//     that update would be lost: use "updateLookup" or "required".
//   - A source document's own top-level "_ferry" field is replaced by the
//     stamp.
//   - Sweep compares the target server's $$NOW with since, which ferry
//     reads from the source server's clock: when source and target are
//     different clusters, their clocks must agree to within the time
//     between the scan's start and its first write.
//   - While the stream replays the events after a backfill's start marker,
//     a document can briefly show an older state than the scan wrote
//     (insert and replace events carry the document as of the event); it
//     converges with the last event.
//   - Snapshot rows are guarded only against newer streamed changes, not
//     by lease epoch: a zombie consumer (fenced off but still writing)
//     could interleave with them; the group's fencing in transactional
//     mode prevents that.
//
// # Options
//
// New validates the target's database and collection names and its
// options once (see package sink, "Options"); its error matches
// ErrInvalidOption and lists every problem. It contacts no server.
package mongoproj
