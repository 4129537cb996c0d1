package mongotest

import (
	"context"
	"sort"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Sharded collections. shardCollection gives a collection a shard key,
// ranged ({x: 1}, compound keys too) or hashed (one field "hashed"), and
// splits it into chunks: ranges of the key, each on one shard. An empty
// collection with a hashed key gets one chunk per shard, spreading the
// hash's range evenly; any other gets one chunk, on its database's primary
// shard (moveChunk and the balancer spread it). The collection exists on
// every shard with the same UUID; the shards other than the primary create
// it with fromMigrate entries, so change streams see one create (as a
// sharded DDL's participants write theirs). The router keeps the routing
// table; config.collections and config.chunks mirror it for readers.

// Error codes of sharding (error_codes.yml) mongoerr does not name.
const (
	codeAlreadyInitialized = 23
	codeShardKeyNotFound   = 61
	codeShardNotFound      = 70
)

// collMeta is a sharded collection's routing entry.
type collMeta struct {
	db, coll string
	uuid     [16]byte
	key      bson.D   // the shard key pattern, as given
	fields   []string // its fields, in order
	hashed   int      // the hashed field's index, -1 for a ranged key
	unique   bool
	epoch    bson.ObjectID
	created  bson.Timestamp
	chunks   []*chunk // in key order, covering MinKey to MaxKey
	version  int      // counts chunk changes (config.chunks lastmod)
	// options are the collection's (pre- and post-images...), which
	// every shard's copy gets.
	options bson.D
	// mig is the collection's migration lock: commands hold it shared,
	// a chunk migration or split exclusively (its critical section).
	mig sync.RWMutex
}

// chunk is a range [min, max) of shard key values on one shard; a hashed
// field's bounds are hashes (NumberLong).
type chunk struct {
	id       bson.ObjectID
	min, max []any
	shard    *shard
}

func (m *collMeta) ns() string { return m.db + "." + m.coll }

// parseShardKey checks a shard key pattern: fields with 1 or "hashed", at
// most one hashed.
func parseShardKey(key bson.D) ([]string, int, error) {
	if len(key) == 0 {
		return nil, 0, errorf(mongoerr.CodeBadValue, "shardCollection: the shard key pattern 'key' must be a non-empty object, such as {x: 1} or {_id: \"hashed\"}")
	}
	hashed := -1
	var fields []string
	for i, el := range key {
		if el.Key == "" || strings.HasPrefix(el.Key, "$") {
			return nil, 0, errorf(mongoerr.CodeBadValue, "shardCollection: invalid shard key field %q", el.Key)
		}
		switch v := el.Value.(type) {
		case string:
			if v != "hashed" {
				return nil, 0, errorf(mongoerr.CodeBadValue, "Unsupported shard key pattern %s: field %q must be 1 or \"hashed\"", showKey(key), el.Key)
			}
			if hashed >= 0 {
				return nil, 0, errorf(31303, "A shard key pattern cannot contain more than one hashed field")
			}
			hashed = i
		default:
			if n, ok := asInt64(v); !ok || n != 1 {
				return nil, 0, errorf(mongoerr.CodeBadValue, "Unsupported shard key pattern %s: field %q must be 1 or \"hashed\"", showKey(key), el.Key)
			}
		}
		fields = append(fields, el.Key)
	}
	return fields, hashed, nil
}

func showKey(key bson.D) string {
	var b strings.Builder
	b.WriteString("{")
	for i, el := range key {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(el.Key)
		b.WriteString(": ")
		if s, ok := el.Value.(string); ok {
			b.WriteString("\"" + s + "\"")
		} else {
			b.WriteString(shortValue(el.Value))
		}
	}
	b.WriteString("}")
	return b.String()
}

// keyOf returns a document's shard key as chunks compare it: each field's
// value (null when missing, as MongoDB treats a missing shard key field),
// the hashed one hashed.
func (m *collMeta) keyOf(doc bson.D) []any {
	return shardKeyOf(m.fields, m.hashed, doc)
}

func compareKeys(a, b []any) int {
	for i := range a {
		if c := mql.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// chunkFor returns the chunk that holds a key. Callers hold rt.mu.
func (m *collMeta) chunkFor(key []any) *chunk {
	i := sort.Search(len(m.chunks), func(i int) bool { return compareKeys(key, m.chunks[i].max) < 0 })
	if i == len(m.chunks) {
		i = len(m.chunks) - 1
	}
	return m.chunks[i]
}

// owners returns the shards that hold chunks, in the cluster's order.
// Callers hold rt.mu.
func (rt *router) owners(m *collMeta) []*shard {
	has := map[*shard]bool{}
	for _, c := range m.chunks {
		has[c.shard] = true
	}
	var out []*shard
	for _, sh := range rt.shards {
		if has[sh] {
			out = append(out, sh)
		}
	}
	return out
}

// targetOf returns the one shard a filter's equality on the whole shard key
// pins it to, or nil when the filter does not pin the key (a broadcast).
// Callers hold rt.mu.
func (m *collMeta) targetOf(filter bson.D) *shard {
	key := make([]any, len(m.fields))
	for i, f := range m.fields {
		v, ok := equalityOn(filter, f)
		if !ok {
			return nil
		}
		if i == m.hashed {
			h, err := hashkey.Hash(v)
			if err != nil {
				return nil
			}
			v = h
		}
		key[i] = v
	}
	return m.chunkFor(key).shard
}

// equalityOn finds field: value, or field: {$eq: value}, at the top of a
// filter or of a top-level $and; a value that is a document of operators,
// an array or a regex pins nothing.
func equalityOn(filter bson.D, field string) (any, bool) {
	for _, el := range filter {
		if el.Key == "$and" {
			if arr, ok := el.Value.(bson.A); ok {
				for _, sub := range arr {
					if d, ok := sub.(bson.D); ok {
						if v, ok := equalityOn(d, field); ok {
							return v, true
						}
					}
				}
			}
			continue
		}
		if el.Key != field {
			continue
		}
		switch v := el.Value.(type) {
		case bson.D:
			if len(v) > 0 && strings.HasPrefix(v[0].Key, "$") {
				if len(v) == 1 && v[0].Key == "$eq" {
					if _, isDoc := v[0].Value.(bson.D); !isDoc {
						if _, isArr := v[0].Value.(bson.A); !isArr {
							return v[0].Value, true
						}
					}
				}
				return nil, false
			}
			return v, true
		case bson.A, bson.Regex:
			return nil, false
		default:
			return v, true
		}
	}
	return nil, false
}

// sharded returns a sharded collection's entry, nil for an unsharded one.
func (rt *router) sharded(ns string) *collMeta {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.colls[ns]
}

// routerShardCollection shards a collection: {shardCollection: "db.coll",
// key: {...}, unique?}.
func routerShardCollection(rt *router, r *request) (bson.D, bool, error) {
	ns, ok := r.cmd[0].Value.(string)
	db, coll, okNS := splitNS(ns)
	if !ok || !okNS || db == "" || coll == "" {
		return nil, false, errorf(mongoerr.CodeInvalidNamespace, "shardCollection takes a namespace \"db.collection\", got %v", r.cmd[0].Value)
	}
	if err := validCollName(db, coll); err != nil {
		return nil, false, err
	}
	switch db {
	case "admin", "config", "local":
		return nil, false, errorf(mongoerr.CodeIllegalOperation, "can't shard %s: the %s database cannot be sharded", ns, db)
	}
	key, ok := lookupD(r.cmd, "key").(bson.D)
	if !ok {
		return nil, false, errorf(mongoerr.CodeFailedToParse, "shardCollection: the field 'key' (the shard key pattern, e.g. {x: 1} or {_id: \"hashed\"}) is missing or not an object")
	}
	fields, hashed, err := parseShardKey(key)
	if err != nil {
		return nil, false, err
	}
	unique := boolArg(r, "unique", false)
	if unique && hashed >= 0 {
		return nil, false, errorf(mongoerr.CodeInvalidOptions, "hashed shard keys cannot be declared unique")
	}
	if m := rt.sharded(ns); m != nil {
		if mql.Equal(m.key, key) && m.unique == unique {
			return bson.D{{Key: "collectionsharded", Value: ns}, {Key: "collectionUUID", Value: bson.Binary{Subtype: 4, Data: uuidBytes(m.uuid)}}}, false, nil
		}
		return nil, false, errorf(codeAlreadyInitialized, "sharding already enabled for collection %s with options { key: %s, unique: %v }", ns, showKey(m.key), m.unique)
	}
	primary := rt.primaryShard(r.ctx, db, true)
	m := &collMeta{db: db, coll: coll, key: key, fields: fields, hashed: hashed, unique: unique, epoch: bson.NewObjectID()}

	// The collection on the primary shard (created if need be), then on
	// the others with its UUID.
	pe := primary.srv.eng
	pe.mu.Lock()
	c := pe.coll(db, coll)
	if c != nil && c.isView {
		pe.mu.Unlock()
		return nil, false, errorf(mongoerr.CodeCommandNotSupportedOnView, "Namespace %s is a view, not a collection", ns)
	}
	if c == nil {
		c = pe.createColl(db, coll, nil)
	}
	empty := c.live == 0
	if !empty && !hasIndexStartingWith(c, key) {
		// A real server creates the key's index only on an empty
		// collection.
		pe.mu.Unlock()
		return nil, false, errorf(mongoerr.CodeInvalidOptions, "Please create an index that starts with the proposed shard key before sharding the collection. (%s has %d documents and no index starting with %s)", ns, c.live, showKey(key))
	}
	m.uuid = c.uuid
	m.options = c.options
	c.shardKey = fields
	u := c.uuid
	desc := bson.D{{Key: "shardKey", Value: key}, {Key: "unique", Value: unique}, {Key: "presplitHashedZones", Value: false}, {Key: "capped", Value: false}}
	if empty {
		pe.ensureShardKeyIndexLocked(c, key)
	}
	pe.appendOplog(&oplogEntry{op: opShardCollection, db: db, coll: coll, uuid: &u, opDesc: desc})
	m.created = pe.lastTS
	pe.mu.Unlock()

	rt.mu.Lock()
	shards := rt.liveShards()
	rt.mu.Unlock()
	for _, sh := range shards {
		if sh != primary {
			sc := sh.srv.eng.ensureShardedColl(db, coll, m.uuid, fields, m.options)
			if empty {
				e := sh.srv.eng
				e.mu.Lock()
				e.fromMigrate = true
				e.ensureShardKeyIndexLocked(sc, key)
				e.fromMigrate = false
				e.mu.Unlock()
			}
		}
	}
	if hashed == 0 && empty {
		m.chunks = hashedChunks(len(fields), shards)
	} else {
		m.chunks = []*chunk{{id: bson.NewObjectID(), min: boundKey(len(fields), -1, bson.MinKey{}), max: boundKey(len(fields), -1, bson.MaxKey{}), shard: primary}}
	}
	rt.mu.Lock()
	rt.colls[ns] = m
	rt.notePlacementLocked(m, m.created)
	rt.mu.Unlock()
	rt.writeCollectionConfig(r.ctx, m)
	return bson.D{{Key: "collectionsharded", Value: ns}, {Key: "collectionUUID", Value: bson.Binary{Subtype: 4, Data: uuidBytes(m.uuid)}}}, false, nil
}

// ensureShardKeyIndexLocked creates the index of a shard key on an empty
// collection being sharded, unless an index already starts with the key,
// as shardCollection does (e.g. {_id: "hashed"} for a hashed _id, which a
// hashed-range read hints). Callers hold e.mu.
func (e *engine) ensureShardKeyIndexLocked(c *collection, key bson.D) {
	if hasIndexStartingWith(c, key) {
		return
	}
	ix, err := parseIndexSpec(bson.D{{Key: "key", Value: key}})
	if err != nil {
		return
	}
	if ix.hashed != nil {
		c.buildHashed(ix)
	}
	c.indexes = append(c.indexes, ix)
	u := c.uuid
	e.appendOplog(&oplogEntry{op: opCreateIndexes, db: c.db, coll: c.name, uuid: &u,
		opDesc: bson.D{{Key: "indexes", Value: bson.A{ix.spec}}}})
}

// boundKey is a chunk bound: every field MinKey (or MaxKey), the hashed
// one (at index hashed, -1 for none) v when v is a hash.
func boundKey(n, hashed int, v any) []any {
	out := make([]any, n)
	fill := v
	if _, isHash := v.(int64); isHash {
		fill = bson.MinKey{}
	}
	for i := range out {
		out[i] = fill
		if i == hashed {
			out[i] = v
		}
	}
	return out
}

// boundDoc is a chunk bound as config.chunks shows it.
func (m *collMeta) boundDoc(b []any) bson.D {
	d := make(bson.D, len(m.fields))
	for i, f := range m.fields {
		d[i] = bson.E{Key: f, Value: b[i]}
	}
	return d
}

// ensureShardedColl creates, on a shard other than the primary, a sharded
// collection with the primary's UUID (fromMigrate: change streams do not
// show it), and sets its shard key.
func (e *engine) ensureShardedColl(db, coll string, uuid [16]byte, fields []string, options bson.D) *collection {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ensureShardedCollLocked(db, coll, uuid, fields, options)
}

func (e *engine) ensureShardedCollLocked(db, coll string, uuid [16]byte, fields []string, options bson.D) *collection {
	c := e.coll(db, coll)
	if c == nil {
		was := e.fromMigrate
		e.fromMigrate = true
		c = e.createColl(db, coll, options)
		e.fromMigrate = was
		c.uuid = uuid
		if last := e.oplog.last(); last != nil && last.op == opCreate && last.db == db && last.coll == coll {
			u := uuid
			last.uuid = &u
		}
	}
	c.shardKey = fields
	return c
}

// writeCollectionConfig writes a sharded collection's config.collections
// document and its config.chunks.
func (rt *router) writeCollectionConfig(ctx context.Context, m *collMeta) {
	rt.mu.Lock()
	uuid := bson.Binary{Subtype: 4, Data: uuidBytes(m.uuid)}
	coll := bson.D{
		{Key: "_id", Value: m.ns()}, {Key: "lastmodEpoch", Value: m.epoch}, {Key: "timestamp", Value: m.created},
		{Key: "uuid", Value: uuid}, {Key: "key", Value: m.key}, {Key: "unique", Value: m.unique}, {Key: "noBalance", Value: false},
	}
	chunks := bson.A{}
	for i, c := range m.chunks {
		chunks = append(chunks, bson.D{
			{Key: "_id", Value: c.id}, {Key: "uuid", Value: uuid},
			{Key: "min", Value: m.boundDoc(c.min)}, {Key: "max", Value: m.boundDoc(c.max)},
			{Key: "shard", Value: c.shard.id},
			{Key: "lastmod", Value: bson.Timestamp{T: uint32(m.version + 1), I: uint32(i)}},
		})
	}
	rt.mu.Unlock()
	rt.configCommand(ctx, "config", bson.D{{Key: "delete", Value: "collections"}, {Key: "deletes", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: m.ns()}}}, {Key: "limit", Value: int32(1)}}}}})
	rt.configCommand(ctx, "config", bson.D{{Key: "insert", Value: "collections"}, {Key: "documents", Value: bson.A{coll}}})
	rt.configCommand(ctx, "config", bson.D{{Key: "delete", Value: "chunks"}, {Key: "deletes", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "uuid", Value: uuid}}}, {Key: "limit", Value: int32(0)}}}}})
	rt.configCommand(ctx, "config", bson.D{{Key: "insert", Value: "chunks"}, {Key: "documents", Value: chunks}})
}

// forgetCollectionConfig removes a dropped collection's config documents.
func (rt *router) forgetCollectionConfig(ctx context.Context, ns string) {
	reply := rt.configCommand(ctx, "config", bson.D{{Key: "findAndModify", Value: "collections"}, {Key: "query", Value: bson.D{{Key: "_id", Value: ns}}}, {Key: "remove", Value: true}})
	doc, _ := lookupD(reply, "value").(bson.D)
	if uuid, ok := lookupD(doc, "uuid").(bson.Binary); ok {
		rt.configCommand(ctx, "config", bson.D{{Key: "delete", Value: "chunks"}, {Key: "deletes", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "uuid", Value: uuid}}}, {Key: "limit", Value: int32(0)}}}}})
	}
}

// hasIndexStartingWith reports whether an index of c starts with key (the
// _id index serves {_id: 1}). Callers hold the engine's mu.
func hasIndexStartingWith(c *collection, key bson.D) bool {
	for _, ix := range c.indexes {
		if len(ix.key) >= len(key) && mql.Equal(ix.key[:len(key)], key) {
			return true
		}
	}
	return false
}
