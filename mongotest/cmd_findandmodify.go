package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func cmdFindAndModify(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	query := lookupD(r.cmd, "query")
	remove := boolArg(r, "remove", false)
	update, hasUpdate := r.arg("update")
	returnNew := boolArg(r, "new", false)
	upsert := boolArg(r, "upsert", false)
	if remove && hasUpdate {
		return nil, errorf(mongoerr.CodeFailedToParse, "Cannot specify both an update and remove=true")
	}
	if !remove && !hasUpdate {
		return nil, errorf(mongoerr.CodeFailedToParse, "Either an update or remove=true must be specified")
	}
	if remove && (upsert || returnNew) {
		return nil, errorf(mongoerr.CodeFailedToParse, "Cannot specify both upsert=true and remove=true ")
	}
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	var proj *mql.Projection
	if pd, ok := lookupD(r.cmd, "fields").(bson.D); ok && len(pd) > 0 {
		if proj, err = mql.CompileProjection(pd); err != nil {
			return nil, err
		}
	}
	project := func(d bson.D) (any, error) {
		if d == nil {
			return nil, nil
		}
		if proj == nil {
			return d, nil
		}
		return proj.Apply(d, vars)
	}
	if remove {
		f, err := compileFilter(query)
		if err != nil {
			return nil, err
		}
		c := e.coll(db, name)
		if c != nil && c.isView {
			return nil, viewWriteError(c)
		}
		if err := checkHint(c, lookupD(r.cmd, "hint")); err != nil {
			return nil, err
		}
		if vars, err = withCollation(vars, lookupD(r.cmd, "collation")); err != nil {
			return nil, err
		}
		qd, _ := query.(bson.D)
		var refs []docRef
		if sd, ok := lookupD(r.cmd, "sort").(bson.D); ok && len(sd) > 0 {
			s, err := mql.CompileSort(sd)
			if err != nil {
				return nil, err
			}
			if refs, err = e.scanDocs(r, c, f, qd, vars, 0); err != nil {
				return nil, err
			}
			sortRefs(refs, s.WithCollation(vars.Collation))
		} else if refs, err = e.scanDocs(r, c, f, qd, vars, 1); err != nil {
			return nil, err
		}
		if t := blockingTxn(refs); t != nil && r.txn == nil {
			if err := e.waitTxn(r, t); err != nil {
				return nil, err
			}
			return cmdFindAndModify(e, r)
		}
		if len(refs) == 0 {
			return bson.D{{Key: "lastErrorObject", Value: bson.D{{Key: "n", Value: int32(0)}}}, {Key: "value", Value: nil}}, nil
		}
		doc := refs[0].doc
		if err := e.writeDelete(r, c, refs[0]); err != nil {
			return nil, err
		}
		e.metrics.deleted++
		v, err := project(doc)
		if err != nil {
			return nil, err
		}
		return bson.D{{Key: "lastErrorObject", Value: bson.D{{Key: "n", Value: int32(1)}}}, {Key: "value", Value: v}}, nil
	}
	spec, err := parseUpdateSpec(vars, updateStmt{q: query, u: update, upsert: upsert, sort: lookupD(r.cmd, "sort"),
		arrayFilters: lookupD(r.cmd, "arrayFilters"), collation: lookupD(r.cmd, "collation"), hint: lookupD(r.cmd, "hint")})
	if err != nil {
		return nil, err
	}
	res, err := e.applyUpdate(r, db, name, spec)
	if err != nil {
		return nil, err
	}
	leo := bson.D{{Key: "n", Value: int32(res.matched)}, {Key: "updatedExisting", Value: res.matched > 0}}
	if res.upserted {
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false}, {Key: "upserted", Value: res.upsertedID}}
	}
	var out bson.D
	switch {
	case returnNew:
		out = res.after
	case !res.upserted:
		out = res.before
	}
	v, err := project(out)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: v}}, nil
}
