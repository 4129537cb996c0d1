package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func cmdAggregate(e *engine, r *request) (bson.D, error) {
	pv, ok := r.arg("pipeline")
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "BSON field 'aggregate.pipeline' is missing but a required field")
	}
	pipeline, ok := pv.(bson.A)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'", typeName(pv))
	}
	if _, ok := r.arg("cursor"); !ok {
		if _, explain := r.arg("explain"); !explain {
			return nil, errorf(mongoerr.CodeFailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
		}
	}
	if boolArg(r, "explain", false) {
		return nil, errorf(mongoerr.CodeCommandNotFound, "mongotest does not support explain")
	}
	if len(pipeline) > 0 {
		if st, ok := pipeline[0].(bson.D); ok && len(st) > 0 && st[0].Key == "$changeStream" {
			if r.txnNumber != nil && r.autocommit != nil {
				return nil, errorf(mongoerr.CodeOperationNotSupportedInTransaction, "Operation not permitted in transaction :: caused by :: $changeStream stage is not allowed in a transaction")
			}
			return e.openChangeStream(r, pipeline)
		}
	}
	for _, st := range pipeline {
		if sd, ok := st.(bson.D); ok && len(sd) > 0 && sd[0].Key == "$changeStream" {
			return nil, errorf(mongoerr.CodeChangeStreamNotFirstStage, "$changeStream is only valid as the first stage in a pipeline")
		}
	}
	vars, err := e.cmdVars(r)
	if err != nil {
		return nil, err
	}
	if vars, err = withCollation(vars, lookupD(r.cmd, "collation")); err != nil {
		return nil, err
	}
	// A final $out or $merge writes the results instead of returning them.
	var out *outputStage
	for i, st := range pipeline {
		sd, _ := st.(bson.D)
		if len(sd) == 0 || sd[0].Key != "$out" && sd[0].Key != "$merge" {
			continue
		}
		if i != len(pipeline)-1 {
			return nil, errorf(40601, "%s can only be the final stage in the pipeline", sd[0].Key)
		}
		if out, err = parseOutputStage(r.db, sd[0].Key, sd[0].Value); err != nil {
			return nil, err
		}
		if rc, ok := lookupD(r.cmd, "readConcern").(bson.D); ok && lookupD(rc, "level") == "linearizable" {
			return nil, errorf(mongoerr.CodeInvalidOptions, "{aggregate: ...} cannot run with readConcern level 'linearizable' while the pipeline has a %s stage", sd[0].Key)
		}
		pipeline = pipeline[:i]
	}
	var docs []bson.D
	var ns string
	switch target := r.cmd[0].Value.(type) {
	case string:
		ns = r.db + "." + target
		c := e.coll(r.db, target)
		if err := checkHint(c, lookupD(r.cmd, "hint")); err != nil {
			return nil, err
		}
		f, fd := leadingIDMatch(pipeline)
		refs, err := e.scanDocs(r, c, f, fd, vars, 0)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			docs = append(docs, ref.doc)
		}
	default:
		if n, ok := asInt64(target); !ok || n != 1 {
			return nil, errorf(mongoerr.CodeFailedToParse, "Invalid aggregate namespace")
		}
		ns = r.db + ".$cmd.aggregate"
		// Collection-less aggregates start from $documents or
		// $listLocalSessions.
		if len(pipeline) == 0 {
			break
		}
		first, _ := pipeline[0].(bson.D)
		switch {
		case len(first) > 0 && first[0].Key == "$documents":
			arr, ok := first[0].Value.(bson.A)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "$documents must be an array of objects")
			}
			for _, v := range arr {
				d, ok := v.(bson.D)
				if !ok {
					return nil, errorf(mongoerr.CodeTypeMismatch, "$documents must be an array of objects")
				}
				docs = append(docs, d)
			}
		case len(first) > 0 && first[0].Key == "$listLocalSessions":
			if docs, err = e.listLocalSessions(r, first[0].Value); err != nil {
				return nil, err
			}
		default:
			return nil, errorf(mongoerr.CodeInvalidNamespace, "{aggregate: 1} is not valid for '%s'; a collection is required.", first)
		}
		pipeline = pipeline[1:]
	}
	p, err := mql.CompilePipeline(pipeline)
	if err != nil {
		return nil, err
	}
	res, err := p.Run(docs, vars)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if r.txn != nil {
			return nil, errorf(mongoerr.CodeOperationNotSupportedInTransaction, "Operation not permitted in transaction :: caused by :: %s cannot be used in a transaction", out.stage)
		}
		if err := e.writeOutput(r, out, res, vars); err != nil {
			return nil, err
		}
		return cursorReply(true, 0, ns, bson.A{}), nil
	}
	bs, err := batchSizeArg(cursorOpts(r), 101)
	if err != nil {
		return nil, err
	}
	return e.queryReply(ns, r.db, res, nil, bs, false), nil
}

// leadingIDMatch returns the filter of a leading $match that pins _id
// (idKeys), so that the documents the pipeline starts from are looked up
// rather than scanned; the $match stage still runs on them. Any other
// pipeline starts from every document.
func leadingIDMatch(pipeline bson.A) (*mql.Filter, bson.D) {
	if len(pipeline) > 0 {
		if st, ok := pipeline[0].(bson.D); ok && len(st) == 1 && st[0].Key == "$match" {
			if m, ok := st[0].Value.(bson.D); ok {
				if _, pins := idKeys(m); pins {
					if f, err := mql.CompileFilter(m); err == nil && !f.HasExpr() {
						return f, m
					}
				}
			}
		}
	}
	all, _ := mql.CompileFilter(bson.D{})
	return all, nil
}
