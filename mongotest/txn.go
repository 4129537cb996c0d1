package mongotest

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Multi-document transactions (MONGO-SEMANTICS §8).
//
// A transaction reads a snapshot: the committed state as of its first
// command (every record keeps the versions an open snapshot may still need)
// plus its own writes. Its writes are buffered; a write to a document that
// another transaction has written, or that was committed after the
// snapshot, fails at once with WriteConflict (112, TransientTransactionError)
// and aborts the transaction, as on a real server. Commit applies all writes
// under the engine lock and logs them with one cluster time, the session's
// lsid and txnNumber and increasing txnOpIndex, so readers and change
// streams see all of a transaction or none of it. Aborted transactions leave
// no trace.

type txnState int

const (
	txnActive txnState = iota
	txnCommitted
	txnAborted
)

// defaultTransactionLifetime is MongoDB's transactionLifetimeLimitSeconds
// default. A transaction of a client that died stays open (and keeps its
// documents from other writers) until then, as on a real server.
const defaultTransactionLifetime = 60 * time.Second

// session is the server side of a logical session: its newest txnNumber,
// used by a transaction (txn) or by a retryable write (retry).
type session struct {
	key       string
	lsid      bson.D
	txnNumber int64
	txn       *txn
	retry     retryState
	// busy is set while a command has the session checked out; wake, when
	// not nil, is closed when it is checked in.
	busy bool
	wake chan struct{}
	// touched is set by every command; the reaper removes sessions idle
	// for logicalSessionTimeoutMinutes.
	touched bool
	// ended is set by endSessions while a command has the session.
	ended bool
}

type txn struct {
	// readOnly marks the transaction of a snapshot read outside a
	// multi-document transaction.
	readOnly bool
	// owns, on a snapshot read a mongos sent a shard, keeps the documents
	// the shard owned at the read's time (nil: every document).
	owns     func(c *collection, doc bson.D) bool
	sess     *session
	number   int64
	snap     int64 // first oplog sequence number the snapshot does not see
	state    txnState
	started  time.Time
	ops      []txnOp
	ddl      txnDDL        // collections the transaction created
	creating []*collection // created by the statement running
	local    map[*collection]map[string]*txnDoc
	order    map[*collection][]string // keys of documents the transaction inserted, in order
	locked   []*record
	pending  []pendingKey
	done     chan struct{} // closed when the transaction commits or aborts
}

// txnDoc is a document's state inside a transaction.
type txnDoc struct {
	doc bson.D  // nil: deleted by the transaction
	rec *record // the committed record it replaces, nil if new
}

type pendingKey struct {
	c   *collection
	key string
}

type txnOp struct {
	op   string // opInsert, opUpdate, opReplace, opDelete
	c    *collection
	key  string
	doc  bson.D
	raw  bson.Raw
	pre  bson.D
	desc *mql.UpdateDescription
}

// version is an earlier state of a record, kept while a snapshot may need it.
type version struct {
	doc bson.D   // nil: the document did not exist
	raw bson.Raw // doc encoded (record.raw)
	seq int64
}

// versionAt returns the record's document as a snapshot taken before oplog
// sequence number snap sees it (nil: absent), and its encoding.
func (rec *record) versionAt(snap int64) (bson.D, bson.Raw) {
	if rec.seq < snap {
		if rec.deleted {
			return nil, nil
		}
		return rec.doc, rec.raw
	}
	for i := len(rec.history) - 1; i >= 0; i-- {
		if v := &rec.history[i]; v.seq < snap {
			return v.doc, v.raw
		}
	}
	return nil, nil
}

// noteVersion records a record's current state before it changes, if any
// open transaction might still need it. Callers hold e.mu.
func (e *engine) noteVersion(c *collection, rec *record) {
	if !e.keepHistory() {
		rec.history = nil
		e.noteDropped(c, e.oplog.nextSeq)
		return
	}
	v := version{seq: rec.seq}
	if !rec.deleted {
		v.doc, v.raw = rec.doc, rec.raw
	}
	e.trimHistory(c, rec)
	rec.history = append(rec.history, v)
}

func (e *engine) sessionFor(lsid bson.D) *session {
	id, _ := lookupTop(lsid, "id")
	if b, ok := id.(bson.Binary); ok && b.Subtype == 4 && len(b.Data) == 16 {
		if s := e.sessions[string(b.Data)]; s != nil { // no allocation
			return s
		}
	}
	key := sessionKey(lsid)
	s := e.sessions[key]
	if s == nil {
		s = &session{key: key, lsid: lsid, txnNumber: -1}
		e.sessions[key] = s
	}
	return s
}

// txnFor resolves the transaction a command belongs to, starting it when
// the command carries startTransaction. Callers hold e.mu.
func (e *engine) txnFor(r *request) (*txn, error) {
	if r.lsid == nil {
		return nil, errorf(mongoerr.CodeInvalidOptions, "Transaction numbers are only allowed on a replica set member or mongos with a session (lsid)")
	}
	if *r.autocommit {
		return nil, errorf(mongoerr.CodeInvalidOptions, "autocommit:true is not supported; omit autocommit for a retryable write")
	}
	sess := e.sessionFor(r.lsid)
	num := *r.txnNumber
	if num < sess.txnNumber {
		return nil, errorf(mongoerr.CodeTransactionTooOld, "Cannot start transaction %d on session %s because a newer transaction %d has already started", num, sessionName(sess.lsid), sess.txnNumber)
	}
	if boolArg(r, "startTransaction", false) {
		if num == sess.txnNumber && sess.txn != nil {
			return nil, errorf(mongoerr.CodeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", num, sess.txnNumber)
		}
		if sess.txn != nil && sess.txn.state == txnActive {
			e.abortTxn(sess.txn)
		}
		snap := e.oplog.nextSeq
		if rc, ok := lookupD(r.cmd, "readConcern").(bson.D); ok {
			if at, ok := lookupD(rc, "atClusterTime").(bson.Timestamp); ok {
				if level, _ := lookupD(rc, "level").(string); level != "snapshot" {
					return nil, errorf(mongoerr.CodeInvalidOptions, "readConcern atClusterTime is only valid with level \"snapshot\"")
				}
				var err error
				if snap, err = e.snapshotAt(at, ""); err != nil {
					return nil, err
				}
			}
		}
		t := &txn{sess: sess, number: num, snap: snap, started: e.nowLocked(), done: make(chan struct{}),
			local: map[*collection]map[string]*txnDoc{}, order: map[*collection][]string{}}
		sess.txnNumber, sess.txn = num, t
		e.activeTxns++
		return t, nil
	}
	t := sess.txn
	if num != sess.txnNumber || t == nil {
		return nil, errorf(mongoerr.CodeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", num, sess.txnNumber)
	}
	switch t.state {
	case txnAborted:
		return nil, errorf(mongoerr.CodeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", num)
	case txnCommitted:
		return nil, errorf(mongoerr.CodeTransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", num)
	}
	return t, nil
}

// abortTxn discards a transaction's writes and releases what it holds.
func (e *engine) abortTxn(t *txn) {
	if t.state != txnActive {
		return
	}
	t.state = txnAborted
	e.releaseTxn(t)
}

func (e *engine) releaseTxn(t *txn) {
	for _, rec := range t.locked {
		if rec.lockedBy == t {
			rec.lockedBy = nil
		}
	}
	for _, p := range t.pending {
		if p.c.pending[p.key] == t {
			delete(p.c.pending, p.key)
		}
	}
	t.locked, t.pending, t.local, t.order = nil, nil, nil, nil
	e.activeTxns--
	close(t.done)
}

// blockingTxn returns an open transaction that holds one of the records, or
// nil.
func blockingTxn(refs []docRef) *txn {
	for _, ref := range refs {
		if ref.rec != nil && ref.rec.lockedBy != nil && ref.rec.lockedBy.state == txnActive {
			return ref.rec.lockedBy
		}
	}
	return nil
}

// waitTxn lets a plain write wait, as on a real server, until the
// transaction holding its document ends; the caller then reads again.
// Callers hold e.mu; it is released while waiting.
func (e *engine) waitTxn(r *request, t *txn) error {
	e.txnWaits++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.txnWaits--
	}()
	timer := time.NewTimer(e.params.txnLifetime + time.Second)
	defer timer.Stop()
	select {
	case <-t.done:
		return nil
	case <-r.ctx.Done():
		return errorf(mongoerr.CodeInterruptedAtShutdown, "interrupted at shutdown")
	case <-timer.C:
		return errorf(mongoerr.CodeMaxTimeMSExpired, "operation exceeded time limit waiting for a transaction to end")
	}
}

// reapTxns aborts transactions older than transactionLifetimeLimitSeconds.
func (e *engine) reapTxns() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.nowLocked()
	for _, s := range e.sessions {
		if t := s.txn; t != nil && t.state == txnActive && now.Sub(t.started) > e.params.txnLifetime {
			e.abortTxn(t)
		}
	}
	e.reapSessions(now)
}

func writeConflict() *cmdError {
	return errorf(mongoerr.CodeWriteConflict, "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")
}

func (t *txn) locals(c *collection) map[string]*txnDoc {
	m := t.local[c]
	if m == nil {
		m = map[string]*txnDoc{}
		t.local[c] = m
	}
	return m
}

// lock takes a committed record for the transaction, or reports the
// conflict a real server reports.
func (t *txn) lock(rec *record) error {
	if rec.lockedBy == t {
		return nil
	}
	if rec.lockedBy != nil || rec.seq >= t.snap {
		return writeConflict()
	}
	rec.lockedBy = t
	t.locked = append(t.locked, rec)
	return nil
}

// read returns the documents of c the transaction sees that match f. ex
// counts what it examined (see collection.matching): only the documents
// the transaction sees.
func (t *txn) read(c *collection, f *mql.Filter, filter bson.D, vars *mql.Vars, limit int, ex *examined) []docRef {
	loc := t.local[c]
	recs := c.records
	byID := false
	// A filter that pins _id reads only the records, live or deleted since,
	// with those _ids.
	if keys, ok := idKeys(filter); ok {
		if found, ok := c.idCandidates(keys); ok {
			recs, byID = found, true
		}
	}
	var out []docRef
	for _, rec := range recs {
		if rec == nil {
			continue
		}
		d, raw := rec.versionAt(t.snap)
		if d == nil {
			continue
		}
		if loc != nil {
			if ld, ok := loc[keyOf(d[0].Value)]; ok && ld.rec == rec {
				if ld.doc == nil {
					continue
				}
				d, raw = ld.doc, nil
			}
		}
		if byID {
			ex.keys++
		}
		ex.docs++
		if t.owns != nil && !t.owns(c, d) {
			continue // an orphan at the snapshot's time
		}
		if f.Match(d, vars) {
			out = append(out, docRef{rec: rec, doc: d, raw: raw})
			if limit > 0 && len(out) >= limit {
				return out
			}
		}
	}
	for _, key := range t.order[c] {
		ld := loc[key]
		if ld == nil || ld.rec != nil || ld.doc == nil {
			continue
		}
		match := f.Match(ld.doc, vars)
		switch {
		case !byID:
			ex.docs++
		case match: // an _id lookup finds only the documents it names
			ex.keys++
			ex.docs++
		}
		if match {
			out = append(out, docRef{doc: ld.doc})
			if limit > 0 && len(out) >= limit {
				return out
			}
		}
	}
	return out
}

func (t *txn) insert(c *collection, doc bson.D, raw bson.Raw) error {
	key := keyOf(doc[0].Value)
	loc := t.locals(c)
	ld := loc[key]
	if ld != nil && ld.doc != nil {
		return c.dupKeyError(c.indexes[0], bson.D{doc[0]})
	}
	if cur := c.byID[key]; cur != nil && (ld == nil || ld.rec != cur) {
		if d, _ := cur.versionAt(t.snap); d != nil {
			return c.dupKeyError(c.indexes[0], bson.D{doc[0]})
		}
		return writeConflict()
	}
	if other := c.pending[key]; other != nil && other != t {
		return writeConflict()
	}
	if err := c.checkUnique(doc, nil); err != nil {
		return err
	}
	if c.pending == nil {
		c.pending = map[string]*txn{}
	}
	c.pending[key] = t
	t.pending = append(t.pending, pendingKey{c, key})
	var rec *record
	if ld != nil {
		rec = ld.rec
	} else {
		t.order[c] = append(t.order[c], key)
	}
	loc[key] = &txnDoc{doc: doc, rec: rec}
	t.ops = append(t.ops, txnOp{op: opInsert, c: c, key: key, doc: doc, raw: raw})
	return nil
}

func (t *txn) update(c *collection, ref docRef, doc bson.D, op string, desc *mql.UpdateDescription) error {
	key := keyOf(doc[0].Value)
	if ref.rec != nil {
		if err := t.lock(ref.rec); err != nil {
			return err
		}
	}
	if err := c.checkUnique(doc, ref.doc); err != nil {
		return err
	}
	t.locals(c)[key] = &txnDoc{doc: doc, rec: ref.rec}
	t.ops = append(t.ops, txnOp{op: op, c: c, key: key, doc: doc, pre: ref.doc, desc: desc})
	return nil
}

func (t *txn) delete(c *collection, ref docRef) error {
	key := keyOf(ref.doc[0].Value)
	if ref.rec != nil {
		if err := t.lock(ref.rec); err != nil {
			return err
		}
	}
	t.locals(c)[key] = &txnDoc{rec: ref.rec}
	t.ops = append(t.ops, txnOp{op: opDelete, c: c, key: key, pre: ref.doc})
	return nil
}

// commitTxn applies a transaction's writes atomically and logs them with
// one cluster time. Callers hold e.mu.
func (e *engine) commitTxn(t *txn) error {
	type undo struct {
		op  string
		c   *collection
		rec *record
		old bson.D
		raw bson.Raw
	}
	var undos []undo
	if err := e.commitDDL(t); err != nil {
		e.abortTxn(t)
		return err
	}
	rollback := func() {
		for _, c := range t.ddl.colls {
			if d := e.dbs[c.db]; d != nil && d.colls[c.name] == c {
				delete(d.colls, c.name)
			}
		}
		for i := len(undos) - 1; i >= 0; i-- {
			u := undos[i]
			switch u.op {
			case opInsert:
				u.c.remove(u.rec, true)
			case opDelete:
				u.c.restore(u.rec)
			default:
				_ = u.c.replace(u.rec, u.old, u.raw)
			}
		}
	}
	ddl := len(t.ddl.entries)
	base := e.oplog.nextSeq + int64(ddl)
	for i, op := range t.ops {
		c := op.c
		seq := base + int64(i)
		switch op.op {
		case opInsert:
			if err := c.insert(op.doc, op.raw); err != nil {
				rollback()
				e.abortTxn(t)
				return err
			}
			rec := c.byID[op.key]
			rec.seq = seq
			t.ops[i].raw = rec.raw // the oplog entry's, below
			undos = append(undos, undo{op: opInsert, c: c, rec: rec})
		case opDelete:
			rec := c.byID[op.key]
			if rec == nil {
				continue
			}
			e.noteVersion(c, rec)
			c.remove(rec, true)
			rec.seq = seq
			undos = append(undos, undo{op: opDelete, c: c, rec: rec})
		default:
			rec := c.byID[op.key]
			if rec == nil {
				continue
			}
			old, oldRaw := rec.doc, rec.raw
			e.noteVersion(c, rec)
			if err := c.replace(rec, op.doc, nil); err != nil {
				rollback()
				e.abortTxn(t)
				return err
			}
			rec.seq = seq
			t.ops[i].raw = rec.raw // the oplog entry's, below
			undos = append(undos, undo{op: op.op, c: c, rec: rec, old: old, raw: oldRaw})
		}
	}
	now := e.nowLocked()
	ts := e.nextTimestamp(now)
	wall := bson.NewDateTimeFromTime(now)
	num := t.number
	for i, ent := range t.ddl.entries {
		ent.ts, ent.wall, ent.txnOpIndex, ent.lsid, ent.txnNumber = ts, wall, i, t.sess.lsid, &num
		e.appendStamped(ent)
	}
	for i, op := range t.ops {
		c := op.c
		u := c.uuid
		ent := &oplogEntry{op: op.op, db: c.db, coll: c.name, uuid: &u, ts: ts, wall: wall,
			txnOpIndex: ddl + i, lsid: t.sess.lsid, txnNumber: &num}
		switch op.op {
		case opInsert:
			ent.docKey, ent.doc, ent.docRaw = c.documentKey(op.doc), op.doc, op.raw
		case opDelete:
			ent.docKey = c.documentKey(op.pre)
		default:
			ent.docKey, ent.doc, ent.docRaw, ent.upd = c.documentKey(op.doc), op.doc, op.raw, op.desc
		}
		if c.preAndPostImages && op.op != opInsert {
			ent.preImage, ent.preImageRecorded = op.pre, true
		}
		e.appendStamped(ent)
	}
	t.state = txnCommitted
	e.releaseTxn(t)
	return nil
}

// Commands that may run inside a transaction.
var txnCommands = map[string]bool{
	"find": true, "getMore": true, "insert": true, "update": true, "delete": true,
	"findAndModify": true, "findandmodify": true, "aggregate": true, "distinct": true,
	"killCursors": true, "commitTransaction": true, "abortTransaction": true,
	"create": true, "createIndexes": true, "ping": true,
	"bulkWrite": true,
}

// runTxn runs a command that belongs to a transaction. Callers hold e.mu.
func (e *engine) runTxn(spec command, r *request) (bson.D, error) {
	if !txnCommands[r.name] {
		return nil, errorf(mongoerr.CodeOperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", r.name)
	}
	if r.name == "commitTransaction" {
		// Committing again a transaction that committed succeeds.
		if s := e.sessionFor(r.lsid); s.txnNumber == *r.txnNumber && s.txn != nil && s.txn.state == txnCommitted {
			return bson.D{}, nil
		}
	}
	t, err := e.txnFor(r)
	if err != nil {
		return nil, err
	}
	r.txn = t
	switch r.name {
	case "commitTransaction":
		if err := e.commitTxn(t); err != nil {
			return nil, err
		}
		return bson.D{}, nil
	case "abortTransaction":
		e.abortTxn(t)
		return bson.D{}, nil
	}
	reply, err := e.runTxnStatement(spec, r, t)
	if _, hasWriteErrors := lookupTop(reply, "writeErrors"); err != nil || hasWriteErrors {
		// Any failed statement aborts the transaction.
		e.abortTxn(t)
	}
	return reply, err
}

// cmdCommitTransaction handles a commit outside an active transaction: a
// repeated commit of a committed transaction succeeds, anything else is
// NoSuchTransaction.
func cmdCommitTransaction(e *engine, r *request) (bson.D, error) {
	if r.lsid == nil || r.txnNumber == nil {
		return nil, errorf(mongoerr.CodeInvalidOptions, "commitTransaction must be run within a transaction (lsid and txnNumber)")
	}
	sess := e.sessionFor(r.lsid)
	if sess.txnNumber == *r.txnNumber && sess.txn != nil && sess.txn.state == txnCommitted {
		return bson.D{}, nil
	}
	return nil, errorf(mongoerr.CodeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", *r.txnNumber)
}

func cmdAbortTransaction(e *engine, r *request) (bson.D, error) {
	if r.lsid == nil || r.txnNumber == nil {
		return nil, errorf(mongoerr.CodeInvalidOptions, "abortTransaction must be run within a transaction (lsid and txnNumber)")
	}
	return nil, errorf(mongoerr.CodeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", *r.txnNumber)
}

// docRef is a document a command read: the committed record it comes from
// (nil for a document the command's transaction inserted) and the version
// the command sees.
type docRef struct {
	rec *record
	doc bson.D
	// raw is doc encoded when doc is a stored version (record.raw), nil
	// for a document the command made (a transaction's own write).
	raw bson.Raw
}

// read returns the documents of c matching f as the command sees them: the
// latest committed state, or its transaction's snapshot and own writes.
// Callers hold e.mu.
func (e *engine) read(r *request, c *collection, f *mql.Filter, filter bson.D, vars *mql.Vars, limit int) []docRef {
	if c == nil {
		return nil
	}
	if r != nil && r.txn != nil {
		return r.txn.read(c, f, filter, vars, limit, &e.metrics.scan)
	}
	recs := c.matching(f, filter, vars, limit, &e.metrics.scan)
	out := make([]docRef, len(recs))
	for i, rec := range recs {
		out[i] = docRef{rec: rec, doc: rec.doc, raw: rec.raw}
	}
	return out
}

// writeInsert inserts a document, in the command's transaction if it has
// one. raw is the document's encoding when known.
func (e *engine) writeInsert(r *request, c *collection, doc bson.D, raw bson.Raw) error {
	if r != nil && r.txn != nil {
		return r.txn.insert(c, doc, raw)
	}
	for r != nil {
		t := c.pending[keyOf(doc[0].Value)]
		if t == nil || t.state != txnActive {
			break
		}
		if err := e.waitTxn(r, t); err != nil {
			return err
		}
	}
	if err := e.transactionalWriteFailPoint(r); err != nil {
		return err
	}
	return e.insertDoc(c, doc, raw)
}

// writeUpdate replaces a document read by the command with doc, logged as
// op (opUpdate with desc, or opReplace).
func (e *engine) writeUpdate(r *request, c *collection, ref docRef, doc bson.D, op string, desc *mql.UpdateDescription) error {
	if r != nil && r.txn != nil {
		return r.txn.update(c, ref, doc, op, desc)
	}
	rec := ref.rec
	if err := c.checkUnique(doc, rec.doc); err != nil {
		return err
	}
	if err := e.transactionalWriteFailPoint(r); err != nil {
		return err
	}
	e.noteVersion(c, rec)
	if err := c.replace(rec, doc, nil); err != nil {
		return err
	}
	rec.seq = e.oplog.nextSeq
	ent := &oplogEntry{op: op, db: c.db, coll: c.name, docKey: c.documentKey(doc), doc: doc, docRaw: rec.raw, upd: desc}
	if op == opReplace {
		ent.upd = nil
	}
	if c.preAndPostImages {
		ent.preImage, ent.preImageRecorded = ref.doc, true
	}
	u := c.uuid
	ent.uuid = &u
	e.appendOplog(ent)
	return nil
}

// writeDelete deletes a document read by the command.
func (e *engine) writeDelete(r *request, c *collection, ref docRef) error {
	if r != nil && r.txn != nil {
		return r.txn.delete(c, ref)
	}
	if err := e.transactionalWriteFailPoint(r); err != nil {
		return err
	}
	e.deleteRecord(c, ref.rec)
	return nil
}
