package mongotest

// Error labels, computed the way a 4.4+ mongod computes them
// (src/mongo/db/error_labels.cpp; MONGO-SEMANTICS §5.2). A failCommand fail
// point that gives errorLabels replaces all of them.

import "github.com/ferry-io/ferry/mongoerr"

// transientTxnCodes are the codes isTransientTransactionError accepts
// outright: WriteConflict, LockTimeout, PreparedTransactionInProgress,
// StaleDbVersion, ShardCannotRefreshDueToLocksHeld, the tenant migration
// codes, the snapshot errors (SnapshotTooOld, StaleChunkHistory,
// SnapshotUnavailable, MigrationConflict) and the NeedRetargetting errors.
var transientTxnCodes = map[int32]bool{
	mongoerr.CodeWriteConflict: true, mongoerr.CodeLockTimeout: true, mongoerr.CodePreparedTransactionInProgress: true,
	mongoerr.CodeStaleDbVersion: true, mongoerr.CodeShardCannotRefreshDueToLocksHeld: true,
	325: true, 326: true, // the tenant migration codes, no longer in error_codes.yml
	mongoerr.CodeSnapshotTooOld: true, mongoerr.CodeSnapshotUnavailable: true, mongoerr.CodeStaleChunkHistory: true,
	mongoerr.CodeMigrationConflict: true,
	mongoerr.CodeStaleShardVersion: true, mongoerr.CodeStaleEpoch: true, mongoerr.CodeStaleConfig: true,
}

// isTransientTransactionError is the server's rule for
// TransientTransactionError: a failure that left nothing behind, so the
// whole transaction may be retried.
func isTransientTransactionError(code int32, hasWCE, commitOrAbort bool) bool {
	if code == mongoerr.CodeInternalTransactionNotSupported {
		return false
	}
	if transientTxnCodes[code] {
		return true
	}
	if commitOrAbort {
		return code == mongoerr.CodeNoSuchTransaction && !hasWCE
	}
	return retriableCodes[code] || code == mongoerr.CodeNoSuchTransaction
}

func isCommitOrAbort(name string) bool {
	return name == "commitTransaction" || name == "abortTransaction"
}

// labelsFor returns the labels of a reply that failed with code (0: the
// command succeeded) and carries a writeConcernError with wceCode (0:
// none).
func (e *engine) labelsFor(code int32, r *request) []string { return e.replyLabels(code, 0, r) }

func (e *engine) replyLabels(code, wceCode int32, r *request) []string {
	var labels []string
	inTxn := r.txnNumber != nil && r.autocommit != nil
	retryableWrite := r.txnNumber != nil && r.autocommit == nil
	labelled := false
	switch {
	case code != 0 && inTxn && isTransientTransactionError(code, wceCode != 0, isCommitOrAbort(r.name)):
		labels = append(labels, "TransientTransactionError")
		labelled = true
	case (retryableWrite || inTxn && isCommitOrAbort(r.name)) && (retriableCodes[code] || retriableCodes[wceCode]):
		labels = append(labels, "RetryableWriteError")
		labelled = true
		// The command wrote nothing, on a connection that has written
		// before: drivers then report an earlier error instead (DRIVERS-2327).
		if r.conn != nil && !r.conn.lastOp.IsZero() && r.conn.lastOp == r.lastOpBefore {
			labels = append(labels, "NoWritesPerformed")
		}
	}
	switch {
	case !labelled && code != 0 && wceCode == 0 && (r.name == "aggregate" || r.name == "getMore") &&
		(retriableCodes[code] || networkCodes[code] || needRetargettingCodes[code] || code == mongoerr.CodeRetryChangeStream || code == mongoerr.CodeFailedToSatisfyReadPreference) &&
		e.isChangeStreamRequest(r):
		labels = append(labels, "ResumableChangeStreamError")
	case nonResumableStreamCodes[code]:
		labels = append(labels, "NonResumableChangeStreamError")
	}
	return labels
}
