package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// deleteRecord removes a record and logs the delete.
func (e *engine) deleteRecord(c *collection, rec *record) {
	e.noteVersion(rec)
	c.remove(rec, e.keepHistory())
	rec.seq = e.oplog.nextSeq
	u := c.uuid
	ent := &oplogEntry{op: opDelete, db: c.db, coll: c.name, uuid: &u, docKey: bson.D{rec.doc[0]}}
	if c.preAndPostImages {
		ent.preImage = rec.doc
		ent.preImageRecorded = true
	}
	e.appendOplog(ent)
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
	c := e.coll(db, name)
	n := 0
	var writeErrors bson.A
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "delete statement must be an object")
		}
		limit, _ := asInt64(lookupD(st, "limit"))
		if limit != 0 && limit != 1 {
			writeErrors = append(writeErrors, writeError(i, errorf(codeFailedToParse, "The limit field in delete objects must be 0 or 1. Got %d", limit)))
			if ordered {
				break
			}
			continue
		}
		q := lookupD(st, "q")
		f, err := compileFilter(q)
		if err != nil {
			writeErrors = append(writeErrors, writeError(i, err))
			if ordered {
				break
			}
			continue
		}
		if c == nil || c.isView {
			continue
		}
		qd, _ := q.(bson.D)
		refs := e.read(r, c, f, qd, e.vars(), int(limit))
		for r.txn == nil {
			t := blockingTxn(refs)
			if t == nil {
				break
			}
			if err := e.waitTxn(r, t); err != nil {
				return nil, err
			}
			if c = e.coll(db, name); c == nil {
				refs = nil
				break
			}
			refs = e.read(r, c, f, qd, e.vars(), int(limit))
		}
		for _, ref := range refs {
			if err := e.writeDelete(r, c, ref); err != nil {
				if txnFatal(r, err) {
					return nil, err
				}
				writeErrors = append(writeErrors, writeError(i, err))
				break
			}
			n++
		}
	}
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(writeErrors) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return reply, nil
}
