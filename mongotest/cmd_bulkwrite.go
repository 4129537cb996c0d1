package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// cmdBulkWrite is MongoDB 8.0's client-level bulkWrite command (run on the
// admin database): ops (insert, update and delete operations, each naming
// an entry of nsInfo), ordered (default true: stop at the first error),
// errorsOnly (the results cursor then holds only the errors), let
// (variables for every operation), bypassDocumentValidation and a cursor
// option with batchSize. The reply has the summary counts (nInserted,
// nUpserted, nMatched, nModified, nDeleted, nErrors) and a cursor over
// one result per operation: {ok: 1, idx, n, nModified?, upserted?} or
// {ok: 0, idx, code, codeName, errmsg, ...}. A write concern error
// (failCommand's writeConcernError) is added to the reply as for any write
// command.
//
// Inside a transaction the first failed operation is reported in the
// cursor and aborts the transaction, as a write error does for the other
// write commands (a write conflict fails the whole command).
func cmdBulkWrite(e *engine, r *request) (bson.D, error) {
	if n, ok := asInt64(r.cmd[0].Value); !ok || n != 1 {
		return nil, errorf(mongoerr.CodeFailedToParse, "BSON field 'bulkWrite.bulkWrite' must be 1")
	}
	ops, err := docsArg(r, "ops")
	if err != nil {
		return nil, err
	}
	nsInfo, err := docsArg(r, "nsInfo")
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, errorf(mongoerr.CodeInvalidOptions, "May not specify both an empty ops array")
	}
	type ns struct{ db, coll string }
	namespaces := make([]ns, len(nsInfo))
	for i, v := range nsInfo {
		d, ok := v.(bson.D)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'bulkWrite.nsInfo' must be an array of objects")
		}
		s, ok := lookupD(d, "ns").(string)
		db, coll, valid := splitNS(s)
		if !ok || !valid {
			return nil, errorf(mongoerr.CodeInvalidNamespace, "Invalid namespace specified '%s'", s)
		}
		namespaces[i] = ns{db, coll}
	}
	ordered := boolArg(r, "ordered", true)
	errorsOnly := boolArg(r, "errorsOnly", false)
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	var nInserted, nUpserted, nMatched, nModified, nDeleted, nErrors int32
	results := make([]bson.D, 0, len(ops))
	for i, v := range ops {
		op, ok := v.(bson.D)
		if !ok || len(op) == 0 {
			return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'bulkWrite.ops' must be an array of objects")
		}
		kind := op[0].Key
		idx, ok := asInt64(op[0].Value)
		if !ok || idx < 0 || int(idx) >= len(namespaces) {
			return nil, errorf(mongoerr.CodeBadValue, "BulkWrite ops entry %d has an invalid nsInfo index %v", i, op[0].Value)
		}
		target := namespaces[idx]
		res := bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(i)}}
		var opErr error
		switch kind {
		case "insert":
			opErr = e.bulkInsert(r, target.db, target.coll, lookupD(op, "document"))
			if opErr == nil {
				nInserted++
				res = append(res, bson.E{Key: "n", Value: int32(1)})
			}
		case "update":
			spec, err := parseUpdateSpec(vars, updateStmt{q: lookupD(op, "filter"), u: lookupD(op, "updateMods"),
				upsert: mql.Truthy(lookupD(op, "upsert")), multi: mql.Truthy(lookupD(op, "multi")), sort: lookupD(op, "sort"),
				arrayFilters: lookupD(op, "arrayFilters"), collation: lookupD(op, "collation"), hint: lookupD(op, "hint"),
				consts: lookupD(op, "constants")})
			opErr = err
			if err == nil {
				var ur *updateResult
				if ur, opErr = e.applyUpdate(r, target.db, target.coll, spec); opErr == nil {
					n := ur.matched
					if ur.upserted {
						n++
						nUpserted++
					} else {
						nMatched += int32(ur.matched)
					}
					nModified += int32(ur.modified)
					res = append(res, bson.E{Key: "n", Value: int32(n)}, bson.E{Key: "nModified", Value: int32(ur.modified)})
					if ur.upserted {
						res = append(res, bson.E{Key: "upserted", Value: bson.D{{Key: "_id", Value: ur.upsertedID}}})
					}
				}
			}
		case "delete":
			limit := int64(1)
			if mql.Truthy(lookupD(op, "multi")) {
				limit = 0
			}
			var n int
			n, opErr = e.applyDelete(r, target.db, target.coll, vars, deleteStmt{q: lookupD(op, "filter"),
				collation: lookupD(op, "collation"), hint: lookupD(op, "hint"), limit: limit})
			nDeleted += int32(n)
			if opErr == nil {
				res = append(res, bson.E{Key: "n", Value: int32(n)})
			}
		default:
			return nil, errorf(mongoerr.CodeFailedToParse, "Unrecognized bulkWrite operation '%s' in ops entry %d", kind, i)
		}
		if opErr != nil {
			if txnFatal(r, opErr) {
				return nil, opErr
			}
			nErrors++
			ce := asCmdError(opErr)
			res = bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(i)}, {Key: "code", Value: ce.Code},
				{Key: "codeName", Value: mongoerr.Name(ce.Code)}, {Key: "errmsg", Value: ce.Msg}}
			res = append(res, ce.Extra...)
			if kind == "update" {
				res = append(res, bson.E{Key: "n", Value: int32(0)}, bson.E{Key: "nModified", Value: int32(0)})
			}
			results = append(results, res)
			if r.txn != nil {
				// A failed write aborts the transaction, as for the
				// other write commands.
				e.abortTxn(r.txn)
				break
			}
			if ordered {
				break
			}
			continue
		}
		if !errorsOnly {
			results = append(results, res)
		}
	}
	bs, err := batchSizeArg(cursorOpts(r), 0)
	if err != nil {
		return nil, err
	}
	if bs == 0 {
		bs = len(results) + 1
	}
	reply := e.firstBatchReply("admin.$cmd.bulkWrite", "admin", results, bs, false)
	return append(reply,
		bson.E{Key: "nErrors", Value: nErrors},
		bson.E{Key: "nInserted", Value: nInserted},
		bson.E{Key: "nMatched", Value: nMatched},
		bson.E{Key: "nModified", Value: nModified},
		bson.E{Key: "nUpserted", Value: nUpserted},
		bson.E{Key: "nDeleted", Value: nDeleted},
	), nil
}

// bulkInsert inserts one document of a bulkWrite.
func (e *engine) bulkInsert(r *request, db, name string, v any) error {
	if v == nil {
		return errorf(mongoerr.CodeFailedToParse, "BSON field 'bulkWrite.ops.document' is missing but a required field")
	}
	doc, err := prepareInsert(v)
	if err != nil {
		return err
	}
	c, err := e.ensureColl(db, name)
	if err != nil {
		return err
	}
	if err := e.validate(r, c, nil, doc); err != nil {
		return err
	}
	if err := e.writeInsert(r, c, doc, nil); err != nil {
		return err
	}
	e.metrics.inserted++
	return nil
}
