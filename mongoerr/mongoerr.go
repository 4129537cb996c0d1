// Package mongoerr classifies MongoDB errors the way a change-stream
// consumer must act on them: resume, recover from lost history, stop on an
// invalidated stream, retry a transaction, or give up.
//
// One table of codes decides; labels attached by the server
// (ResumableChangeStreamError, NonResumableChangeStreamError,
// TransientTransactionError) take precedence over codes, as in MongoDB's
// own drivers. Every classifier accepts wrapped errors.
//
// The package is also Ferry's one list of MongoDB error codes: a constant
// for every named code Ferry or its emulator uses, and Name, the codeName
// a server puts beside a code.
package mongoerr

import (
	"context"
	"errors"
	"net"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// Class is what a consumer should do about an error.
type Class string

const (
	// None: no error.
	None Class = ""
	// Resumable: reopen the stream from the last token (network errors,
	// step-downs, CursorNotFound, ResumableChangeStreamError).
	Resumable Class = "resumable"
	// HistoryLost: the resume point is no longer in the oplog
	// (ChangeStreamHistoryLost, 286); resuming is impossible without a
	// backfill.
	HistoryLost Class = "history-lost"
	// Invalidated: the stream's namespace was dropped or renamed.
	Invalidated Class = "invalidated"
	// Canceled: the caller's context ended.
	Canceled Class = "canceled"
	// Fatal: retrying cannot help (authentication, a bad pipeline, an
	// unknown resume token): stop and report the server's message.
	Fatal Class = "fatal"
)

// resumableCodes are retried by reopening the stream (the code list MongoDB
// drivers used before error labels, plus CursorNotFound).
var resumableCodes = map[int32]bool{
	CodeHostUnreachable: true, CodeHostNotFound: true, CodeCursorNotFound: true, CodeNetworkTimeout: true,
	CodeShutdownInProgress: true, CodePrimarySteppedDown: true, CodeRetryChangeStream: true,
	CodeExceededTimeLimit: true, CodeSocketException: true, CodeNotWritablePrimary: true,
	CodeInterruptedAtShutdown: true, CodeInterruptedDueToReplStateChange: true, CodeNotPrimaryNoSecondaryOk: true,
	CodeNotPrimaryOrSecondary: true, CodeStaleShardVersion: true, CodeStaleEpoch: true, CodeStaleConfig: true,
	CodeFailedToSatisfyReadPreference: true,
}

// Classify returns what to do about err.
func Classify(err error) Class {
	switch {
	case err == nil:
		return None
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Canceled
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		switch {
		case se.HasErrorCode(CodeChangeStreamHistoryLost):
			return HistoryLost
		case se.HasErrorLabel("NonResumableChangeStreamError"):
			return Fatal
		case se.HasErrorLabel("ResumableChangeStreamError"):
			return Resumable
		}
		for code := range resumableCodes {
			if se.HasErrorCode(int(code)) {
				return Resumable
			}
		}
		if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || isPoolCleared(err) {
			return Resumable
		}
		return Fatal
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || isPoolCleared(err) {
		return Resumable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return Resumable
	}
	if errors.Is(err, mongo.ErrClientDisconnected) {
		return Fatal
	}
	// Server selection timeouts: the cluster may come back, so reopening
	// is the right move.
	var sel topology.ServerSelectionError
	if errors.As(err, &sel) || errors.As(err, new(*topology.ServerSelectionError)) {
		return Resumable
	}
	return Fatal
}

// IsResumable reports whether reopening the stream from its last token may
// succeed.
func IsResumable(err error) bool { return Classify(err) == Resumable }

// IsHistoryLost reports whether the resume point fell off the oplog.
func IsHistoryLost(err error) bool { return Classify(err) == HistoryLost }

// IsTransientTransactionError reports whether a transaction may succeed if
// retried from the start (WriteConflict, NoSuchTransaction after an abort,
// or the TransientTransactionError label).
func IsTransientTransactionError(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	return se.HasErrorLabel("TransientTransactionError") || se.HasErrorCode(CodeWriteConflict)
}

// IsDuplicateKey reports whether err is a duplicate-key error (11000).
func IsDuplicateKey(err error) bool { return mongo.IsDuplicateKeyError(err) }

// isPoolCleared reports a connection pool the driver cleared (paused) after
// another operation's network error or a state change: the driver marks
// it retryable (driver.RetryablePoolError); it says nothing about the
// stream, so reopening it is the right move.
func isPoolCleared(err error) bool {
	var pe driver.RetryablePoolError
	return errors.As(err, &pe) && pe.Retryable()
}

// IsPoolTimeout reports whether err is the driver's timeout waiting for a
// connection from its pool: every connection (maxPoolSize) was checked
// out until the operation's deadline. A change stream holds one while a
// getMore waits for events, so a client whose change streams outnumber
// its pool starves every other operation of that client. A checkout that
// was cancelled (not timed out) is not one.
func IsPoolTimeout(err error) bool {
	var wq topology.WaitQueueTimeoutError
	if !errors.As(err, &wq) && !errors.As(err, new(*topology.WaitQueueTimeoutError)) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}
