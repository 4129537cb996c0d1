package mongotest

import (
	"sort"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/hashkey"
)

// Chunk placement history, for snapshot reads through the mongos.
//
// A real cluster keeps each chunk's history (config.chunks "history":
// which shard owned it since which cluster time, validAfter). A read at a
// cluster time (readConcern snapshot with atClusterTime, chosen by the
// mongos when the client gives none) is routed with the placement as of
// that time, and each shard filters out the documents it did not own then
// (the SHARDING_FILTER stage with the ownership filter at the read's
// time): a chunk migration during a snapshot neither hides the documents
// it moves (the recipient did not have them yet at that time, the donor
// still did) nor shows them twice (the recipient's copies before the
// migration committed, the donor's after, are orphans).
//
// The emulator records the routing table at every change of ownership
// (shardCollection, a migration's commit, reshardCollection) and applies
// it the same way: the router targets the shards owning chunks at the
// read's time, and a shard drops the documents the placement at that time
// gives another shard.

// placement is a sharded collection's routing table as of a cluster time.
type placement struct {
	at     bson.Timestamp // valid from this time on (inclusive)
	fields []string
	hashed int
	chunks []placedChunk // in key order, covering MinKey to MaxKey
}

type placedChunk struct {
	min, max []any
	shard    *shard
}

// placementLog holds every sharded collection's placements, oldest
// first. Its lock is a leaf: nothing else is locked while it is held, so
// shards may consult it while holding their own engine lock.
type placementLog struct {
	mu   sync.Mutex
	byNS map[string][]*placement
}

// notePlacementLocked records m's current chunks as its placement from
// cluster time at on. Callers hold rt.mu.
func (m *clusterMeta) notePlacementLocked(cm *collMeta, at bson.Timestamp) {
	p := &placement{at: at, fields: cm.fields, hashed: cm.hashed, chunks: make([]placedChunk, len(cm.chunks))}
	for i, c := range cm.chunks {
		p.chunks[i] = placedChunk{min: c.min, max: c.max, shard: c.shard}
	}
	m.placed.mu.Lock()
	defer m.placed.mu.Unlock()
	if m.placed.byNS == nil {
		m.placed.byNS = make(map[string][]*placement)
	}
	m.placed.byNS[cm.ns()] = append(m.placed.byNS[cm.ns()], p)
}

// resetPlacementLocked makes m's current chunks its only placement (a
// collection resharded: its new incarnation has no earlier history).
// Callers hold rt.mu.
func (m *clusterMeta) resetPlacementLocked(cm *collMeta) {
	m.forgetPlacement(cm.ns())
	m.notePlacementLocked(cm, bson.Timestamp{})
}

// forgetPlacement drops a dropped collection's history.
func (m *clusterMeta) forgetPlacement(ns string) {
	m.placed.mu.Lock()
	defer m.placed.mu.Unlock()
	delete(m.placed.byNS, ns)
}

// placementAt returns ns' placement as of cluster time at (its first one
// for a time before it; nil when ns is not sharded).
func (m *clusterMeta) placementAt(ns string, at bson.Timestamp) *placement {
	m.placed.mu.Lock()
	defer m.placed.mu.Unlock()
	ps := m.placed.byNS[ns]
	if len(ps) == 0 {
		return nil
	}
	i := sort.Search(len(ps), func(i int) bool { return tsLess(at, ps[i].at) })
	if i == 0 {
		return ps[0]
	}
	return ps[i-1]
}

// keyOf is a document's shard key under p (collMeta.keyOf).
func (p *placement) keyOf(doc bson.D) []any {
	return shardKeyOf(p.fields, p.hashed, doc)
}

// shardKeyOf returns a document's shard key as chunks compare it: each
// field's value (null when missing, as MongoDB treats a missing shard key
// field), the hashed one hashed.
func shardKeyOf(fields []string, hashed int, doc bson.D) []any {
	out := make([]any, len(fields))
	for i, f := range fields {
		v, ok := lookupPath(doc, f)
		if !ok {
			v = nil
		}
		if i == hashed {
			h, err := hashkey.Hash(v)
			if err != nil {
				h = 0
			}
			v = h
		}
		out[i] = v
	}
	return out
}

// owner returns the shard owning key under p.
func (p *placement) owner(key []any) *shard {
	i := sort.Search(len(p.chunks), func(i int) bool { return compareKeys(key, p.chunks[i].max) < 0 })
	if i == len(p.chunks) {
		i = len(p.chunks) - 1
	}
	return p.chunks[i].shard
}

// owners returns the shards holding chunks under p, in the order of
// shards (the cluster's).
func (p *placement) owners(shards []*shard) []*shard {
	has := map[*shard]bool{}
	for _, c := range p.chunks {
		has[c.shard] = true
	}
	var out []*shard
	for _, sh := range shards {
		if has[sh] {
			out = append(out, sh)
		}
	}
	return out
}

// ownsAt reports whether shard sh owned doc of collection ns at cluster
// time at (true for a collection that is not sharded).
func (m *clusterMeta) ownsAt(sh *shard, ns string, doc bson.D, at bson.Timestamp) bool {
	p := m.placementAt(ns, at)
	if p == nil {
		return true
	}
	return p.owner(p.keyOf(doc)) == sh
}

// readTargets returns the shards a read of m with filter goes to, and
// the command to send them: for a snapshot read, those of the placement
// at its time (snapshotReadAt, snapshotTargets), snapshot its time.
func (rt *router) readTargets(r *request, m *collMeta, filter bson.D) (shards []*shard, cmd bson.D, at bson.Timestamp, snapshot bool) {
	at, cmd, snapshot = rt.snapshotReadAt(r)
	if snapshot {
		return rt.snapshotTargets(m, filter, at), cmd, at, true
	}
	return rt.targets(m, filter), cmd, at, false
}

// snapshotTargets returns the shards a snapshot read of m at cluster time
// at goes to: the one its filter's shard key equality pins under the
// placement then, or every shard holding chunks then.
func (rt *router) snapshotTargets(m *collMeta, filter bson.D, at bson.Timestamp) []*shard {
	p := rt.placementAt(m.ns(), at)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if p == nil {
		if sh := m.targetOf(filter); sh != nil {
			return []*shard{sh}
		}
		return rt.owners(m)
	}
	if key, ok := pinnedKey(p.fields, p.hashed, filter); ok {
		return []*shard{p.owner(key)}
	}
	return p.owners(rt.shards)
}

// pinnedKey is the shard key a filter's equalities pin (collMeta.targetOf).
func pinnedKey(fields []string, hashed int, filter bson.D) ([]any, bool) {
	key := make([]any, len(fields))
	for i, f := range fields {
		v, ok := equalityOn(filter, f)
		if !ok {
			return nil, false
		}
		if i == hashed {
			h, err := hashkey.Hash(v)
			if err != nil {
				return nil, false
			}
			v = h
		}
		key[i] = v
	}
	return key, true
}

// snapshotReadAt returns the cluster time a snapshot read through the
// mongos reads at, and the command to send the shards: the client's
// atClusterTime, or the mongos' latest cluster time, which it then sends
// every shard, so that all of them read at the same point (as a real
// mongos selects one). ok is false when the command is not a snapshot
// read.
func (rt *router) snapshotReadAt(r *request) (bson.Timestamp, bson.D, bool) {
	cmd := r.cmd
	if r.autocommit != nil {
		return bson.Timestamp{}, cmd, false // a transaction's statement
	}
	rc, _ := lookupD(cmd, "readConcern").(bson.D)
	if level, _ := lookupD(rc, "level").(string); level != "snapshot" {
		return bson.Timestamp{}, cmd, false
	}
	if at, ok := lookupD(rc, "atClusterTime").(bson.Timestamp); ok {
		return at, cmd, true
	}
	at := rt.cl.clock.current()
	out := make(bson.D, len(cmd))
	copy(out, cmd)
	for i, el := range out {
		if el.Key == "readConcern" {
			out[i].Value = append(append(bson.D(nil), rc...), bson.E{Key: "atClusterTime", Value: at})
		}
	}
	return at, out, true
}
