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
// emulator that is closed when the test ends.
//
// # Guarantees
//
//   - Every command runs atomically under one lock, and every write gets a
//     cluster time (seconds, increment) strictly greater than the previous
//     one, so the oplog is totally ordered.
//   - Change-stream events are derived from the oplog, so every stream sees
//     every write in its scope exactly once, in cluster-time order. Resume
//     tokens are KeyString-encoded like a real server's (version 2): the same
//     event has the same token whatever the stream's filter or scope, and
//     tokens sort in event order.
//   - Malformed wire messages get an error reply or a closed connection,
//     never a panic.
//
// # What is supported
//
//	area                 supported                                        not supported (error returned)
//	-------------------  -----------------------------------------------  ---------------------------------------------
//	wire protocol        OP_MSG (kinds 0, 1, checksum, moreToCome),       OP_COMPRESSED other than noop (connection
//	                     OP_QUERY handshake, OP_COMPRESSED noop           closed); OP_QUERY commands other than
//	                                                                      hello/isMaster (352 UnsupportedOpQueryCommand)
//	topology             one writable primary of a replica set (8.0,      sharding, secondaries, awaitable hello; auth:
//	                     wire version 25); sessions (lsid accepted)       a client with credentials fails its handshake
//	                                                                      (saslStart: 59 CommandNotFound)
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
//	                     and otherwise only choose a plan; rawData
//	                     accepted (no time-series buckets to expose)
//	collation            per operation: locale (CLDR tables of            strength 4 and 5, caseLevel, caseFirst
//	(approximated)       golang.org/x/text, the same algorithm as ICU;    upper/lower, alternate shifted, backwards
//	                     table versions may differ in rare characters),   (238 NotImplemented); collection, view and
//	                     strength 1-3, numericOrdering; applied to        index default collations (238); under a
//	                     filters, sorts, distinct, update operators,      collation: $setUnion and the other set
//	                     $group keys and comparison expressions; "simple" operators, $indexOfArray, $min/$max/
//	                     is binary                                        $sortArray/$topN..., $group accumulators
//	                                                                      $min/$max/$addToSet (238)
//	transactions         startTransaction/commit/abort, snapshot reads,   prepared transactions, read/write concern
//	                     WriteConflict (112) + TransientTransactionError, options (accepted, single node)
//	                     NoSuchTransaction (251), lifetime limit (60s);
//	                     one clusterTime + lsid/txnNumber/txnOpIndex in
//	                     change streams; aborted writes never appear
//	DDL                  create, drop, dropDatabase, renameCollection,    capped collections (accepted, not capped),
//	                     collMod, listCollections, listDatabases,         $jsonSchema validators (238
//	                     createIndexes/listIndexes/dropIndexes with       NotImplemented), unique indexes with a
//	                     unique indexes enforced (11000), TTL indexes,    partialFilterExpression (238)
//	                     views (read through their pipeline),
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
//	                     Checkout; also from Go: Server.FailCommand
//	errors and labels    ResumableChangeStreamError, NonResumable-        -
//	                     ChangeStreamError, TransientTransactionError,
//	                     RetryableWriteError as a current server attaches
//	                     them
//	TTL                  expireAfterSeconds indexes, a monitor with a     -
//	                     configurable interval (option or setParameter
//	                     ttlMonitorSleepSecs), deletes as delete events
//	server clock         Server.AdvanceClock moves $$NOW, wallTime,       -
//	                     cluster times and TTL expiry without sleeping
//	unknown commands     -                                                59 CommandNotFound
package mongotest
