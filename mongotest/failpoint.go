package mongotest

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// FailPoint makes chosen commands fail the way MongoDB's failCommand fail
// point does (MONGO-SEMANTICS §11). Set it from Go with Server.FailCommand,
// or from any driver with
//
//	{configureFailPoint: "failCommand", mode: ..., data: {...}}
//
// on the admin database.
type FailPoint struct {
	// Commands names the commands that fail (data.failCommands).
	Commands []string
	// Times fires the fail point this many times, then turns it off;
	// 0 with Skip 0 means always on.
	Times int
	// Skip lets the first Skip matching commands through.
	Skip int
	// ErrorCode is the code of the error reply (0: no error reply).
	ErrorCode int32
	// ErrorLabels, when non-nil, replace the labels the server would
	// attach (an empty, non-nil slice means no labels at all).
	ErrorLabels []string
	// CloseConnection closes the connection without replying.
	CloseConnection bool
	// BlockFor delays the command (blockConnection + blockTimeMS).
	BlockFor time.Duration
	// AppName limits the fail point to clients with that application name.
	AppName string
	// Namespace limits the fail point to one "db.coll".
	Namespace string
	// WriteConcernError, when set, is added to the successful reply.
	WriteConcernError bson.D
	// ErrorExtraInfo is merged into the error reply.
	ErrorExtraInfo bson.D
	// FailInternalCommands lets the fail point also fail the commands of
	// internal clients (data.failInternalCommands): on a shard, those a
	// mongos sends it, which a shard's failCommand leaves alone by
	// default, as on a real cluster (a mongos is an internal client).
	FailInternalCommands bool

	// failBeforeCommit is onPrimaryTransactionalWrite's
	// failBeforeCommitExceptionCode.
	failBeforeCommit int32
}

// RetryableWriteFailPoint is MongoDB's onPrimaryTransactionalWrite fail
// point: it fires as a statement of a retryable write is applied, after
// the write by default (the connection closes and the reply is lost, but
// the write stays), or before it with FailBeforeCommit. Set it from Go
// with Server.FailRetryableWrites, or from any driver with
//
//	{configureFailPoint: "onPrimaryTransactionalWrite", mode: ...,
//	 data: {closeConnection?: bool, failBeforeCommitExceptionCode?: int}}
//
// on the admin database. Statements of multi-document transactions do
// not trigger it.
type RetryableWriteFailPoint struct {
	// Times fires the fail point this many times, then turns it off;
	// 0 with Skip 0 means always on.
	Times int
	// Skip lets the first Skip statements through.
	Skip int
	// KeepConnection leaves the connection open (data.closeConnection:
	// false); by default it is closed without a reply.
	KeepConnection bool
	// FailBeforeCommit, when not zero, fails the statement with this
	// code before it is applied.
	FailBeforeCommit int32
}

// FailRetryableWrites activates the onPrimaryTransactionalWrite fail point,
// replacing any earlier one.
func (s *Server) FailRetryableWrites(fp RetryableWriteFailPoint) {
	s.eng.fail.set("onPrimaryTransactionalWrite", FailPoint{Times: fp.Times, Skip: fp.Skip,
		CloseConnection: !fp.KeepConnection, failBeforeCommit: fp.FailBeforeCommit})
}

// fire counts an activation of a fail point that has no command filter
// (onPrimaryTransactionalWrite) and reports it, or nil when it is off or
// skips this one.
func (f *failPoints) fire(name string) *FailPoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.active[name]
	if st == nil {
		return nil
	}
	if st.skip > 0 {
		st.skip--
		return nil
	}
	st.hits++
	if !st.alwaysOn {
		st.remaining--
		if st.remaining <= 0 {
			delete(f.active, name)
		}
	}
	out := st.fp
	return &out
}

// transactionalWriteFailPoint runs onPrimaryTransactionalWrite for one
// statement of a retryable write about to be applied: it may close the
// connection once the command is done, and may fail the statement.
func (e *engine) transactionalWriteFailPoint(r *request) error {
	if r == nil || r.retry == nil || r.txn != nil {
		return nil
	}
	fp := e.fail.fire("onPrimaryTransactionalWrite")
	if fp == nil {
		return nil
	}
	if fp.CloseConnection {
		r.closeConn = true
	}
	if fp.failBeforeCommit != 0 {
		return errorf(fp.failBeforeCommit, "Failing write for %s:%d due to failpoint. The write must not be reflected.",
			sessionName(r.lsid), *r.txnNumber)
	}
	return nil
}

// failPoints holds the active fail points by name ("failCommand",
// "failGetMoreAfterCursorCheckout").
type failPoints struct {
	mu     sync.Mutex
	active map[string]*failPointState
}

type failPointState struct {
	fp        FailPoint
	alwaysOn  bool
	remaining int
	skip      int
	hits      int
}

// FailCommand activates the failCommand fail point, replacing any earlier
// one. A zero Times and Skip means always on.
func (s *Server) FailCommand(fp FailPoint) { s.eng.fail.set("failCommand", fp) }

// FailGetMoreAfterCursorCheckout activates MongoDB's
// failGetMoreAfterCursorCheckout fail point: getMore fails with code after
// the cursor is found, so the server labels the error as it would a real one
// (ResumableChangeStreamError for resumable codes on change streams).
func (s *Server) FailGetMoreAfterCursorCheckout(code int32, times int) {
	s.eng.fail.set("failGetMoreAfterCursorCheckout", FailPoint{Commands: []string{"getMore"}, ErrorCode: code, Times: times})
}

// ClearFailPoints turns every fail point off.
func (s *Server) ClearFailPoints() {
	s.eng.fail.mu.Lock()
	s.eng.fail.active = nil
	s.eng.fail.mu.Unlock()
}

func (f *failPoints) set(name string, fp FailPoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active == nil {
		f.active = make(map[string]*failPointState)
	}
	f.active[name] = &failPointState{fp: fp, alwaysOn: fp.Times == 0, remaining: fp.Times, skip: fp.Skip}
}

func (f *failPoints) off(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.active[name]
	delete(f.active, name)
	if st == nil {
		return 0
	}
	return st.hits
}

// check reports the fail point that fires for this command, if any, and
// counts the activation.
func (f *failPoints) check(name string, r *request, ns string) *FailPoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.active[name]
	if st == nil {
		return nil
	}
	fp := &st.fp
	if !contains(fp.Commands, r.name) {
		return nil
	}
	if name == "failCommand" && r.conn != nil && r.conn.viaRouter && !fp.FailInternalCommands {
		return nil
	}
	if fp.AppName != "" && (r.conn == nil || r.conn.appName != fp.AppName) {
		return nil
	}
	if fp.Namespace != "" && fp.Namespace != ns {
		return nil
	}
	if fp.ErrorCode == 0 && !fp.CloseConnection && fp.BlockFor == 0 && fp.WriteConcernError == nil {
		return nil
	}
	if st.skip > 0 {
		st.skip--
		return nil
	}
	st.hits++
	if !st.alwaysOn {
		st.remaining--
		if st.remaining <= 0 {
			delete(f.active, name)
		}
	}
	out := *fp
	return &out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cmdConfigureFailPoint implements {configureFailPoint: name, mode, data}.
func cmdConfigureFailPoint(e *engine, r *request) (bson.D, error) {
	name, _ := r.cmd[0].Value.(string)
	switch name {
	case "failCommand", "failGetMoreAfterCursorCheckout", "onPrimaryTransactionalWrite":
	default:
		return nil, errorf(mongoerr.CodeFailedToParse, "Cannot find FailPoint named %q (mongotest supports failCommand, failGetMoreAfterCursorCheckout and onPrimaryTransactionalWrite)", name)
	}
	mode, ok := r.arg("mode")
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "FailPoint mode is missing")
	}
	var fp FailPoint
	switch m := mode.(type) {
	case string:
		switch m {
		case "off":
			n := e.fail.off(name)
			return bson.D{{Key: "count", Value: int64(n)}}, nil
		case "alwaysOn":
		default:
			return nil, errorf(mongoerr.CodeBadValue, "Unknown FailPoint mode: %s", m)
		}
	case bson.D:
		if v, ok := lookupTop(m, "times"); ok {
			n, ok := asInt64(v)
			if !ok || n < 0 {
				return nil, errorf(mongoerr.CodeBadValue, "'times' must be a non-negative number")
			}
			if n == 0 {
				e.fail.off(name)
				return bson.D{{Key: "count", Value: int64(0)}}, nil
			}
			fp.Times = int(n)
		}
		if v, ok := lookupTop(m, "skip"); ok {
			n, ok := asInt64(v)
			if !ok || n < 0 {
				return nil, errorf(mongoerr.CodeBadValue, "'skip' must be a non-negative number")
			}
			fp.Skip = int(n)
		}
		if _, ok := lookupTop(m, "activationProbability"); ok {
			return nil, errorf(mongoerr.CodeBadValue, "mongotest does not support activationProbability (tests must be deterministic)")
		}
	default:
		return nil, errorf(mongoerr.CodeTypeMismatch, "FailPoint mode must be a string or an object")
	}
	data, _ := lookupD(r.cmd, "data").(bson.D)
	if name == "onPrimaryTransactionalWrite" {
		return e.configureTransactionalWrite(fp, data)
	}
	for _, el := range data {
		switch el.Key {
		case "failCommands":
			arr, _ := el.Value.(bson.A)
			for _, c := range arr {
				if s, ok := c.(string); ok {
					fp.Commands = append(fp.Commands, s)
				}
			}
		case "errorCode":
			n, ok := asInt64(el.Value)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "'errorCode' must be a number")
			}
			fp.ErrorCode = int32(n)
		case "errorLabels":
			arr, _ := el.Value.(bson.A)
			fp.ErrorLabels = []string{}
			for _, l := range arr {
				if s, ok := l.(string); ok {
					fp.ErrorLabels = append(fp.ErrorLabels, s)
				}
			}
		case "closeConnection":
			fp.CloseConnection = mql.Truthy(el.Value)
		case "blockConnection":
			if mql.Truthy(el.Value) && fp.BlockFor == 0 {
				fp.BlockFor = -1 // set by blockTimeMS
			}
		case "blockTimeMS":
			n, ok := asInt64(el.Value)
			if !ok || n < 0 {
				return nil, errorf(mongoerr.CodeInvalidOptions, "'blockTimeMS' must be a non-negative number")
			}
			if fp.BlockFor != 0 || mql.Truthy(lookupD(data, "blockConnection")) {
				fp.BlockFor = time.Duration(n) * time.Millisecond
			}
		case "appName":
			fp.AppName, _ = el.Value.(string)
		case "namespace":
			fp.Namespace, _ = el.Value.(string)
		case "writeConcernError":
			fp.WriteConcernError, _ = el.Value.(bson.D)
		case "errorExtraInfo":
			fp.ErrorExtraInfo, _ = el.Value.(bson.D)
		case "failInternalCommands":
			fp.FailInternalCommands = mql.Truthy(el.Value)
		case "threadName", "failAllCommands", "failLocalClients":
		}
	}
	if fp.BlockFor < 0 {
		return nil, errorf(mongoerr.CodeInvalidOptions, "must specify 'blockTimeMS' when 'blockConnection' is true")
	}
	if name == "failGetMoreAfterCursorCheckout" {
		fp.Commands = []string{"getMore"}
	}
	e.fail.set(name, fp)
	return bson.D{{Key: "count", Value: int64(0)}}, nil
}

// configureTransactionalWrite sets onPrimaryTransactionalWrite from its
// data: closeConnection (default true) and failBeforeCommitExceptionCode.
func (e *engine) configureTransactionalWrite(fp FailPoint, data bson.D) (bson.D, error) {
	fp.CloseConnection = true
	for _, el := range data {
		switch el.Key {
		case "closeConnection":
			b, ok := el.Value.(bool)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "'closeConnection' must be a boolean")
			}
			fp.CloseConnection = b
		case "failBeforeCommitExceptionCode":
			n, ok := asInt64(el.Value)
			if !ok || n == 0 {
				return nil, errorf(mongoerr.CodeTypeMismatch, "'failBeforeCommitExceptionCode' must be a non-zero number")
			}
			fp.failBeforeCommit = int32(n)
		default:
			return nil, errorf(mongoerr.CodeBadValue, "mongotest: onPrimaryTransactionalWrite has no data field %q (it takes closeConnection and failBeforeCommitExceptionCode)", el.Key)
		}
	}
	e.fail.set("onPrimaryTransactionalWrite", fp)
	return bson.D{{Key: "count", Value: int64(0)}}, nil
}
