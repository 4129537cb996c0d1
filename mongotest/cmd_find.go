package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func cmdFind(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	filter := lookupD(r.cmd, "filter")
	f, err := compileFilter(filter)
	if err != nil {
		return nil, err
	}
	fd, _ := filter.(bson.D)
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	if vars, err = withCollation(vars, lookupD(r.cmd, "collation")); err != nil {
		return nil, err
	}
	var sortSpec *mql.Sort
	sd, _ := lookupD(r.cmd, "sort").(bson.D)
	if len(sd) > 0 {
		if sortSpec, err = mql.CompileSort(sd); err != nil {
			return nil, err
		}
		sortSpec = sortSpec.WithCollation(vars.Collation)
	}
	var proj *mql.Projection
	if pd, ok := lookupD(r.cmd, "projection").(bson.D); ok && len(pd) > 0 {
		if proj, err = mql.CompileProjection(pd); err != nil {
			return nil, err
		}
	}
	skip, _ := asInt64(lookupD(r.cmd, "skip"))
	limit, _ := asInt64(lookupD(r.cmd, "limit"))
	if skip < 0 {
		return nil, errorf(mongoerr.CodeBadValue, "BSON field 'skip' value must be >= 0, actual value '%d'", skip)
	}
	single := boolArg(r, "singleBatch", false)
	if limit < 0 {
		limit, single = -limit, true
	}
	batchSize, err := batchSizeArg(r.cmd, -1)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if err := checkHint(c, lookupD(r.cmd, "hint")); err != nil {
		return nil, err
	}
	plan, err := e.planFind(r, c, fd, sd, vars)
	if err != nil {
		return nil, err
	}
	sorted := sortSpec == nil || plan != nil && plan.sorted
	scanLimit := 0
	if sorted && limit > 0 {
		scanLimit = int(skip + limit)
	}
	var recs []docRef
	if plan != nil {
		recs, err = e.scanIndex(r, c, plan, f, vars, scanLimit)
	} else {
		recs, err = e.scanDocs(r, c, f, fd, vars, scanLimit)
	}
	if err != nil {
		return nil, err
	}
	if !sorted {
		sortRefs(recs, sortSpec)
	}
	if int(skip) >= len(recs) {
		recs = nil
	} else {
		recs = recs[skip:]
	}
	if limit > 0 && int(limit) < len(recs) {
		recs = recs[:limit]
	}
	docs := make([]bson.D, 0, len(recs))
	var raws []bson.Raw // without a projection, the stored encodings
	if proj == nil {
		raws = make([]bson.Raw, 0, len(recs))
	}
	for _, rec := range recs {
		d := rec.doc
		if proj != nil {
			if d, err = proj.Apply(d, vars); err != nil {
				return nil, err
			}
		} else {
			raws = append(raws, rec.raw)
		}
		docs = append(docs, d)
	}
	// A limit within the batch size still leaves a cursor open when the
	// first batch stops at 16 MiB, as on a real server: the rest of the
	// limit comes in getMores.
	return e.queryReply(db+"."+name, db, docs, raws, batchSize, single), nil
}
