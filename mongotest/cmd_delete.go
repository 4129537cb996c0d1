package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// deleteRecord removes a record and logs the delete.
func (e *engine) deleteRecord(c *collection, rec *record) {
	e.noteVersion(c, rec)
	c.remove(rec, e.keepHistory())
	rec.seq = e.oplog.nextSeq
	u := c.uuid
	ent := &oplogEntry{op: opDelete, db: c.db, coll: c.name, uuid: &u, docKey: c.documentKey(rec.doc)}
	if c.preAndPostImages {
		ent.preImage = rec.doc
		ent.preImageRecorded = true
	}
	e.appendOplog(ent)
}

// deleteStmt is one delete statement: the delete command's {q, limit,
// collation, hint} or a bulkWrite delete operation's.
type deleteStmt struct {
	q, collation, hint any
	limit              int64
}

// applyDelete runs one delete statement and returns how many documents it
// deleted; a failure may come after some deletions (multi).
func (e *engine) applyDelete(r *request, db, name string, vars *mql.Vars, st deleteStmt) (int, error) {
	if st.limit != 0 && st.limit != 1 {
		return 0, errorf(mongoerr.CodeFailedToParse, "The limit field in delete objects must be 0 or 1. Got %d", st.limit)
	}
	f, err := compileFilter(st.q)
	if err != nil {
		return 0, err
	}
	if vars, err = withCollation(vars, st.collation); err != nil {
		return 0, err
	}
	c := e.coll(db, name)
	if c == nil {
		return 0, nil
	}
	if c.isView {
		return 0, viewWriteError(c)
	}
	if err := checkHint(c, st.hint); err != nil {
		return 0, err
	}
	qd, _ := st.q.(bson.D)
	refs, err := e.scanDocs(r, c, f, qd, vars, int(st.limit))
	if err != nil {
		return 0, err
	}
	for r.txn == nil {
		t := blockingTxn(refs)
		if t == nil {
			break
		}
		if err := e.waitTxn(r, t); err != nil {
			return 0, err
		}
		if c = e.coll(db, name); c == nil {
			return 0, nil
		}
		if refs, err = e.scanDocs(r, c, f, qd, vars, int(st.limit)); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, ref := range refs {
		if err := e.writeDelete(r, c, ref); err != nil {
			return n, err
		}
		n++
		e.metrics.deleted++
	}
	return n, nil
}

func cmdDelete(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	stmts, err := docsArg(r, "deletes")
	if err != nil {
		return nil, err
	}
	ordered := boolArg(r, "ordered", true)
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	n := 0
	var writeErrors bson.A
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "delete statement must be an object")
		}
		limit, _ := asInt64(lookupD(st, "limit"))
		k, err := e.applyDelete(r, db, name, vars, deleteStmt{q: lookupD(st, "q"), collation: lookupD(st, "collation"),
			hint: lookupD(st, "hint"), limit: limit})
		n += k
		if err != nil {
			if txnFatal(r, err) {
				return nil, err
			}
			writeErrors = append(writeErrors, writeError(i, err))
			if ordered {
				break
			}
		}
	}
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(writeErrors) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return reply, nil
}
