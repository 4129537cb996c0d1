package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func cmdCount(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	q := lookupD(r.cmd, "query")
	f, err := compileFilter(q)
	if err != nil {
		return nil, err
	}
	qd, _ := q.(bson.D)
	vars, err := withCollation(e.vars(), lookupD(r.cmd, "collation"))
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if err := checkHint(c, lookupD(r.cmd, "hint")); err != nil {
		return nil, err
	}
	var n int
	if len(qd) == 0 && lookupD(r.cmd, "hint") == nil && r.txn == nil && c != nil && !c.isView {
		// A count without a query reads the collection's record count
		// (mongod's COUNT stage over numRecords): it examines nothing.
		// estimatedDocumentCount is this count.
		n = c.live
	} else {
		refs, err := e.scanDocs(r, c, f, qd, vars, 0)
		if err != nil {
			return nil, err
		}
		n = len(refs)
	}
	skip, _ := asInt64(lookupD(r.cmd, "skip"))
	limit, _ := asInt64(lookupD(r.cmd, "limit"))
	n = max(n-int(skip), 0)
	if limit < 0 {
		limit = -limit
	}
	if limit > 0 && int(limit) < n {
		n = int(limit)
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

func cmdDistinct(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	key, ok := lookupD(r.cmd, "key").(string)
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "BSON field 'distinct.key' is missing but a required field")
	}
	q := lookupD(r.cmd, "query")
	f, err := compileFilter(q)
	if err != nil {
		return nil, err
	}
	qd, _ := q.(bson.D)
	vars, err := withCollation(e.vars(), lookupD(r.cmd, "collation"))
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if err := checkHint(c, lookupD(r.cmd, "hint")); err != nil {
		return nil, err
	}
	refs, err := e.scanDocs(r, c, f, qd, vars, 0)
	if err != nil {
		return nil, err
	}
	values := bson.A{}
	seen := map[string]bool{}
	add := func(v any) {
		if vars.Collation != nil {
			// Values equal under the collation are one value; the
			// first one met is returned.
			for _, x := range values {
				if mql.CompareCollated(x, v, vars.Collation) == 0 {
					return
				}
			}
			values = append(values, v)
			return
		}
		k := keyOf(v)
		if !seen[k] {
			seen[k] = true
			values = append(values, v)
		}
	}
	for _, rec := range refs {
		v, ok := mql.Lookup(rec.doc, key)
		if !ok {
			continue
		}
		if arr, isArr := v.(bson.A); isArr {
			for _, el := range arr {
				add(el)
			}
			continue
		}
		add(v)
	}
	return bson.D{{Key: "values", Value: values}}, nil
}
