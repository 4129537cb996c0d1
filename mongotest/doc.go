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
//	wire protocol        OP_MSG (kinds 0, 1, checksum, moreToCome),        OP_COMPRESSED other than noop (connection
//	                     OP_QUERY handshake, OP_COMPRESSED noop            closed); OP_QUERY commands other than
//	                                                                       hello/isMaster (352 UnsupportedOpQueryCommand)
//	topology             one writable primary of a replica set (8.0,       sharding, secondaries, auth (no users: any
//	                     wire version 25); sessions (lsid accepted)        credentials are ignored), awaitable hello
//	CRUD                 insert, update (operators, replacement,          bulkWrite (59 CommandNotFound), collation
//	                     pipeline, upsert, multi), delete, find,           (ignored), hint (ignored), $where/$text/geo
//	                     getMore, killCursors, findAndModify, count,       (2 BadValue)
//	                     distinct, aggregate ($match $project $group ...)
//	DDL                  create, drop, dropDatabase, renameCollection,    capped collections (accepted, not capped),
//	                     collMod, listCollections, listDatabases,         views (created and listed; reading through a
//	                     createIndexes/listIndexes/dropIndexes with       view is not supported), validators (stored,
//	                     unique indexes enforced (11000), TTL indexes     not enforced)
//	change streams       collection, database and cluster streams;        $changeStreamSplitLargeEvent (accepted and
//	                     resumeAfter, startAfter, startAtOperationTime;   ignored)
//	                     fullDocument updateLookup; showExpandedEvents;
//	                     events insert/update/replace/delete/drop/rename/
//	                     dropDatabase/invalidate (+ create, createIndexes,
//	                     dropIndexes, modify when expanded);
//	                     postBatchResumeToken on every batch; getMore
//	                     awaits up to maxTimeMS (default 1s)
//	oplog window         bounded by entries, bytes, age; older resume    -
//	                     points fail with 286 ChangeStreamHistoryLost
//	TTL                  expireAfterSeconds indexes, a monitor with a     -
//	                     configurable interval (setParameter
//	                     ttlMonitorSleepSecs), deletes as delete events
//	unknown commands     -                                                59 CommandNotFound
package mongotest
