package mongotest

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Logical sessions. The server keeps a session's state (its transaction,
// or its newest retryable write) until endSessions or killSessions ends
// it, or until it has been idle for logicalSessionTimeoutMinutes (30). An
// ended session's transaction is aborted. A later command with the same
// lsid starts the session afresh, as on a real server once the session
// record is gone.

// sessionTimeout is logicalSessionTimeoutMinutes.
const sessionTimeout = 30 * time.Minute

// cmdEndSessions implements endSessions and killSessions: {endSessions:
// [{id: UUID}, ...]}.
func cmdEndSessions(e *engine, r *request) (bson.D, error) {
	ids, ok := r.cmd[0].Value.(bson.A)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'array'", r.name, typeName(r.cmd[0].Value))
	}
	for _, v := range ids {
		lsid, ok := v.(bson.D)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "%s: each session must be an object {id: UUID}", r.name)
		}
		e.endSession(sessionKey(lsid))
	}
	return bson.D{}, nil
}

// cmdKillAllSessions ends every session.
func cmdKillAllSessions(e *engine, _ *request) (bson.D, error) {
	for key := range e.sessions {
		e.endSession(key)
	}
	return bson.D{}, nil
}

// endSession aborts the session's transaction and forgets it; a session
// a command has checked out is forgotten when it is checked in. Callers
// hold e.mu.
func (e *engine) endSession(key string) {
	s := e.sessions[key]
	if s == nil {
		return
	}
	if s.txn != nil {
		e.abortTxn(s.txn)
	}
	if s.busy {
		s.ended = true
		return
	}
	delete(e.sessions, key)
}

// reapSessions forgets sessions no command has used for a whole
// sessionTimeout period (so idle between one and two periods). Callers
// hold e.mu.
func (e *engine) reapSessions(now time.Time) {
	if now.Before(e.sessionsReapAt) {
		return
	}
	if !e.sessionsReapAt.IsZero() {
		for key, s := range e.sessions {
			if !s.touched && !s.busy && (s.txn == nil || s.txn.state != txnActive) {
				delete(e.sessions, key)
				continue
			}
			s.touched = false
		}
	}
	e.sessionsReapAt = now.Add(sessionTimeout)
}

// checkSessionOptions refuses the session fields a server refuses before
// running a command: a txnNumber without lsid, autocommit without a
// txnNumber, autocommit: true, startTransaction without autocommit: false
// or set to false.
func checkSessionOptions(r *request) error {
	start, hasStart := r.arg("startTransaction")
	switch {
	case r.txnNumber != nil && r.lsid == nil:
		return errorf(mongoerr.CodeInvalidOptions, "Transaction number requires a session ID to also be specified")
	case r.autocommit != nil && r.txnNumber == nil:
		return errorf(mongoerr.CodeInvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	case r.autocommit != nil && *r.autocommit:
		return errorf(mongoerr.CodeInvalidOptions, "Specifying autocommit=true is not allowed.")
	case hasStart && start != true:
		return errorf(mongoerr.CodeFailedToParse, "specifying startTransaction=false is not allowed")
	case hasStart && r.autocommit == nil:
		return errorf(mongoerr.CodeInvalidOptions, "Must specify autocommit=false on all operations of a multi-statement transaction.")
	}
	return nil
}
