package mongotest

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

func cmdCreate(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	if err := validCollName(db, name); err != nil {
		return nil, err
	}
	var opts bson.D
	for _, el := range r.cmd[1:] {
		if isGenericArg(el.Key) {
			continue
		}
		if el.Key == "changeStreamPreAndPostImages" && !e.cfg.release.hasImages() {
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field 'create.%s' is an unknown field.", el.Key) // new in 6.0
		}
		switch el.Key {
		case "capped", "size", "max", "viewOn", "pipeline", "collation", "validator", "validationLevel",
			"validationAction", "changeStreamPreAndPostImages", "timeseries", "expireAfterSeconds",
			"clusteredIndex", "storageEngine", "indexOptionDefaults", "idIndex", "autoIndexId", "encryptedFields":
			opts = append(opts, el)
		default:
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field 'create.%s' is an unknown field.", el.Key)
		}
	}
	if err := refuseCollation(lookupD(opts, "collation"), "a collection or view default collation"); err != nil {
		return nil, err
	}
	if _, err := parseValidation(opts); err != nil {
		return nil, err
	}
	if existing := e.coll(db, name); existing != nil {
		if mql.Equal(existing.options, opts) || (len(existing.options) == 0 && len(opts) == 0) {
			return bson.D{}, nil
		}
		return nil, errorf(mongoerr.CodeNamespaceExists, "Collection %s.%s already exists.", db, name)
	}
	if v, ok := lookupTop(opts, "viewOn"); ok {
		if _, isStr := v.(string); !isStr {
			return nil, errorf(mongoerr.CodeTypeMismatch, "'viewOn' option must be a string")
		}
		if p, ok := lookupTop(opts, "pipeline"); ok {
			if _, isArr := p.(bson.A); !isArr {
				return nil, errorf(mongoerr.CodeTypeMismatch, "'pipeline' option must be an array")
			}
		}
		// A view is recorded in system.views; change streams see it as an
		// insert there plus a create event with nsType "view".
	}
	e.createColl(db, name, opts)
	return bson.D{}, nil
}

// dropColl removes a collection and logs the drop. Callers hold e.mu.
func (e *engine) dropColl(c *collection) {
	delete(e.dbs[c.db].colls, c.name)
	u := c.uuid
	e.appendOplog(&oplogEntry{op: opDrop, db: c.db, coll: c.name, uuid: &u})
}

func cmdDrop(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if c == nil {
		// MongoDB 7.0+ reports success for a collection that does not exist.
		return bson.D{}, nil
	}
	n := c.live
	e.dropColl(c)
	return bson.D{{Key: "nIndexesWas", Value: int32(len(c.indexes))}, {Key: "ns", Value: c.ns()}, {Key: "n", Value: int32(n)}}, nil
}

func cmdDropDatabase(e *engine, r *request) (bson.D, error) {
	d := e.dbs[r.db]
	if d == nil {
		return bson.D{}, nil
	}
	names := make([]string, 0, len(d.colls))
	for n := range d.colls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.dropColl(d.colls[n])
	}
	delete(e.dbs, r.db)
	e.appendOplog(&oplogEntry{op: opDropDatabase, db: r.db})
	return bson.D{{Key: "dropped", Value: r.db}}, nil
}

func splitNS(ns string) (string, string, bool) {
	i := strings.IndexByte(ns, '.')
	if i <= 0 || i == len(ns)-1 {
		return "", "", false
	}
	return ns[:i], ns[i+1:], true
}

func cmdRenameCollection(e *engine, r *request) (bson.D, error) {
	from, _ := r.cmd[0].Value.(string)
	to, _ := lookupD(r.cmd, "to").(string)
	fdb, fcoll, ok1 := splitNS(from)
	tdb, tcoll, ok2 := splitNS(to)
	if !ok1 {
		return nil, errorf(mongoerr.CodeInvalidNamespace, "Invalid source namespace: %s", from)
	}
	if !ok2 {
		return nil, errorf(mongoerr.CodeInvalidNamespace, "Invalid target namespace: %s", to)
	}
	if err := validCollName(tdb, tcoll); err != nil {
		return nil, err
	}
	src := e.coll(fdb, fcoll)
	if src == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "Source collection %s does not exist", from)
	}
	if from == to {
		return nil, errorf(mongoerr.CodeIllegalOperation, "Can't rename a collection to itself")
	}
	dropTarget := boolArg(r, "dropTarget", false)
	if e.coll(tdb, tcoll) != nil && !dropTarget {
		return nil, errorf(mongoerr.CodeNamespaceExists, "target namespace exists")
	}
	e.renameColl(src, tdb, tcoll, dropTarget)
	return bson.D{}, nil
}

func cmdCollMod(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if c == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "ns does not exist: %s.%s", db, name)
	}
	before := bson.D{{Key: "collectionOptions", Value: append(bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: c.uuid[:]}}}, c.options...)}}
	var desc bson.D
	var indexOpts bson.D
	for _, el := range r.cmd[1:] {
		if isGenericArg(el.Key) {
			continue
		}
		switch el.Key {
		case "changeStreamPreAndPostImages":
			if !e.cfg.release.hasImages() {
				// New in 6.0; 5.0's collMod parser words it so.
				return nil, errorf(mongoerr.CodeInvalidOptions, "unknown option to collMod: %s", el.Key)
			}
			sub, ok := el.Value.(bson.D)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'collMod.changeStreamPreAndPostImages' is the wrong type, expected type 'object'")
			}
			c.preAndPostImages = mql.Truthy(lookupD(sub, "enabled"))
			c.options = setField(c.options, "changeStreamPreAndPostImages", sub)
		case "index":
			spec, ok := el.Value.(bson.D)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'collMod.index' is the wrong type, expected type 'object'")
			}
			ix := c.findIndex(lookupD(spec, "name"), lookupD(spec, "keyPattern"))
			if ix == nil {
				return nil, errorf(mongoerr.CodeIndexNotFound, "cannot find index %v for ns %s", spec, c.ns())
			}
			if v, ok := lookupTop(spec, "expireAfterSeconds"); ok {
				secs, ok := asInt64(v)
				if !ok || secs < 0 {
					return nil, errorf(mongoerr.CodeInvalidOptions, "expireAfterSeconds must be a non-negative number")
				}
				old := int64(-1)
				if ix.expireAfterSeconds != nil {
					old = *ix.expireAfterSeconds
				}
				ix.expireAfterSeconds = &secs
				ix.spec = setField(ix.spec, "expireAfterSeconds", secs)
				indexOpts = bson.D{{Key: "expireAfterSeconds_old", Value: old}, {Key: "expireAfterSeconds_new", Value: secs}}
			}
		case "validator", "validationLevel", "validationAction":
			opts := setField(c.options, el.Key, el.Value)
			val, err := parseValidation(opts)
			if err != nil {
				return nil, err
			}
			c.options, c.validation = opts, val
		case "expireAfterSeconds", "timeseries", "viewOn", "pipeline", "cappedSize", "cappedMax":
			c.options = setField(c.options, el.Key, el.Value)
		default:
			return nil, errorf(mongoerr.CodeInvalidOptions, "unknown option to collMod: %s", el.Key)
		}
		desc = append(desc, el)
	}
	u := c.uuid
	e.appendOplog(&oplogEntry{op: opModify, db: db, coll: name, uuid: &u, opDesc: desc, stateBefore: before})
	reply := bson.D{}
	if indexOpts != nil {
		reply = indexOpts
	}
	return reply, nil
}

func setField(d bson.D, key string, v any) bson.D {
	out := make(bson.D, 0, len(d)+1)
	found := false
	for _, el := range d {
		if el.Key == key {
			el.Value = v
			found = true
		}
		out = append(out, el)
	}
	if !found {
		out = append(out, bson.E{Key: key, Value: v})
	}
	return out
}

func cmdListCollections(e *engine, r *request) (bson.D, error) {
	var f *mql.Filter
	var err error
	if fd, ok := lookupD(r.cmd, "filter").(bson.D); ok && len(fd) > 0 {
		if f, err = mql.CompileFilter(fd); err != nil {
			return nil, err
		}
	}
	nameOnly := boolArg(r, "nameOnly", false)
	var docs []bson.D
	if d := e.dbs[r.db]; d != nil {
		names := make([]string, 0, len(d.colls))
		for n := range d.colls {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c := d.colls[n]
			typ := "collection"
			if c.isView {
				typ = "view"
			}
			doc := bson.D{{Key: "name", Value: n}, {Key: "type", Value: typ}}
			if !nameOnly {
				opts := c.options
				if opts == nil {
					opts = bson.D{}
				}
				info := bson.D{{Key: "readOnly", Value: c.isView}}
				if !c.isView {
					info = append(info, bson.E{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: c.uuid[:]}})
				}
				doc = append(doc, bson.E{Key: "options", Value: opts}, bson.E{Key: "info", Value: info})
				if !c.isView {
					doc = append(doc, bson.E{Key: "idIndex", Value: c.indexes[0].spec})
				}
			}
			if f != nil && !f.Match(doc, e.vars()) {
				continue
			}
			docs = append(docs, doc)
		}
	}
	bs, err := batchSizeArg(cursorOpts(r), -1)
	if err != nil {
		return nil, err
	}
	return e.firstBatchReply(r.db+".$cmd.listCollections", r.db, docs, bs, false), nil
}

func cursorOpts(r *request) bson.D {
	d, _ := lookupD(r.cmd, "cursor").(bson.D)
	return d
}

func cmdListDatabases(e *engine, r *request) (bson.D, error) {
	var f *mql.Filter
	var err error
	if fd, ok := lookupD(r.cmd, "filter").(bson.D); ok && len(fd) > 0 {
		if f, err = mql.CompileFilter(fd); err != nil {
			return nil, err
		}
	}
	nameOnly := boolArg(r, "nameOnly", false)
	names := make([]string, 0, len(e.dbs))
	for n, d := range e.dbs {
		if len(d.colls) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	dbs := bson.A{}
	var total int64
	for _, n := range names {
		var size int64
		for _, c := range e.dbs[n].colls {
			for _, rec := range c.all() {
				size += docSize(rec.doc)
			}
		}
		total += size
		doc := bson.D{{Key: "name", Value: n}}
		if !nameOnly {
			doc = append(doc, bson.E{Key: "sizeOnDisk", Value: size}, bson.E{Key: "empty", Value: size == 0})
		}
		if f != nil && !f.Match(doc, e.vars()) {
			continue
		}
		dbs = append(dbs, doc)
	}
	reply := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		reply = append(reply, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return reply, nil
}

func cmdDBStats(e *engine, r *request) (bson.D, error) {
	var colls, objects int64
	if d := e.dbs[r.db]; d != nil {
		for _, c := range d.colls {
			colls++
			objects += int64(c.live)
		}
	}
	return bson.D{{Key: "db", Value: r.db}, {Key: "collections", Value: colls}, {Key: "objects", Value: objects}}, nil
}

func cmdCollStats(e *engine, r *request) (bson.D, error) {
	db, name, err := nsArg(r)
	if err != nil {
		return nil, err
	}
	c := e.coll(db, name)
	if c == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "Collection [%s.%s] not found.", db, name)
	}
	return bson.D{{Key: "ns", Value: c.ns()}, {Key: "count", Value: int64(c.live)}, {Key: "nindexes", Value: int32(len(c.indexes))}}, nil
}
