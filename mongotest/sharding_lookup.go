package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// lookupDocument finds the current version of a sharded collection's
// document by its documentKey on the shard that owns it now, as a real
// shard's updateLookup does through the routing table: an update read
// after its document moved to another shard still gets its fullDocument
// (jstests/sharding/change_stream_update_lookup_read_concern.js and
// lookup_change_stream_post_image_*). found is nil when no document has
// that documentKey; sharded is false when db.coll is not sharded (the
// shard then looks in its own copy). Callers hold no engine lock.
func (cm *clusterMeta) lookupDocument(db, coll string, key bson.D) (found any, sharded bool) {
	cm.mu.Lock()
	m := cm.colls[db+"."+coll]
	cm.mu.Unlock()
	if m == nil {
		return nil, false
	}
	id, ok := lookupTop(key, "_id")
	if !ok {
		return nil, true
	}
	vals := make([]any, len(m.fields))
	for i, f := range m.fields {
		v, _ := lookupTop(key, f) // a field left out of the documentKey: missing, as null
		if i == m.hashed {
			h, err := hashkey.Hash(v)
			if err != nil {
				h = 0
			}
			v = h
		}
		vals[i] = v
	}
	m.mig.RLock() // not in a migration's critical section
	defer m.mig.RUnlock()
	cm.mu.Lock()
	sh := m.chunkFor(vals).shard
	cm.mu.Unlock()
	e := sh.srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.coll(db, coll)
	if c == nil {
		return nil, true
	}
	rec := c.byIDValue(id)
	if rec == nil || !sameKey(c.documentKey(rec.doc), key) {
		return nil, true // no document, or another one with the _id
	}
	return rec.doc, true
}

// sameKey reports whether two documentKeys name one document.
func sameKey(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || mql.Compare(a[i].Value, b[i].Value) != 0 {
			return false
		}
	}
	return true
}
