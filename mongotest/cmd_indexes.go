package mongotest

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// findIndex looks an index up by name or by key pattern.
func (c *collection) findIndex(name, keyPattern any) *index {
	for _, ix := range c.indexes {
		if n, ok := name.(string); ok && ix.name == n {
			return ix
		}
		if kp, ok := keyPattern.(bson.D); ok && mql.Equal(ix.key, kp) {
			return ix
		}
	}
	return nil
}

func defaultIndexName(key bson.D) string {
	parts := make([]string, 0, len(key))
	for _, k := range key {
		parts = append(parts, fmt.Sprintf("%s_%v", k.Key, k.Value))
	}
	return strings.Join(parts, "_")
}

func cmdCreateIndexes(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	specs, err := docsArg(r, "indexes")
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, errorf(mongoerr.CodeBadValue, "Must specify at least one index to create")
	}
	created := e.coll(db, name) == nil
	c, err := e.ensureColl(db, name)
	if err != nil {
		return nil, err
	}
	before := len(c.indexes)
	var note string
	for _, v := range specs {
		spec, ok := v.(bson.D)
		if !ok {
			return nil, errorf(mongoerr.CodeTypeMismatch, "index specification must be an object")
		}
		ix, err := parseIndexSpec(spec)
		if err != nil {
			return nil, err
		}
		if existing := c.findIndex(ix.name, nil); existing != nil {
			if !mql.Equal(existing.key, ix.key) {
				return nil, errorf(mongoerr.CodeIndexKeySpecsConflict, "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %v, existing index: %v", ix.spec, existing.spec)
			}
			if existing.unique != ix.unique || !sameTTL(existing.expireAfterSeconds, ix.expireAfterSeconds) {
				return nil, errorf(mongoerr.CodeIndexOptionsConflict, "An equivalent index already exists with the same name but different options. Requested index: %v, existing index: %v", ix.spec, existing.spec)
			}
			note = "all indexes already exist"
			continue
		}
		if existing := c.findIndex(nil, ix.key); existing != nil {
			return nil, errorf(mongoerr.CodeIndexOptionsConflict, "Index already exists with a different name: %s", existing.name)
		}
		if ix.unique {
			ix.keys = make(map[string]int)
			for _, rec := range c.all() {
				if ix.skip(rec.doc) {
					continue
				}
				keys, kv := ix.indexKeys(rec.doc)
				for _, k := range dedup(keys) {
					if ix.keys[k] > 0 {
						return nil, c.dupKeyError(ix, kv)
					}
					ix.keys[k]++
				}
			}
		}
		if ix.hashed != nil {
			c.buildHashed(ix)
		}
		c.indexes = append(c.indexes, ix)
		u := c.uuid
		e.appendOplog(&oplogEntry{op: opCreateIndexes, db: db, coll: name, uuid: &u,
			opDesc: bson.D{{Key: "indexes", Value: bson.A{ix.spec}}}})
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(len(c.indexes))},
		{Key: "createdCollectionAutomatically", Value: created},
	}
	if note != "" {
		reply = append(reply, bson.E{Key: "note", Value: note})
	}
	return reply, nil
}

func sameTTL(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func parseIndexSpec(spec bson.D) (*index, error) {
	key, ok := lookupD(spec, "key").(bson.D)
	if !ok || len(key) == 0 {
		return nil, errorf(mongoerr.CodeFailedToParse, "The 'key' field must be a non-empty object")
	}
	for _, k := range key {
		switch v := k.Value.(type) {
		case int32, int64, float64:
			if f, _ := asFloat(v); f == 0 {
				return nil, errorf(mongoerr.CodeBadValue, "Values in the index key pattern can't be 0: %s", k.Key)
			}
		case string:
			switch v {
			case "hashed", "text", "2dsphere", "2d", "wildcard":
			default:
				return nil, errorf(mongoerr.CodeBadValue, "Unknown index plugin '%s'", v)
			}
		default:
			return nil, errorf(mongoerr.CodeBadValue, "Values in index key pattern must be numbers or strings")
		}
	}
	ix := &index{key: key}
	if isHashedID(key) {
		ix.hashed = newOrdered(cmpHashEntry)
	}
	ix.name, _ = lookupD(spec, "name").(string)
	if ix.name == "" {
		ix.name = defaultIndexName(key)
	}
	out := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: key}, {Key: "name", Value: ix.name}}
	for _, el := range spec {
		switch el.Key {
		case "key", "name", "v", "ns":
		case "unique":
			ix.unique = mql.Truthy(el.Value)
			if ix.unique {
				out = append(out, bson.E{Key: "unique", Value: true})
			}
		case "sparse":
			ix.sparse = mql.Truthy(el.Value)
			out = append(out, el)
		case "expireAfterSeconds":
			secs, ok := asInt64(el.Value)
			if !ok || secs < 0 {
				return nil, errorf(mongoerr.CodeInvalidIndexSpecificationOption, "TTL index 'expireAfterSeconds' option must be numeric and non-negative, but received: %v", el.Value)
			}
			if len(key) != 1 {
				return nil, errorf(mongoerr.CodeInvalidIndexSpecificationOption, "TTL indexes are single-field indexes, compound indexes do not support TTL")
			}
			if key[0].Key == "_id" {
				return nil, errorf(mongoerr.CodeInvalidIndexSpecificationOption, "The field 'expireAfterSeconds' is not valid for an _id index specification")
			}
			ix.expireAfterSeconds = &secs
			out = append(out, bson.E{Key: "expireAfterSeconds", Value: int32(secs)})
		case "collation":
			if err := refuseCollation(el.Value, "an index collation"); err != nil {
				return nil, err
			}
			out = append(out, el)
		case "partialFilterExpression", "hidden", "background", "weights", "default_language",
			"language_override", "textIndexVersion", "2dsphereIndexVersion", "bits", "min", "max",
			"wildcardProjection", "storageEngine":
			out = append(out, el)
		default:
			return nil, errorf(mongoerr.CodeInvalidIndexSpecificationOption, "The field '%s' is not valid for an index specification. Specification: %v", el.Key, spec)
		}
	}
	if _, partial := lookupTop(out, "partialFilterExpression"); partial && ix.unique {
		// Uniqueness would have to skip the documents outside the filter.
		return nil, errorf(mongoerr.CodeNotImplemented, "unique indexes with a partialFilterExpression are not supported by mongotest")
	}
	ix.spec = out
	return ix, nil
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func cmdListIndexes(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if c == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "ns does not exist: %s.%s", db, name)
	}
	docs := make([]bson.D, 0, len(c.indexes))
	for _, ix := range c.indexes {
		docs = append(docs, ix.spec)
	}
	bs, err := batchSizeArg(cursorOpts(r), -1)
	if err != nil {
		return nil, err
	}
	return e.firstBatchReply(db+"."+name, db, docs, bs, false), nil
}

func cmdDropIndexes(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if c == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "ns not found %s.%s", db, name)
	}
	before := len(c.indexes)
	var targets []*index
	switch v := lookupD(r.cmd, "index").(type) {
	case string:
		if v == "*" {
			targets = append(targets, c.indexes[1:]...)
			break
		}
		ix := c.findIndex(v, nil)
		if ix == nil {
			return nil, errorf(mongoerr.CodeIndexNotFound, "index not found with name [%s]", v)
		}
		targets = append(targets, ix)
	case bson.D:
		ix := c.findIndex(nil, v)
		if ix == nil {
			return nil, errorf(mongoerr.CodeIndexNotFound, "can't find index with key: %v", v)
		}
		targets = append(targets, ix)
	case bson.A:
		for _, n := range v {
			ix := c.findIndex(n, nil)
			if ix == nil {
				return nil, errorf(mongoerr.CodeIndexNotFound, "index not found with name [%v]", n)
			}
			targets = append(targets, ix)
		}
	default:
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'dropIndexes.index' is the wrong type")
	}
	for _, ix := range targets {
		if ix.name == "_id_" {
			return nil, errorf(mongoerr.CodeInvalidOptions, "cannot drop _id index")
		}
	}
	for _, ix := range targets {
		kept := c.indexes[:0]
		for _, x := range c.indexes {
			if x != ix {
				kept = append(kept, x)
			}
		}
		c.indexes = kept
		u := c.uuid
		e.appendOplog(&oplogEntry{op: opDropIndexes, db: db, coll: name, uuid: &u,
			opDesc: bson.D{{Key: "indexes", Value: bson.A{ix.spec}}}})
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(before)}}, nil
}
