package mongotest

import (
	"encoding/hex"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Retryable writes (MONGO-SEMANTICS §8.1), as a replica-set primary does
// them.
//
// A write command that carries lsid and txnNumber but no autocommit is a
// retryable write. The server remembers, for the session's newest
// txnNumber, which of the command's statements ran and what they returned.
// A retry (the same lsid and txnNumber, sent again after the reply was
// lost) runs only the statements that did not run; the others contribute
// their recorded results, so a retried insert neither fails as a
// duplicate nor writes a second oplog entry (and change event), and a
// retried findAndModify returns the document it returned the first time.
// An older txnNumber is refused with TransactionTooOld (225).
//
// Statements are identified by their position in the command (the
// server's default stmtIds). Results are remembered per command
// attempt: the counts (n, nModified), the upserted _ids and, for
// findAndModify, the whole reply. A statement that failed (a write
// error, or a fail point before commit) did not run and runs again on a
// retry. Commands without statement-level support (bulkWrite) are
// remembered whole: a retry returns the first attempt's reply, including
// the errors of operations that failed.

// retryState is what the server remembers about one retryable write: the
// session's newest txnNumber.
type retryState struct {
	cmd string // canonical command name
	// attempted is set once an attempt has finished; ran reports which
	// statements have run: all of them when all is set, else those
	// marked in ran.
	attempted bool
	all       bool
	ran       []bool
	// The results of the statements that ran.
	n, nModified int32
	upserted     bson.A // {index, _id} with the command's own indexes
	reply        bson.D // findAndModify, or a command remembered whole
	// last is the last attempt's reply; without its per-statement fields
	// it is the base of a replayed reply.
	last   bson.D
	opTime bson.Timestamp
}

func (rs *retryState) ranStmt(i int) bool {
	return rs.all || i < len(rs.ran) && rs.ran[i]
}

// statementField names the array of statements of a write command.
func statementField(name string) string {
	switch name {
	case "insert":
		return "documents"
	case "update":
		return "updates"
	case "delete":
		return "deletes"
	}
	return ""
}

func canonicalName(name string) string {
	if name == "findandmodify" {
		return "findAndModify"
	}
	return name
}

// sessionKey is the key of a session in e.sessions: the UUID of its lsid.
func sessionKey(lsid bson.D) string {
	id, _ := lookupTop(lsid, "id")
	if b, ok := id.(bson.Binary); ok && b.Subtype == 4 && len(b.Data) == 16 {
		return string(b.Data)
	}
	return "\x00" + keyOf(id)
}

// sessionName formats a session's id for messages.
func sessionName(lsid bson.D) string {
	id, _ := lookupTop(lsid, "id")
	if b, ok := id.(bson.Binary); ok && b.Subtype == 4 && len(b.Data) == 16 {
		h := hex.EncodeToString(b.Data)
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return fmt.Sprint(id)
}

// checkout reserves the request's session for it, waiting while another
// command uses it, as a server checks a session out for one operation at
// a time: a retry that arrives while the first attempt still runs (for
// example waiting for a transaction's document) waits for it, then finds
// its result. Callers hold e.mu (released while waiting) and call checkin
// when the command ends.
func (e *engine) checkout(r *request) (*session, error) {
	s := e.sessionFor(r.lsid)
	for s.busy {
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		e.sessionWaits++
		e.mu.Unlock()
		select {
		case <-wake:
			e.mu.Lock()
			e.sessionWaits--
		case <-r.ctx.Done():
			e.mu.Lock()
			e.sessionWaits--
			return nil, errorf(mongoerr.CodeInterruptedAtShutdown, "interrupted at shutdown")
		}
		// The session may have been ended and removed meanwhile.
		s = e.sessionFor(r.lsid)
	}
	s.busy = true
	s.touched = true
	return s, nil
}

func (e *engine) checkin(s *session) {
	s.busy = false
	if s.ended && e.sessions[s.key] == s {
		delete(e.sessions, s.key)
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// runRetryable runs a command that carries txnNumber without autocommit.
// Callers hold e.mu.
func (e *engine) runRetryable(spec command, r *request) (bson.D, error) {
	if r.lsid == nil {
		return nil, errorf(mongoerr.CodeInvalidOptions, "Transaction numbers are only allowed on a replica set member or mongos with a session (lsid)")
	}
	name := canonicalName(r.name)
	if !isWriteCommand(name) {
		return nil, errorf(mongoerr.CodeNotARetryableWriteCommand,
			"txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and %s is not a retryable write command.", r.name)
	}
	if err := checkRetryableStatements(r); err != nil {
		return nil, err
	}
	if err := e.checkReadConcern(r); err != nil {
		return nil, err
	}
	sess, err := e.checkout(r)
	if err != nil {
		return nil, err
	}
	defer e.checkin(sess)
	num := *r.txnNumber
	switch {
	case num < sess.txnNumber:
		return nil, errorf(mongoerr.CodeTransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			num, sessionName(sess.lsid), sess.txnNumber)
	case num == sess.txnNumber && sess.txn != nil:
		return nil, errorf(mongoerr.CodeInvalidOptions, "Must specify autocommit=false on all operations of a multi-statement transaction.")
	case num > sess.txnNumber:
		// A newer txnNumber ends whatever the session did before,
		// aborting a transaction still in progress.
		if sess.txn != nil {
			e.abortTxn(sess.txn)
			sess.txn = nil
		}
		sess.txnNumber = num
		sess.retry = retryState{cmd: name}
	}
	rs := &sess.retry
	if rs.cmd != name {
		return nil, errorf(mongoerr.CodeIncompleteTransactionHistory,
			"txnNumber %d on session %s was used by a %s command; a %s cannot reuse it", num, sessionName(sess.lsid), rs.cmd, r.name)
	}
	r.retry = rs
	field := statementField(name)
	if field == "" {
		return e.runRetryableWhole(spec, r, rs)
	}
	return e.runRetryableStatements(spec, r, rs, field)
}

// checkRetryableStatements refuses the statements a server does not run
// as retryable writes: multi-document updates and deletes.
func checkRetryableStatements(r *request) error {
	switch r.name {
	case "update":
		stmts, _ := lookupD(r.cmd, "updates").(bson.A)
		for _, v := range stmts {
			if st, ok := v.(bson.D); ok && mql.Truthy(lookupD(st, "multi")) {
				return errorf(mongoerr.CodeInvalidOptions, "Cannot use (or request) retryable writes with multi=true")
			}
		}
	case "delete":
		stmts, _ := lookupD(r.cmd, "deletes").(bson.A)
		for _, v := range stmts {
			st, ok := v.(bson.D)
			if !ok {
				continue
			}
			limit, ok := lookupTop(st, "limit")
			if !ok {
				return errorf(mongoerr.CodeIDLFailedToParse, "BSON field 'delete.deletes.limit' is missing but a required field")
			}
			if n, _ := asInt64(limit); n == 0 {
				return errorf(mongoerr.CodeInvalidOptions, "Cannot use (or request) retryable writes with limit=0")
			}
		}
	}
	return nil
}

// runRetryableWhole runs a single-statement (findAndModify) or
// whole-command (bulkWrite) retryable write.
func (e *engine) runRetryableWhole(spec command, r *request, rs *retryState) (bson.D, error) {
	if rs.all {
		r.opTime = &rs.opTime
		return append(bson.D(nil), rs.reply...), nil
	}
	reply, err := spec.run(e, r)
	if err != nil {
		return nil, err
	}
	// Remembered whole, per-operation errors included: a retry must not
	// run again the operations that did run.
	rs.all = true
	rs.reply = reply[:len(reply):len(reply)]
	rs.opTime = e.lastTS
	return reply, nil
}

// runRetryableStatements runs the statements of an insert, update or
// delete that have not run yet, and merges their results with those of
// the statements that ran in an earlier attempt.
func (e *engine) runRetryableStatements(spec command, r *request, rs *retryState, field string) (bson.D, error) {
	stmts, _ := lookupD(r.cmd, field).(bson.A)
	var pending []int // the statements to run; nil: all of them
	if rs.attempted {
		for i := range stmts {
			if !rs.ranStmt(i) {
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 {
			r.opTime = &rs.opTime
			return rs.result(nil), nil
		}
		if len(pending) == len(stmts) {
			pending = nil
		}
	}
	run := r
	if pending != nil {
		sub := make(bson.A, len(pending))
		for j, i := range pending {
			sub[j] = stmts[i]
		}
		cp := *r
		cp.cmd = replaceField(r.cmd, field, sub)
		cp.seqs = nil
		run = &cp
	}
	reply, err := spec.run(e, run)
	r.closeConn = run.closeConn
	if err != nil {
		return nil, err
	}
	rs.attempted = true
	index := func(j int) int {
		if pending == nil {
			return j
		}
		return pending[j]
	}
	count := len(stmts)
	if pending != nil {
		count = len(pending)
	}
	// The statements of this attempt that ran: those before the first
	// write error of an ordered command, all but the failed ones of an
	// unordered one.
	failed := map[int]bool{}
	firstErr := count
	var writeErrors bson.A
	if we, ok := lookupD(reply, "writeErrors").(bson.A); ok {
		for _, v := range we {
			d, ok := v.(bson.D)
			if !ok {
				continue
			}
			j, _ := asInt64(lookupD(d, "index"))
			failed[int(j)] = true
			firstErr = min(firstErr, int(j))
			writeErrors = append(writeErrors, replaceField(d, "index", int32(index(int(j)))))
		}
	}
	if pending == nil && len(failed) == 0 {
		rs.all = true
	} else {
		ordered := boolArg(r, "ordered", true)
		if rs.ran == nil {
			rs.ran = make([]bool, len(stmts))
		}
		for j := 0; j < count; j++ {
			if failed[j] || ordered && j > firstErr {
				continue
			}
			if i := index(j); i < len(rs.ran) {
				rs.ran[i] = true
			}
		}
	}
	n, _ := asInt64(lookupD(reply, "n"))
	nModified, _ := asInt64(lookupD(reply, "nModified"))
	rs.n += int32(n)
	rs.nModified += int32(nModified)
	if up, ok := lookupD(reply, "upserted").(bson.A); ok {
		for _, v := range up {
			if d, ok := v.(bson.D); ok {
				j, _ := asInt64(lookupD(d, "index"))
				rs.upserted = append(rs.upserted, replaceField(d, "index", int32(index(int(j)))))
			}
		}
	}
	rs.last = reply[:len(reply):len(reply)]
	rs.opTime = e.lastTS
	if pending == nil {
		// Nothing ran before this attempt: its reply is the whole answer.
		return reply, nil
	}
	return rs.result(writeErrors), nil
}

// result builds the reply of a retried write from what its statements
// returned, with this attempt's write errors.
func (rs *retryState) result(writeErrors bson.A) bson.D {
	out := append(bson.D{{Key: "n", Value: rs.n}}, withoutFields(rs.last, "n", "nModified", "upserted", "writeErrors")...)
	if rs.cmd == "update" {
		out = append(out, bson.E{Key: "nModified", Value: rs.nModified})
		if len(rs.upserted) > 0 {
			out = append(out, bson.E{Key: "upserted", Value: append(bson.A(nil), rs.upserted...)})
		}
	}
	if len(writeErrors) > 0 {
		out = append(out, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return out
}

// replaceField returns a copy of d with key set to v (appended if absent).
func replaceField(d bson.D, key string, v any) bson.D {
	out := make(bson.D, 0, len(d)+1)
	found := false
	for _, el := range d {
		if el.Key == key {
			el.Value = v
			found = true
		}
		out = append(out, el)
	}
	if !found {
		out = append(out, bson.E{Key: key, Value: v})
	}
	return out
}

func withoutFields(d bson.D, keys ...string) bson.D {
	out := make(bson.D, 0, len(d))
next:
	for _, el := range d {
		for _, k := range keys {
			if el.Key == k {
				continue next
			}
		}
		out = append(out, el)
	}
	return out
}
