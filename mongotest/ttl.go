package mongotest

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// runTTL is one pass of the TTL monitor: it deletes every document whose
// TTL-indexed date (the earliest, for an array) plus expireAfterSeconds is
// not after now. Deletes are ordinary deletes in the oplog, so change streams
// see them as delete events, as on a real server.
func (e *engine) runTTL() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || !e.params.ttlEnabled {
		return
	}
	now := bson.NewDateTimeFromTime(e.nowLocked())
	dbNames := make([]string, 0, len(e.dbs))
	for n := range e.dbs {
		dbNames = append(dbNames, n)
	}
	sort.Strings(dbNames)
	for _, dn := range dbNames {
		d := e.dbs[dn]
		collNames := make([]string, 0, len(d.colls))
		for n := range d.colls {
			collNames = append(collNames, n)
		}
		sort.Strings(collNames)
		for _, cn := range collNames {
			c := d.colls[cn]
			for _, ix := range c.indexes {
				if ix.expireAfterSeconds == nil || len(ix.key) != 1 {
					continue
				}
				ttlMS := *ix.expireAfterSeconds * 1000
				for _, rec := range c.all() {
					if rec.deleted || rec.lockedBy != nil {
						continue
					}
					at, ok := earliestDate(rec.doc, ix.key[0].Key)
					if ok && int64(at)+ttlMS <= int64(now) {
						e.deleteRecord(c, rec)
					}
				}
			}
		}
	}
}

func earliestDate(doc bson.D, path string) (bson.DateTime, bool) {
	v, ok := lookupPath(doc, path)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case bson.DateTime:
		return x, true
	case bson.A:
		var best bson.DateTime
		found := false
		for _, el := range x {
			if d, ok := el.(bson.DateTime); ok && (!found || d < best) {
				best, found = d, true
			}
		}
		return best, found
	}
	return 0, false
}
