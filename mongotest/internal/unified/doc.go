// Package unified runs MongoDB's unified test format
// (source/unified-test-format in github.com/mongodb/specifications) against
// a MongoDB URI through the official Go driver, unchanged.
//
// It exists so that Ferry can measure its in-process emulator (package
// mongotest) against MongoDB's own published change-stream tests, and so that
// the same files can be run against a real replica set.
//
// The runner implements the subset of the format that the change-stream
// tests use, and a little more:
//
//   - entities: client (uriOptions, observeEvents for command events,
//     ignoreCommandMonitoringEvents, observeSensitiveCommands,
//     useMultipleMongoses), database and collection (with read concern, read
//     preference and write concern options), session; change streams and
//     find cursors saved with saveResultAsEntity; any BSON value saved the
//     same way;
//   - runOnRequirements: minServerVersion and maxServerVersion (buildInfo
//     versionArray), topologies (hello), serverless ("require" is never
//     met), auth (credentials in the URI), serverParameters (getParameter),
//     csfle (never supported by this build), authMechanism (never met: the
//     server's mechanisms are not read);
//   - initialData and outcome;
//   - the operations listed in [SupportedOperations], CRUD included:
//     bulkWrite and clientBulkWrite (with partial results on errors), the
//     deprecated count (run as the count command, which the v2 driver
//     has no helper for), findOne, modifyCollection (collMod), and the
//     collation, let, hint, arrayFilters and rawData arguments;
//   - arguments the v2 driver cannot express through its public options
//     are passed through its internal options (package xoptions): rawData,
//     and, as extra command fields, bypassDocumentValidation: false (the
//     driver drops false, GODRIVER-3407) and maxTimeMS of operations that
//     return no cursor; where the driver has no such option either (an
//     aggregate's bypassDocumentValidation: false, a hint with an
//     unacknowledged write), the test fails with the driver's reason;
//   - expectResult, expectError (expectResult for a partial result, and
//     writeErrors and writeConcernErrors of a client bulk write) and
//     expectEvents (command events) with the
//     special matching operators ($$exists, $$type, $$unsetOrMatches,
//     $$matchesEntity, $$matchesHexBytes, $$sessionLsid, $$lte,
//     $$matchAsDocument, $$matchAsRoot) and the root-level / nested document
//     rules of the specification.
//
// Anything outside that subset (an unknown operation, argument, entity kind,
// event type or test field) makes the test fail with a reason that starts
// with "unified runner:"; nothing is silently ignored.
//
// Every test is isolated: fresh clients, the initialData collections dropped
// and recreated, fail points turned off, change streams and cursors closed
// and clients disconnected at the end. Every driver call is bounded by a
// timer (iteration of a change stream by [WithIterationTimeout]), so a
// missing event or an unresponsive server fails a test instead of hanging
// it. The timers cancel contexts rather than setting deadlines, so the
// driver does not add maxTimeMS to the commands it sends.
//
// Sessions and transactions: session entities (causalConsistency,
// snapshot, snapshotTime, defaultTransactionOptions); the session
// operations startTransaction, commitTransaction, abortTransaction,
// endSession, getSnapshotTime and withTransaction (the callback's
// operations run with their own expectations checked, and every error one
// of them returns is passed on to withTransaction, expected or not, as the
// format requires); the testRunner operations assertSessionTransactionState,
// assertSessionPinned/Unpinned, assertSessionDirty/NotDirty,
// assertSameLsidOnLastTwoCommands, assertDifferentLsidOnLastTwoCommands and
// targetedFailPoint. The driver keeps a session's transaction state, pin
// and dirty flag unexported; the assertions read them by reflection, as the
// driver's own spec runner does, and fail with a runner error if a driver
// release moves them.
//
// A test that needs what the Go driver v2 does not have (socketTimeoutMS,
// wtimeoutMS, maxCommitTimeMS) or a behaviour it does not follow is
// skipped with a reason that starts "the Go driver v2" and names it; every
// such test is also skipped by the driver's own spec runner (see
// driverlimits.go).
//
// Test files are parsed with the bson package's Extended JSON reader
// (relaxed and canonical forms) and are never modified.
package unified
