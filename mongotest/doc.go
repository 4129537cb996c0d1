// Package mongotest is an in-process MongoDB replica set for tests: a single
// writable primary that speaks the MongoDB wire protocol, so the official Go
// driver (go.mongodb.org/mongo-driver/v2) and any other driver or tool talk to
// it unchanged. It exists because Ferry's tests must exercise change streams,
// resume tokens and failure paths without a real mongod; it plays the role
// that kfake plays for franz-go and httptest for net/http.
//
//	srv := mongotest.NewServer()
//	defer srv.Close()
//	client, _ := mongo.Connect(options.Client().ApplyURI(srv.URI()))
//
// In tests, URI(t) returns $FERRY_TEST_MONGODB_URI when it is set, so the
// same test runs against a real replica set, and otherwise starts an
// emulator that is closed when the test ends; Client(t) returns a client
// connected to that server, disconnected when the test ends:
//
//	client, srv := mongotest.Client(t) // srv is nil against a real server
//
// The package is a module of its own (github.com/ferry-io/ferry/mongotest),
// so that importing Ferry's library never builds the emulator; the
// standalone server is its command, cmd/mongotest.
//
// # Running it in another process
//
// cmd/mongotest takes flags for the options (-oplog-entries, -ttl-interval,
// -secondaries, -server-version, -frozen-clock for a Clock that stands
// still, ...). A test that runs it as a child process, as Ferry's library
// tests do so that the library's module never requires this one, reaches
// the Server methods over the wire: the fail points are MongoDB's
// configureFailPoint (failCommand, failGetMoreAfterCursorCheckout,
// onPrimaryTransactionalWrite; mode "off" clears one), and, on a server
// started with TestControls (-test-controls), two test-control commands on
// the admin database, which are not MongoDB's:
//
//	{ferryTestAdvanceClock: <ms>}  Server.AdvanceClock by a whole number of milliseconds
//	{ferryTestNow: 1}              Server.Now
//
// Both reply {now: <date>, unixNanos: <long>}. Without TestControls they
// fail with CommandNotFound (59), naming the flag that enables them.
//
// # Guarantees
//
//   - Every command runs atomically under one lock, and every write gets a
//     cluster time (seconds, increment) strictly greater than the previous
//     one, so the oplog is totally ordered. A change-stream getMore holds
//     the lock only to copy the oplog entries it reads; it builds, filters
//     and encodes their events outside it, so concurrent streams and
//     writers do not wait on one another's batches.
//   - Costs follow a real server's where tests measure them: a filter whose
//     top level pins _id (a value, $eq or $in) reads those documents from
//     the _id index instead of scanning the collection, with the same
//     results; a range of the _id index or of an {_id: "hashed"} index is
//     read in key order and a limit stops it (see Index scans); other
//     filters scan. serverStatus counts what reads examine and return as a
//     real server does (see Counters).
//   - Change-stream events are derived from the oplog, so every stream sees
//     every write in its scope exactly once, in cluster-time order. Resume
//     tokens are KeyString-encoded like a real server's (version 2): the same
//     event has the same token whatever the stream's filter or scope, and
//     tokens sort in event order.
//   - Malformed wire messages get an error reply or a closed connection,
//     never a panic.
//   - A retryable write is applied once: a retry of it (same lsid and
//     txnNumber, after a lost reply) gets the first attempt's result and
//     writes nothing, as on a real primary.
//   - What is not supported fails with an error (238 NotImplemented for a
//     deliberate refusal), never with a different answer.
//
// # What is supported
//
//	area                 supported                                        not supported (error returned)
//	-------------------  -----------------------------------------------  ---------------------------------------------
//	wire protocol        OP_MSG (kinds 0, 1, checksum, moreToCome),       OP_COMPRESSED other than noop (connection
//	                     OP_QUERY handshake, OP_COMPRESSED noop           closed); OP_QUERY commands other than
//	                                                                      hello/isMaster (352 UnsupportedOpQueryCommand)
//	topology             one writable primary of a replica set (8.0,      awaitable hello (a mongos has it), elections
//	                     wire version 25, or an older release from 4.4:
//	                     ServerVersion), and secondaries (see below);
//	                     a sharded cluster (see Sharded clusters);
//	                     or a standalone mongod (Standalone: change
//	                     streams 40573, transactions 20)
//	deployments          AtlasSharedTier: what an Atlas M0/Flex cluster   DocumentDB, Cosmos DB, serverless
//	                     refuses (the split stage, getParameter other
//	                     than its two allowed forms: 8000 AtlasError)
//	auth                 off by default (every client may do anything);   SCRAM-SHA-1, X.509, LDAP, user-defined roles,
//	                     with User options on: SCRAM-SHA-256 against      createUser (a user without options gets 18
//	                     admin, built-in roles (read, readWrite,          AuthenticationFailed, as an unknown one)
//	                     dbAdmin, dbOwner, *AnyDatabase, clusterMonitor,
//	                     root) enforced per command (13 Unauthorized),
//	                     connectionStatus with showPrivileges
//	CRUD                 insert, update (operators incl. positional "$",  $where/$text/geo, $lookup/$facet and other
//	                     "$[]" and "$[<id>]" with arrayFilters,           unlisted stages (2 BadValue); writes to
//	                     replacement, pipeline with constants, upsert,    views (166); $out to time-series (238);
//	                     multi, sort), delete, find, getMore,
//	                     killCursors, findAndModify, count, distinct,
//	                     aggregate ($match $project $group $sort
//	                     $unwind ... ~120 expression operators incl.
//	                     $$NOW and $toHashedIndexKey with MongoDB's
//	                     hash; $out via a temporary collection renamed
//	                     over the target; $merge with on, whenMatched
//	                     (replace/keepExisting/merge/fail/pipeline with
//	                     $$new), whenNotMatched, let; $documents and
//	                     $listLocalSessions sources); the 8.0 bulkWrite
//	                     command (admin: nsInfo/ops, ordered, errorsOnly,
//	                     let, per-op errors, summary counts, results
//	                     cursor, writeConcernError via failCommand); let
//	                     variables on find/aggregate/update/delete/
//	                     findAndModify/bulkWrite; $expr errors fail the
//	                     command; reads through views; names with dots
//	                     and "$" stored as 5.0+ does ("$" refused inside
//	                     _id, 52); hints must name an index (2 BadValue)
//	                     and otherwise only choose a plan; min/max with a
//	                     hint of the _id index or an {_id: "hashed"}
//	                     index, and ranges of _id, read in index order
//	                     (see Index scans); rawData accepted (no
//	                     time-series buckets to expose)
//	collation            per operation: locale (CLDR tables of            strength 4 and 5, caseLevel, caseFirst
//	(approximated)       golang.org/x/text, the same algorithm as ICU;    upper/lower, alternate shifted, backwards
//	                     table versions may differ in rare characters),   (238 NotImplemented); collection, view and
//	                     strength 1-3, numericOrdering; applied to        index default collations (238); under a
//	                     filters, sorts, distinct, update operators,      collation: $setUnion and the other set
//	                     $group keys and comparison expressions; "simple" operators, $indexOfArray, $min/$max/
//	                     is binary                                        $sortArray/$topN..., $group accumulators
//	                                                                      $min/$max/$addToSet (238)
//	transactions         startTransaction/commit/abort, snapshot reads,   prepared transactions, read/write concern
//	                     WriteConflict (112) + TransientTransactionError, levels other than snapshot (accepted: one copy
//	                     NoSuchTransaction (251) + TransientTransaction-  of the data, every read is majority);
//	                     Error after an abort, lifetime limit (60s);      prepareTransaction (59 CommandNotFound); a
//	                     create and createIndexes inside (4.4+:           writeConcern on a statement inside a
//	                     private to the transaction until it commits;     transaction (72, as on a server); a namespace
//	                     createIndexes on an existing collection 263,     another session creates while a transaction
//	                     create of one 48); readConcern snapshot with     creates it: the commit fails with WriteConflict
//	                     atClusterTime;
//	                     writeConcern of the commit (errors below);
//	                     commit and abort retried as a server answers
//	                     them; one clusterTime + lsid/txnNumber/
//	                     txnOpIndex in change streams; aborted writes
//	                     never appear
//	retryable writes     insert, update, delete and findAndModify with    multi: true updates and limit: 0 deletes (72,
//	                     lsid + txnNumber: the session is checked out     as on a server); other commands with a
//	                     one command at a time (a retry waits for its     txnNumber outside a transaction (50768
//	                     first attempt); for the newest txnNumber the     NotARetryableWriteCommand); stmtIds given by
//	                     statements that ran and their results (counts,   the client (statements are numbered by
//	                     upserted ids, findAndModify's reply) are kept,   position, as drivers do)
//	                     and a retry runs only the statements that did
//	                     not run: no second write, oplog entry or change
//	                     event; operationTime of a replay is the first
//	                     write's; an older txnNumber: 225
//	                     TransactionTooOld; the txnNumber of a
//	                     transaction: 72; bulkWrite is kept whole
//	sessions             explicit and implicit sessions; endSessions,     a snapshot older than the window or than the
//	                     killSessions, killAllSessions (an open           first snapshot read: 239 SnapshotTooOld;
//	                     transaction is aborted); idle sessions are       readConcern snapshot on other commands and on
//	                     forgotten after 30 min; snapshot reads outside   writes: 72 InvalidOptions; an atClusterTime
//	                     transactions (find, aggregate, distinct;         newer than the cluster time: 72
//	                     atClusterTime given or returned): records keep
//	                     their versions from the first snapshot read on,
//	                     for minSnapshotHistoryWindowInSeconds (300 s,
//	                     server clock) after the last; misused session    txnNumber without lsid, autocommit without
//	                     fields are refused before the command runs       txnNumber or true, startTransaction without
//	                                                                      autocommit: false (72), startTransaction:
//	                                                                      false (9)
//	write concern        w: majority and w up to the number of members    wtimeout, j (accepted: nothing waits)
//	                     are satisfied at once (every member applies a
//	                     write as the primary commits it); w above it:
//	                     writeConcernError 100 UnsatisfiableWriteConcern
//	                     after the write, a tag mode: 79
//	                     UnknownReplWriteConcern
//	secondaries          Secondaries(n) adds n members on ports of their  writes and transactions on a secondary (10107
//	                     own, listed in hello; they serve reads whose     NotWritablePrimary); reads without secondaryOk
//	                     read preference allows a secondary, from the     (13435 NotPrimaryNoSecondaryOk); fail points
//	                     same data (no lag), aggregates with $out or      on a secondary (238 NotImplemented)
//	                     $merge among them (4.4+)
//	DDL                  create, drop, dropDatabase, renameCollection,    capped collections (accepted, not capped),
//	                     collMod, listCollections, listDatabases,         $jsonSchema validators (238
//	                     createIndexes/listIndexes/dropIndexes with       NotImplemented), unique indexes with a
//	                     unique indexes enforced (11000), TTL indexes,    partialFilterExpression (238)
//	                     views (read through their pipeline),
//	                     {_id: "hashed"} indexes kept in hashed order,
//	                     query-operator validators enforced (121 with
//	                     errInfo; validationLevel/Action,
//	                     bypassDocumentValidation)
//	change streams       collection, database and cluster streams;        an event over 16 MiB without
//	                     resumeAfter, startAfter, startAtOperationTime;   $changeStreamSplitLargeEvent: 10334
//	                     $changeStreamSplitLargeEvent (fragments with     BSONObjectTooLarge, as on a real server
//	                     splitEvent and fragment tokens, resumable
//	                     mid-event);
//	                     fullDocument updateLookup/whenAvailable/
//	                     required; fullDocumentBeforeChange (pre-images
//	                     via changeStreamPreAndPostImages);
//	                     showExpandedEvents (create, createIndexes,
//	                     dropIndexes, modify, rename details); events
//	                     insert/update/replace/delete/drop/rename/
//	                     dropDatabase/invalidate; postBatchResumeToken on
//	                     every batch; getMore awaits up to maxTimeMS
//	                     (default 1s) and returns as soon as an event
//	                     arrives; a periodic no-op keeps tokens moving
//	oplog window         bounded by entries, bytes, age; older resume     -
//	                     points fail with 286 ChangeStreamHistoryLost;
//	                     unknown tokens with 280 ChangeStreamFatalError
//	fail points          failCommand (alwaysOn, times, skip, off;         activationProbability (2 BadValue: tests must
//	                     errorCode, errorLabels, closeConnection,         be deterministic)
//	                     blockConnection, appName, namespace,
//	                     writeConcernError), failGetMoreAfterCursor-
//	                     Checkout, onPrimaryTransactionalWrite
//	                     (closeConnection, default true; failBefore-
//	                     CommitExceptionCode; per statement of a
//	                     retryable write); also from Go:
//	                     Server.FailCommand, Server.FailRetryableWrites;
//	                     a shard's failCommand spares the commands its
//	                     mongos sends (an internal client) unless
//	                     failInternalCommands is true
//	errors and labels    as src/mongo/db/error_labels.cpp attaches them:  -
//	                     TransientTransactionError (WriteConflict,
//	                     snapshot errors, NoSuchTransaction, retriable
//	                     codes in a transaction), RetryableWriteError
//	                     (retriable codes, and retriable writeConcern-
//	                     Error codes, of retryable writes and of commit/
//	                     abort), NoWritesPerformed, ResumableChange-
//	                     StreamError, NonResumableChangeStreamError; a
//	                     failCommand errorLabels list replaces them
//	                     (UnknownTransactionCommitResult is the
//	                     driver's, as the transactions spec says)
//	TTL                  expireAfterSeconds indexes, a monitor with a     -
//	                     configurable interval (option or setParameter
//	                     ttlMonitorSleepSecs), deletes as delete events
//	server clock         Server.AdvanceClock (or ferryTestAdvanceClock,   -
//	                     see above) moves $$NOW, wallTime, cluster times
//	                     and TTL expiry without sleeping
//	serverStatus         host, version, uptime, connections, repl,        the other sections and metrics
//	                     oplog, metrics.document.{deleted, inserted,
//	                     returned, updated}, metrics.queryExecutor.
//	                     {scanned, scannedObjects} (see Counters)
//	unknown commands     -                                                59 CommandNotFound
//
// # Sharded clusters
//
// NewShardedServer(n) (StartSharded; NewSharded, ShardedURI and
// ShardedClient in tests, $FERRY_TEST_MONGODB_SHARDED_URI for a real
// cluster; cmd/mongotest -shards N) serves a mongos in front of n shards,
// each an emulated replica set with its own oplog, and a config server,
// all stamping their oplogs from one cluster clock. Options apply to every
// shard (NoopInterval sets each shard's periodic no-op; the config
// server's is 1 s or shorter), Addr to the mongos; BalancerInterval runs a
// balancer.
//
//	sc := mongotest.NewSharded(t, 2, mongotest.NoopInterval(200*time.Millisecond))
//	client, _ := mongo.Connect(options.Client().ApplyURI(sc.URI()))
//
//	area             emulated                                           not emulated
//	---------------  -------------------------------------------------  ---------------------------------------------
//	mongos           hello as a mongos (msg isdbgrid, no setName or      listDatabases sizes are the shards' sums; the
//	                 hosts, topologyVersion, awaitable hello, answered   awaitable hello is answered 100 ms after a
//	                 early after a state-change error); Mongoses(n),     "not primary" error, where a real mongos waits
//	                 each with its own cursors and transactions; fail    maxAwaitTimeMS
//	                 points act at a mongos (Server.FailCommand on
//	                 Mongos()), hello included, or on a shard (Shards())
//	placement        a database's primary shard (the one with the        zones, jumbo chunks, chunk sizes; moveRange;
//	                 fewest databases; enableSharding primaryShard);     an update that changes a document's shard key
//	                 shardCollection with ranged or hashed keys; chunks  leaves it on its shard
//	                 (config.chunks, config.collections,
//	                 config.databases, config.shards readable);
//	                 split, moveChunk, removeShard, reshardCollection,
//	                 a balancer (by document count; balancerStop,
//	                 balancerStart, balancerStatus)
//	CRUD             writes routed by shard key; reads targeted by a     a bulkWrite update/delete on a sharded collection
//	                 shard key equality or broadcast and merged; one-   that does not pin its shard key, $out/$merge
//	                 document writes without the key find their         from a sharded collection (238); upsert or
//	                 document first; a client bulkWrite split by shard;  findAndModify upsert without the full shard
//	                 _id unique per shard only                          key (61)
//	snapshot reads   readConcern snapshot through the mongos: one        StaleChunkHistory (a history older than the
//	                 atClusterTime for every shard (the mongos' latest   window: the range deleter keeps what a
//	                 when none is given, returned in the reply);         snapshot reads)
//	                 routed by the chunk placement at that time, each
//	                 shard dropping what it did not own then (a
//	                 migration neither hides nor doubles documents);
//	                 shardCollection of an empty collection creates
//	                 the key's index ({_id: "hashed"}: min/max reads);
//	                 of a non-empty one without an index starting
//	                 with the key: 72 InvalidOptions
//	transactions     across shards: each shard joins at its first       two-phase commit: shards commit one after the
//	                 statement and commits at its own cluster time;      other, so a failure midway is not atomic
//	                 recoveryToken; a failed statement aborts all
//	change streams   merged from every shard and the config server in   the v2 reader (precise targeting);
//	                 token order, each event held until every shard's    ignoreRemovedShards; the documentKey of a
//	                 token passes it (an idle shard waits for its        collection just sharded has the shard key at
//	                 no-op); empty first batch; shard getMores capped    once (a real one, only after a migration)
//	                 at 1 s; addShard joins open streams; migrations
//	                 and sharded DDL's other shards invisible
//	                 (fromMigrate); errors "Error on remote shard <host>
//	                 :: caused by :: ..."; 280, 286 (removed shard or
//	                 history lost), 31123; documentKey {shard key,
//	                 _id}; shardCollection and reshardCollection events
//
// Measured (BenchmarkConcurrentStreams and BenchmarkUpdateOne, three
// alternating runs each against the replica set before and after the
// sharded emulation, same machine): 50k, 43k, 57k → 48k, 43k, 64k
// events/s and 11.6k, 8.6k, 10.8k → 10.9k, 8.3k, 12.2k updates/s, the
// same allocations: the replica set's paths are unchanged within noise.
//
// # Storage
//
// A collection stores each document as a record: the document (a bson.D)
// and its encoding, made once when the version is written (the bytes the
// client sent for an insert's document sequence, else the document
// encoded then; every write stores a new document, none is changed in
// place, so the encoding stays the document's). A find without a
// projection, and its getMores, copy these bytes into the reply (written
// straight into the outgoing message) instead of encoding the bson.D
// again, and a batch's size is their length; the versions kept for
// snapshots keep theirs. The oplog entry of a write shares the record's
// encoding, which change streams copy into their events. The keys and
// strings of a document inserted through a document sequence share the
// bytes of its encoding (package wire's Msg.Command), so a stored
// document costs its encoding plus the bson.D's skeleton, not two copies
// of its strings. A hashed index scan, which visits records in no order
// of their memory, touches the records of each run of 64 entries, and a
// batch the first bytes of each run of its documents, in tight loops
// before reading or copying them, so that their fetches from memory
// (cache lines, page translations) overlap instead of stalling the scan
// and the copy one document at a time.
//
// # Index scans
//
// Every collection keeps its _id index ordered by _id (BSON comparison
// order), and every {_id: "hashed"} index ordered by the hashed _id (the
// int64 {$toHashedIndexKey: "$_id"} returns, MongoDB's hash); equal keys
// are in insertion order, as a real server's RecordIds. Each holds an entry
// per stored record, including the deleted ones kept for open snapshots,
// so a write costs a few binary searches and moves at most one block of
// 512 entries, and createIndexes of {_id: "hashed"} builds the index over
// the existing documents in one sort (about 0.3 s for 1M documents).
//
// A find reads a range of one of them, in key order, testing each
// document against the whole filter and stopping once skip + limit
// documents matched when the index order is the sort order (or there is
// no sort), when it has:
//
//   - min and/or max (inclusive, exclusive) with a hint (by key pattern or
//     name) of the _id index or of an {_id: "hashed"} index: {hint: {_id:
//     "hashed"}, min: {_id: NumberLong(a)}, max: {_id: NumberLong(b)}} reads
//     the documents whose hashed _id is in [a, b) in hashed order (max
//     {_id: MaxKey}: to the end). As on 8.0, min/max without a hint fail
//     with 291 NoQueryExecutionPlans, bounds that are not the hinted
//     index's fields in order with 51174, min not before max with 51175, a
//     min or max that is not a document with 14 TypeMismatch; min/max of
//     any other index: 238 NotImplemented.
//   - a hint of the _id index, a sort {_id: 1}, or $gt/$gte/$lt/$lte/$eq on
//     _id at the top level of the filter or inside a top-level $and (not
//     pinned to values, which the _id map answers): the range of _id those
//     bound, within each value's type bracket as the server's index bounds
//     ({_id: {$gt: 5}} reads numbers only). Results come in _id order; a
//     sort other than {_id: 1} sorts what the range holds. Under a
//     collation other than "simple" these finds scan the collection.
//
// At a snapshot (readConcern "snapshot", a transaction) an index scan
// reads each entry's record as it was then: a document deleted since is
// read, one inserted since is not (and is not counted as examined); in a
// transaction its own writes are read in their keys' places.
//
// # Counters
//
// serverStatus' metrics.document and metrics.queryExecutor are int64s
// counted since the server started, as mongod counts them: returned, the
// documents in the batches of find, aggregate and their getMores (not
// change-stream events); inserted, by insert and bulkWrite (not upserts);
// updated, matched by update statements (update, bulkWrite,
// findAndModify), modified or not; deleted; scanned, index keys examined;
// scannedObjects, documents examined. A collection scan examines each
// document it passes (stopping at a limit without a sort) and no key; an
// index scan one key and one document per entry it passes; an _id lookup
// one of each per document found. The emulator reads a find's whole result
// at the find, so a cursor's scan is counted then rather than getMore by
// getMore: the totals agree once the cursor is exhausted or the limit
// reached.
//
// # Measured
//
// Before (the emulator without an _id index path for $in, with change-stream
// batches built under the engine lock and commands decoded by bson.Unmarshal)
// and after, on a 2-core machine other test runs kept at a load average of
// 6 to 13, so the spread is wide:
//
//   - BenchmarkWriteLatencyWhileStreamsCatchUp (single inserts while four
//     change streams re-read a 20,000-event backlog), five alternating runs:
//     insert median 46 µs–21 ms (median of runs 2.4 ms) → 32 µs–17 ms
//     (57 µs); p99 234 ms–1.6 s (349 ms) → 61–548 ms (181 ms); mean 12.5–115
//     ms (50 ms) → 4.1–44 ms (16 ms).
//   - BenchmarkFindByIDPath (driver, ledger-sized documents), one run each:
//     find {_id: {$in: [100 ids]}} over 10,000 documents 20–37 ms → 0.94 ms,
//     over 100,000 183–274 ms → 0.82 ms; find by one _id, already answered
//     from the _id map before, 70–127 µs → 84–86 µs. In the same run the
//     scan the path replaces (ScanOnly) takes 23 ms and 228 ms for $in.
//   - BenchmarkLedgerLoad (idempotent mode's load, per event), two
//     alternating runs: 508–517 µs (368–383 µs of CPU) → 58–59 µs (51–53 µs).
//   - BenchmarkParseMsgCommand1KiB (internal/wire: an insert of one 1 KiB
//     document parsed and decoded), three alternating runs: 7.5–10.3 µs, 46
//     allocations → 3.2–4.2 µs, 29. BenchmarkDecodeCommand, decodeDoc
//     against bson.Unmarshal on the same document in one run: 1.1–1.3 µs, 21
//     allocations against 5.1–11.0 µs, 45.
//   - BenchmarkSnapshotRead (MONGOTEST_BENCH_DOCS=1000000: 1M documents of
//     1 KiB through the driver, chunks of 1001 at a snapshot), before (no
//     ordered indexes) and after, three alternating runs, load average
//     0.3 to 1.8: insertMany 47k–101k → 83k–97k documents/s; a find loop
//     386k–796k → 388k–788k documents/s; resident memory (driver and
//     emulator, the oplog holding every document) 4.15–4.41 → 4.24–4.50
//     GiB; building {_id: "hashed"} over the 1M documents 256–312 ms; mode
//     (A), min/max chunks of the hashed index, 159k–189k documents/s (in
//     hashed order, so the documents are read and encoded in random memory
//     order); mode (B), _id chunks of 4 partitions by $toHashedIndexKey,
//     every key examined 4 times, 192k–349k documents/s. Before, (B)
//     scanned and sorted the whole collection for each chunk: 18.4k
//     documents/s over 100k documents, worse with more; (A) ignored
//     min/max.
//   - BenchmarkStoredReads (300,000 documents of 1 KiB inserted through
//     document sequences, read without a network or a driver, each reply
//     encoded into its OP_MSG), before and after records kept their
//     encoding (and hashed scans touched theirs run by run), three
//     alternating runs at a load average of 1.4 to 1.6, CPU per
//     document: find {} and its getMores 794–827 → 565–646 ns; a
//     hashed-index snapshot's chunks (hint, min/max, limit 1001, at a
//     cluster time) 2552–3645 → 495–526 ns; heap per stored document
//     (record, indexes, oplog entry) 2997 → 1898 bytes.
package mongotest
