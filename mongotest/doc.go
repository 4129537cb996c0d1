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
//	CRUD                 insert, update (operators incl. positional and   bulkWrite (59 CommandNotFound), collation
//	                     arrayFilters, replacement, pipeline, upsert,     (ignored), hint (ignored), $where/$text/geo,
//	                     multi), delete, find, getMore, killCursors,      $lookup/$facet/$out/$merge (2 BadValue)
//	                     findAndModify, count, distinct, aggregate
//	                     ($match $project $group $sort $unwind ... and
//	                     ~120 expression operators incl. $$NOW and
//	                     $toHashedIndexKey with MongoDB's hash)
//	transactions         startTransaction/commit/abort, snapshot reads,   prepared transactions, read/write concern
//	                     WriteConflict (112) + TransientTransactionError, options (accepted, single node)
//	                     NoSuchTransaction (251), lifetime limit (60s);
//	                     one clusterTime + lsid/txnNumber/txnOpIndex in
//	                     change streams; aborted writes never appear
//	DDL                  create, drop, dropDatabase, renameCollection,    capped collections (accepted, not capped),
//	                     collMod, listCollections, listDatabases,         views (created and listed; reading through a
//	                     createIndexes/listIndexes/dropIndexes with       view is not supported), validators (stored,
//	                     unique indexes enforced (11000), TTL indexes     not enforced)
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
