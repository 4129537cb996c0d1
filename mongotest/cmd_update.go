package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func (e *engine) vars() *mql.Vars {
	return &mql.Vars{Now: bson.NewDateTimeFromTime(e.nowLocked()), ClusterTime: e.lastTS}
}

// compileFilter compiles a query filter; a missing filter matches everything.
func compileFilter(v any) (*mql.Filter, error) {
	switch f := v.(type) {
	case nil:
		return mql.CompileFilter(bson.D{})
	case bson.D:
		return mql.CompileFilter(f)
	}
	return nil, errorf(mongoerr.CodeTypeMismatch, "filter must be an object, got %s", typeName(v))
}

// matching returns the records matching f in natural order, at most limit
// (0 = all). A filter that pins _id (idKeys) is answered from the _id map;
// filter is nil when it must not be (see scanDocs). ex counts what the read
// examined: every live document a scan passes, a key and a document for
// each one the _id map finds.
func (c *collection) matching(f *mql.Filter, filter bson.D, vars *mql.Vars, limit int, ex *examined) []*record {
	if c == nil {
		return nil
	}
	recs := c.records
	if keys, ok := idKeys(filter); ok {
		if found, ok := c.idLookup(keys); ok {
			recs = found
			ex.keys += int64(len(found))
		}
	}
	var out []*record
	for _, rec := range recs {
		if rec == nil || rec.deleted {
			continue
		}
		ex.docs++
		if f.Match(rec.doc, vars) {
			out = append(out, rec)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
	}
	return out
}

// updateResult is what one update statement did.
type updateResult struct {
	matched, modified int
	upsertedID        any
	upserted          bool
	before, after     bson.D // of the last document touched
}

// updateSpec is one parsed update statement.
type updateSpec struct {
	filter bson.D
	f      *mql.Filter
	u      *mql.Update
	upsert bool
	multi  bool
	sort   *mql.Sort
	// vars are the command's variables (let), the statement's constants
	// and its collation.
	vars *mql.Vars
	hint any
}

// updateStmt is one update statement as the update command (q, u, c, ...)
// or a bulkWrite operation (filter, updateMods, constants, ...) gives it.
type updateStmt struct {
	q, u                                        any
	upsert, multi                               bool
	sort, arrayFilters, collation, hint, consts any
}

// updateStmtOf reads an update command statement.
func updateStmtOf(st bson.D) updateStmt {
	return updateStmt{q: lookupD(st, "q"), u: lookupD(st, "u"), upsert: mql.Truthy(lookupD(st, "upsert")),
		multi: mql.Truthy(lookupD(st, "multi")), sort: lookupD(st, "sort"), arrayFilters: lookupD(st, "arrayFilters"),
		collation: lookupD(st, "collation"), hint: lookupD(st, "hint"), consts: lookupD(st, "c")}
}

func parseUpdateSpec(vars *mql.Vars, st updateStmt) (*updateSpec, error) {
	f, err := compileFilter(st.q)
	if err != nil {
		return nil, err
	}
	fd, _ := st.q.(bson.D)
	if st.u == nil {
		return nil, errorf(mongoerr.CodeFailedToParse, "BSON field 'update.updates.u' is missing but a required field")
	}
	var opts mql.UpdateOptions
	if st.arrayFilters != nil {
		af, ok := st.arrayFilters.(bson.A)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'arrayFilters' is the wrong type '%s', expected type 'array'", typeName(st.arrayFilters))
		}
		opts.ArrayFilters = af
	}
	cu, err := mql.CompileUpdateWithOptions(st.u, opts)
	if err != nil {
		return nil, err
	}
	if st.multi && cu.Kind() == mql.UpdateReplacement {
		return nil, errorf(mongoerr.CodeFailedToParse, "multi update is not supported for replacement-style update")
	}
	if st.consts != nil {
		if cu.Kind() != mql.UpdatePipeline {
			return nil, errorf(mongoerr.CodeFailedToParse, "Constants can only be specified with pipeline updates")
		}
		cp := *vars
		if err := addLet(&cp, st.consts, "c"); err != nil {
			return nil, err
		}
		vars = &cp
	}
	if vars, err = withCollation(vars, st.collation); err != nil {
		return nil, err
	}
	spec := &updateSpec{filter: fd, f: f, u: cu, upsert: st.upsert, multi: st.multi, vars: vars, hint: st.hint}
	if sd, ok := st.sort.(bson.D); ok && len(sd) > 0 {
		if spec.sort, err = mql.CompileSort(sd); err != nil {
			return nil, err
		}
		spec.sort = spec.sort.WithCollation(vars.Collation)
	}
	return spec, nil
}

// applyUpdate runs one update statement against a collection (nil when it
// does not exist yet), logging each change.
func (e *engine) applyUpdate(r *request, db, name string, spec *updateSpec) (*updateResult, error) {
	c := e.coll(db, name)
	if c != nil && c.isView {
		return nil, viewWriteError(c)
	}
	if err := checkHint(c, spec.hint); err != nil {
		return nil, err
	}
	vars := spec.vars
	limit := 1
	if spec.multi || spec.sort != nil {
		limit = 0
	}
	refs, err := e.scanDocs(r, c, spec.f, spec.filter, vars, limit)
	if err != nil {
		return nil, err
	}
	for r.txn == nil {
		t := blockingTxn(refs)
		if t == nil {
			break
		}
		if err := e.waitTxn(r, t); err != nil {
			return nil, err
		}
		c = e.coll(db, name)
		if refs, err = e.scanDocs(r, c, spec.f, spec.filter, vars, limit); err != nil {
			return nil, err
		}
	}
	if spec.sort != nil && len(refs) > 1 {
		sortRefs(refs, spec.sort)
		if !spec.multi {
			refs = refs[:1]
		}
	}
	res := &updateResult{}
	for _, ref := range refs {
		res.matched++
		e.metrics.updated++
		old := ref.doc
		doc, desc, err := spec.u.ApplyForQuery(old, vars, false, spec.filter)
		if err != nil {
			return res, err
		}
		if err := checkIDUnchanged(old, doc); err != nil {
			return res, err
		}
		res.before, res.after = old, doc
		if desc == nil {
			if mql.Equal(old, doc) {
				continue
			}
		} else if desc.Empty() {
			continue
		}
		op := opUpdate
		if spec.u.Kind() == mql.UpdateReplacement || desc != nil && desc.Replacement {
			op = opReplace
		}
		if err := e.validate(r, c, old, doc); err != nil {
			return res, err
		}
		if err := e.writeUpdate(r, c, ref, doc, op, desc); err != nil {
			return res, err
		}
		res.modified++
	}
	if res.matched > 0 || !spec.upsert {
		return res, nil
	}
	// Upsert: build the new document from the filter's equality fields.
	seed, err := mql.UpsertSeed(spec.filter)
	if err != nil {
		return res, err
	}
	var doc bson.D
	if spec.u.Kind() == mql.UpdateReplacement {
		doc, _, err = spec.u.Apply(bson.D{}, vars, true)
		if err == nil {
			if _, has := lookupTop(doc, "_id"); !has {
				if id, ok := lookupTop(seed, "_id"); ok {
					doc = append(bson.D{{Key: "_id", Value: id}}, doc...)
				}
			}
		}
	} else {
		doc, _, err = spec.u.Apply(seed, vars, true)
	}
	if err != nil {
		return res, err
	}
	doc, err = prepareInsert(doc)
	if err != nil {
		return res, err
	}
	if c == nil {
		if c, err = e.ensureColl(db, name); err != nil {
			return res, err
		}
	}
	if err := e.validate(r, c, nil, doc); err != nil {
		return res, err
	}
	if err := e.writeInsert(r, c, doc, nil); err != nil {
		return res, err
	}
	res.upserted = true
	res.upsertedID = doc[0].Value
	res.after = doc
	return res, nil
}

func checkIDUnchanged(old, doc bson.D) error {
	a, _ := lookupTop(old, "_id")
	b, ok := lookupTop(doc, "_id")
	if !ok || !mql.Equal(a, b) || typeName(a) != typeName(b) {
		return &cmdError{Code: mongoerr.CodeImmutableField, Msg: "Performing an update on the path '_id' would modify the immutable field '_id'"}
	}
	return nil
}

func cmdUpdate(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	stmts, err := docsArg(r, "updates")
	if err != nil {
		return nil, err
	}
	ordered := boolArg(r, "ordered", true)
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	n, nModified := 0, 0
	var upserted, writeErrors bson.A
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "update statement must be an object")
		}
		spec, err := parseUpdateSpec(vars, updateStmtOf(st))
		var res *updateResult
		if err == nil {
			res, err = e.applyUpdate(r, db, name, spec)
		}
		if res != nil {
			n += res.matched
			nModified += res.modified
			if res.upserted {
				n++
				upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.upsertedID}})
			}
		}
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
	reply := bson.D{{Key: "n", Value: int32(n)}, {Key: "nModified", Value: int32(nModified)}}
	if len(upserted) > 0 {
		reply = append(reply, bson.E{Key: "upserted", Value: upserted})
	}
	if len(writeErrors) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return reply, nil
}
