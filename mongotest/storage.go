package mongotest

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// database is a named set of collections.
type database struct {
	name  string
	colls map[string]*collection
}

// collection stores documents in insertion order, keyed by _id.
type collection struct {
	db, name         string
	uuid             [16]byte
	options          bson.D // as given to create (minus the command name)
	preAndPostImages bool
	isView           bool
	validation       *validation // nil: no validator

	records []*record // insertion order; deleted records are nil'ed lazily
	byID    map[string]*record
	// dead holds, by _id key, the deleted records still in records (the
	// versions open snapshots may read); nextOrd numbers insertions.
	dead    map[string][]*record
	nextOrd uint64
	// oddIDs counts the stored _ids that are not canonical (canonicalID):
	// while it is non-zero, no filter is answered from the _id map.
	oddIDs  int
	live    int
	indexes []*index
	// idOrder is the _id index in _id order (recordindex.go).
	idOrder *ordered[idEntry]
	// pending holds _id keys that open transactions have inserted.
	pending map[string]*txn
	// shardKey, on a shard of a sharded collection, are the shard key's
	// fields: change events' documentKey carries them (sharded.go).
	shardKey []string
}

type record struct {
	// seq is the oplog sequence number of the write that produced the
	// current state; history holds earlier states open snapshots may need.
	// (seq, doc, raw and deleted, what a read looks at, come first: one
	// or two cache lines.)
	seq int64
	doc bson.D
	// raw is doc encoded, made once when the version is written (nil
	// when it could not be): reads copy it into their replies instead of
	// encoding doc again. A stored document is never changed in place (a
	// write stores a new one), so raw stays doc's encoding.
	raw     bson.Raw
	deleted bool
	// ord is the record's place in insertion (natural) order.
	ord      uint64
	history  []version
	lockedBy *txn
}

// index is an index's definition; unique indexes also keep their keys.
type index struct {
	name               string
	key                bson.D
	unique             bool
	sparse             bool
	expireAfterSeconds *int64
	spec               bson.D         // the full spec as listIndexes shows it
	keys               map[string]int // unique: index key -> count
	// hashed holds the entries of an {_id: "hashed"} index in hashed
	// order (recordindex.go); nil for other indexes.
	hashed *ordered[hashEntry]
}

func (e *engine) db(name string, create bool) *database {
	d := e.dbs[name]
	if d == nil && create {
		d = &database{name: name, colls: make(map[string]*collection)}
		e.dbs[name] = d
	}
	return d
}

func (e *engine) coll(db, name string) *collection {
	if c := e.collInTxn(db, name); c != nil {
		return c
	}
	d := e.dbs[db]
	if d == nil {
		return nil
	}
	return d.colls[name]
}

// ensureColl returns the collection, creating it (and logging the create) on
// first write, as MongoDB does.
func (e *engine) ensureColl(db, name string) (*collection, error) {
	if c := e.coll(db, name); c != nil {
		if c.isView {
			return nil, errorf(mongoerr.CodeCommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", db, name)
		}
		return c, nil
	}
	if err := validCollName(db, name); err != nil {
		return nil, err
	}
	return e.createColl(db, name, nil), nil
}

func validCollName(db, name string) error {
	if db == "" || strings.ContainsAny(db, "/\\. \"$") {
		return errorf(mongoerr.CodeInvalidNamespace, "Invalid database name: '%s'", db)
	}
	if name == "" || strings.Contains(name, "$") || strings.HasPrefix(name, ".") {
		return errorf(mongoerr.CodeInvalidNamespace, "Invalid collection name: %s", name)
	}
	return nil
}

// createColl creates the collection with its _id index and logs the create.
func (e *engine) createColl(db, name string, options bson.D) *collection {
	d := e.db(db, true)
	c := &collection{db: db, name: name, uuid: newUUID(), options: options, byID: make(map[string]*record)}
	c.indexes = []*index{{name: "_id_", key: bson.D{{Key: "_id", Value: int32(1)}},
		spec: bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}}}
	for _, o := range options {
		switch o.Key {
		case "changeStreamPreAndPostImages":
			if sub, ok := o.Value.(bson.D); ok {
				c.preAndPostImages = mql.Truthy(lookupD(sub, "enabled"))
			}
		case "viewOn":
			c.isView = true
			c.indexes = nil
		case "validator":
			// cmdCreate has checked the options.
			c.validation, _ = parseValidation(options)
		}
	}
	d.colls[name] = c
	u := c.uuid
	desc := bson.D{}
	if c.isView {
		desc = append(desc, options...)
	} else {
		desc = append(desc, bson.E{Key: "idIndex", Value: c.indexes[0].spec})
		desc = append(desc, options...)
	}
	nsType := "collection"
	if c.isView {
		nsType = "view"
	}
	e.appendOplog(&oplogEntry{op: opCreate, db: db, coll: name, uuid: &u, opDesc: desc, nsType: nsType})
	e.noteCreated(c)
	return c
}

func (c *collection) ns() string { return c.db + "." + c.name }

// all returns the live documents in insertion order.
func (c *collection) all() []*record {
	out := make([]*record, 0, c.live)
	for _, r := range c.records {
		if r != nil && !r.deleted {
			out = append(out, r)
		}
	}
	return out
}

// encodeStored returns the encoding a record keeps of doc: raw when the
// caller has it (the document as the client sent it), else doc encoded
// now; nil when doc has no BSON form (reads then encode doc).
func encodeStored(doc bson.D, raw bson.Raw) bson.Raw {
	if raw != nil {
		return raw
	}
	b, err := bson.Marshal(doc)
	if err != nil {
		return nil
	}
	return b
}

// insert stores a new record of doc; raw is its encoding when known.
func (c *collection) insert(doc bson.D, raw bson.Raw) error {
	id, _ := lookupTop(doc, "_id")
	k := keyOf(id)
	if _, dup := c.byID[k]; dup {
		return c.dupKeyError(c.indexes[0], bson.D{{Key: "_id", Value: id}})
	}
	if err := c.checkUnique(doc, nil); err != nil {
		return err
	}
	c.nextOrd++
	r := &record{doc: doc, raw: encodeStored(doc, raw), ord: c.nextOrd}
	c.records = append(c.records, r)
	c.indexRecord(r)
	c.byID[k] = r
	c.noteID(doc)
	c.live++
	c.addIndexKeys(doc)
	return nil
}

// remove deletes a record. Deleted records stay in c.records (for the
// snapshots of open transactions) until a compaction with keep false.
func (c *collection) remove(r *record, keep bool) {
	id, _ := lookupTop(r.doc, "_id")
	k := keyOf(id)
	delete(c.byID, k)
	c.removeIndexKeys(r.doc)
	r.deleted = true
	c.live--
	if !keep && len(c.records) > 64 && c.live < len(c.records)/2 {
		kept := make([]*record, 0, c.live)
		for _, x := range c.records {
			if x != nil && !x.deleted {
				kept = append(kept, x)
			}
		}
		c.records = kept
		c.unindexDeleted()
		c.dead = nil
		return
	}
	if c.dead == nil {
		c.dead = make(map[string][]*record)
	}
	c.dead[k] = append(c.dead[k], r)
}

// restore undoes remove (a rolled-back transactional delete).
func (c *collection) restore(r *record) {
	id, _ := lookupTop(r.doc, "_id")
	k := keyOf(id)
	r.deleted = false
	c.byID[k] = r
	if i := slices.Index(c.dead[k], r); i >= 0 {
		c.dead[k] = slices.Delete(c.dead[k], i, i+1)
		if len(c.dead[k]) == 0 {
			delete(c.dead, k)
		}
	}
	c.addIndexKeys(r.doc)
	c.live++
}

// replace swaps a record's document, keeping unique indexes consistent;
// raw is the new document's encoding when known.
func (c *collection) replace(r *record, doc bson.D, raw bson.Raw) error {
	if err := c.checkUnique(doc, r.doc); err != nil {
		return err
	}
	c.removeIndexKeys(r.doc)
	r.doc, r.raw = doc, encodeStored(doc, raw)
	c.noteID(doc)
	c.addIndexKeys(doc)
	return nil
}

func (c *collection) byIDValue(id any) *record {
	return c.byID[keyOf(id)]
}

// indexKeys returns the keys a document contributes to an index (several for
// a multikey index over an array).
func (ix *index) indexKeys(doc bson.D) ([]string, bson.D) {
	keys := []string{""}
	var kv bson.D
	for _, f := range ix.key {
		v, ok := lookupPath(doc, f.Key)
		if !ok {
			v = nil
		}
		kv = append(kv, bson.E{Key: f.Key, Value: v})
		var parts []string
		if arr, isArr := v.(bson.A); isArr && len(arr) > 0 {
			for _, el := range arr {
				parts = append(parts, keyOf(el))
			}
		} else {
			parts = []string{keyOf(v)}
		}
		var next []string
		for _, k := range keys {
			for _, p := range parts {
				next = append(next, k+"|"+p)
			}
		}
		keys = next
	}
	return keys, kv
}

func (ix *index) skip(doc bson.D) bool {
	if !ix.sparse {
		return false
	}
	for _, f := range ix.key {
		if _, ok := lookupPath(doc, f.Key); ok {
			return false
		}
	}
	return true
}

func (c *collection) checkUnique(doc, old bson.D) error {
	for _, ix := range c.indexes {
		if !ix.unique || ix.keys == nil || ix.skip(doc) {
			continue
		}
		keys, kv := ix.indexKeys(doc)
		var oldKeys map[string]bool
		if old != nil && !ix.skip(old) {
			ok, _ := ix.indexKeys(old)
			oldKeys = make(map[string]bool, len(ok))
			for _, k := range ok {
				oldKeys[k] = true
			}
		}
		for _, k := range keys {
			if ix.keys[k] > 0 && !oldKeys[k] {
				return c.dupKeyError(ix, kv)
			}
		}
	}
	return nil
}

func (c *collection) addIndexKeys(doc bson.D) {
	for _, ix := range c.indexes {
		if ix.keys == nil || ix.skip(doc) {
			continue
		}
		keys, _ := ix.indexKeys(doc)
		for _, k := range dedup(keys) {
			ix.keys[k]++
		}
	}
}

func (c *collection) removeIndexKeys(doc bson.D) {
	for _, ix := range c.indexes {
		if ix.keys == nil || ix.skip(doc) {
			continue
		}
		keys, _ := ix.indexKeys(doc)
		for _, k := range dedup(keys) {
			if ix.keys[k]--; ix.keys[k] <= 0 {
				delete(ix.keys, k)
			}
		}
	}
}

func dedup(keys []string) []string {
	if len(keys) < 2 {
		return keys
	}
	sort.Strings(keys)
	out := keys[:1]
	for _, k := range keys[1:] {
		if k != out[len(out)-1] {
			out = append(out, k)
		}
	}
	return out
}

// dupKeyError is MongoDB's E11000 write error.
func (c *collection) dupKeyError(ix *index, kv bson.D) *cmdError {
	var parts []string
	for _, e := range kv {
		parts = append(parts, fmt.Sprintf("%s: %s", e.Key, shortValue(e.Value)))
	}
	pattern := bson.D{}
	for _, f := range ix.key {
		pattern = append(pattern, f)
	}
	return &cmdError{Code: mongoerr.CodeDuplicateKey,
		Msg:   fmt.Sprintf("E11000 duplicate key error collection: %s index: %s dup key: { %s }", c.ns(), ix.name, strings.Join(parts, ", ")),
		Extra: bson.D{{Key: "keyPattern", Value: pattern}, {Key: "keyValue", Value: kv}}}
}

func shortValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	case bson.ObjectID:
		return "ObjectId('" + x.Hex() + "')"
	default:
		return fmt.Sprint(x)
	}
}

// keyOf returns a string that is equal for two values exactly when MongoDB's
// index considers them equal (numbers compare by value across types).
//
// Every value's key is self-delimiting (a string is its length and its
// bytes, a number's digits end where the next separator begins), so the
// keys of documents, arrays and compound index keys, which join their
// parts, are as faithful as their parts'.
func keyOf(v any) string {
	var b strings.Builder
	if x, ok := v.(string); ok {
		b.Grow(len(x) + 12) // the common _id of a ledger or an application: one allocation
	}
	writeKey(&b, v)
	return b.String()
}

// writeString writes a string's key: its length, then its bytes (no
// escaping to do, unlike quoting, and as unambiguous).
func writeString(b *strings.Builder, prefix byte, x string) {
	b.WriteByte(prefix)
	b.WriteString(strconv.Itoa(len(x)))
	b.WriteByte(':')
	b.WriteString(x)
}

func writeKey(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("n")
	case int32:
		writeNum(b, float64(x), int64(x), true)
	case int64:
		writeNum(b, float64(x), x, true)
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			writeNum(b, x, int64(x), true)
		} else {
			writeNum(b, x, 0, false)
		}
	case string:
		writeString(b, 's', x)
	case bool:
		if x {
			b.WriteString("bt")
		} else {
			b.WriteString("bf")
		}
	case bson.ObjectID:
		b.WriteString("o")
		b.WriteString(x.Hex())
	case bson.DateTime:
		b.WriteString("d")
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case bson.Timestamp:
		fmt.Fprintf(b, "t%d.%d", x.T, x.I)
	case bson.Binary:
		fmt.Fprintf(b, "x%d:%x", x.Subtype, x.Data)
	case bson.D:
		b.WriteString("{")
		for _, e := range x {
			writeString(b, 'k', e.Key)
			writeKey(b, e.Value)
			b.WriteString(",")
		}
		b.WriteString("}")
	case bson.A:
		b.WriteString("[")
		for _, e := range x {
			writeKey(b, e)
			b.WriteString(",")
		}
		b.WriteString("]")
	default:
		fmt.Fprintf(b, "?%T:%v", v, v)
	}
}

func writeNum(b *strings.Builder, f float64, i int64, integral bool) {
	if integral {
		b.WriteString("i")
		b.WriteString(strconv.FormatInt(i, 10))
		return
	}
	b.WriteString("f")
	b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
}

// lookupTop returns a top-level field.
func lookupTop(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// lookupD is lookupTop without the found flag.
func lookupD(d bson.D, key string) any {
	v, _ := lookupTop(d, key)
	return v
}

// lookupPath follows a dotted path through documents and array indexes.
func lookupPath(d bson.D, path string) (any, bool) {
	var cur any = d
	for _, part := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case bson.D:
			v, ok := lookupTop(x, part)
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
