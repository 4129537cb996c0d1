package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// nsArg returns the database and the collection named by the command's
// first field.
func nsArg(r *request) (string, string, error) {
	name, ok := r.cmd[0].Value.(string)
	if !ok || name == "" {
		return "", "", errorf(mongoerr.CodeInvalidNamespace, "collection name has invalid type %s", typeName(r.cmd[0].Value))
	}
	return r.db, name, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case int32:
		return "int"
	case int64:
		return "long"
	case float64:
		return "double"
	case bool:
		return "bool"
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	case bson.ObjectID:
		return "objectId"
	case bson.DateTime:
		return "date"
	case bson.Timestamp:
		return "timestamp"
	case bson.Binary:
		return "binData"
	}
	return "unknown"
}

func boolArg(r *request, key string, def bool) bool {
	v, ok := r.arg(key)
	if !ok {
		return def
	}
	return mql.Truthy(v)
}

func docsArg(r *request, key string) (bson.A, error) {
	v, ok := r.arg(key)
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "BSON field '%s.%s' is missing but a required field", r.name, key)
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", r.name, key, typeName(v))
	}
	return a, nil
}

// prepareInsert checks a document for insertion and puts _id first,
// generating an ObjectId when there is none.
func prepareInsert(v any) (bson.D, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "document to insert must be an object, got %s", typeName(v))
	}
	id, has := lookupTop(d, "_id")
	if has {
		if err := idFieldNames(id); err != nil {
			return nil, err
		}
		switch id.(type) {
		case bson.A:
			return nil, errorf(mongoerr.CodeBadValue, "The '_id' value cannot be of type array")
		case bson.Regex:
			return nil, errorf(mongoerr.CodeBadValue, "can't use a regex for _id")
		}
		if d[0].Key == "_id" {
			return d, nil
		}
		out := make(bson.D, 0, len(d))
		out = append(out, bson.E{Key: "_id", Value: id})
		for _, e := range d {
			if e.Key != "_id" {
				out = append(out, e)
			}
		}
		return out, nil
	}
	out := make(bson.D, 0, len(d)+1)
	out = append(out, bson.E{Key: "_id", Value: bson.NewObjectID()})
	return append(out, d...), nil
}

// txnFatal reports whether a write error must fail the whole command: in a
// transaction, a write conflict is a command error, as on a real server.
func txnFatal(r *request, err error) bool {
	return r.txn != nil && asCmdError(err).Code == mongoerr.CodeWriteConflict
}

func writeError(i int, err error) bson.D {
	ce := asCmdError(err)
	we := bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: ce.Code}, {Key: "errmsg", Value: ce.Msg}}
	return append(we, ce.Extra...)
}

func cmdInsert(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	docs, err := docsArg(r, "documents")
	if err != nil {
		return nil, err
	}
	ordered := boolArg(r, "ordered", true)
	c, err := e.ensureColl(db, name)
	if err != nil {
		return nil, err
	}
	raws := r.rawSequence("documents")
	if len(raws) != len(docs) {
		raws = nil
	}
	n := 0
	var writeErrors bson.A
	for i, v := range docs {
		doc, err := prepareInsert(v)
		if err == nil {
			var raw bson.Raw
			// The document as the client encoded it can be reused when
			// it went in unchanged (it already had _id first).
			if in, ok := v.(bson.D); ok && raws != nil && sameDoc(in, doc) {
				raw = raws[i]
			}
			if err = e.validate(r, c, nil, doc); err == nil {
				err = e.writeInsert(r, c, doc, raw)
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
			continue
		}
		n++
		e.metrics.inserted++
	}
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(writeErrors) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return reply, nil
}

// insertDoc stores a document and logs it. raw is the document's encoding
// when the caller has it (nil otherwise).
func (e *engine) insertDoc(c *collection, doc bson.D, raw bson.Raw) error {
	if err := c.insert(doc, raw); err != nil {
		return err
	}
	rec := c.byID[keyOf(doc[0].Value)]
	rec.seq = e.oplog.nextSeq
	u := c.uuid
	e.appendOplog(&oplogEntry{op: opInsert, db: c.db, coll: c.name, uuid: &u,
		docKey: c.documentKey(doc), doc: doc, docRaw: rec.raw})
	return nil
}
