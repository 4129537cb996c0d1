package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// routerReshardCollection is reshardCollection: {reshardCollection: ns,
// key: {...}, unique?}. The collection gets the new shard key and a new
// UUID, as resharding's new collection does: on every shard the old copy
// is dropped and the new one created and filled with the documents the new
// key places there, all fromMigrate (invisible to change streams); then
// the primary shard writes the reshardCollection event (shown with
// showExpandedEvents, operationDescription {reshardUUID, shardKey,
// oldShardKey, unique, numInitialChunks, provenance}). Later events carry
// the new UUID; a stream on the collection is not invalidated.
func routerReshardCollection(rt *router, r *request) (bson.D, bool, error) {
	m, err := rt.shardedArg(r)
	if err != nil {
		return nil, false, err
	}
	key, ok := lookupD(r.cmd, "key").(bson.D)
	if !ok {
		return nil, false, errorf(mongoerr.CodeFailedToParse, "reshardCollection: the field 'key' (the new shard key pattern) is missing or not an object")
	}
	fields, hashed, err := parseShardKey(key)
	if err != nil {
		return nil, false, err
	}
	unique := boolArg(r, "unique", false)
	m.mig.Lock()
	defer m.mig.Unlock()
	rt.mu.Lock()
	shards := rt.liveShards()
	oldKey, oldUUID := m.key, m.uuid
	rt.mu.Unlock()
	primary := rt.primaryShard(r.ctx, m.db, true)
	for _, sh := range shards {
		sh.srv.eng.mu.Lock()
		busy := sh.srv.eng.activeTxns > 0
		sh.srv.eng.mu.Unlock()
		if busy {
			return nil, false, errorf(codeConflictingOperationInProgress, "cannot reshard %s while transactions are open on shard %s; retry when they end", m.ns(), sh.id)
		}
	}
	// Every document, from every shard.
	var docs []bson.D
	for _, sh := range shards {
		e := sh.srv.eng
		e.mu.Lock()
		if c := e.coll(m.db, m.coll); c != nil {
			for _, rec := range c.all() {
				docs = append(docs, rec.doc)
			}
		}
		e.mu.Unlock()
	}
	nm := &collMeta{db: m.db, coll: m.coll, key: key, fields: fields, hashed: hashed, unique: unique, epoch: bson.NewObjectID(),
		uuid: newUUID(), options: m.options}
	if hashed == 0 {
		nm.chunks = hashedChunks(len(fields), shards)
	} else {
		nm.chunks = []*chunk{{id: bson.NewObjectID(), min: boundKey(len(fields), -1, bson.MinKey{}), max: boundKey(len(fields), -1, bson.MaxKey{}), shard: primary}}
	}
	for _, sh := range shards {
		e := sh.srv.eng
		e.mu.Lock()
		e.fromMigrate = true
		if c := e.coll(m.db, m.coll); c != nil {
			e.dropColl(c)
		}
		c := e.ensureShardedCollLocked(m.db, m.coll, nm.uuid, fields, m.options)
		for _, d := range docs {
			if nm.chunkFor(nm.keyOf(d)).shard == sh {
				_ = e.insertDoc(c, d, nil)
			}
		}
		e.fromMigrate = false
		if sh == primary {
			u := oldUUID
			desc := bson.D{
				{Key: "reshardUUID", Value: bson.Binary{Subtype: 4, Data: uuidBytes(nm.uuid)}},
				{Key: "shardKey", Value: key}, {Key: "oldShardKey", Value: oldKey}, {Key: "unique", Value: unique},
				{Key: "numInitialChunks", Value: int64(len(nm.chunks))}, {Key: "provenance", Value: "reshardCollection"},
			}
			e.appendOplog(&oplogEntry{op: opReshardCollection, db: m.db, coll: m.coll, uuid: &u, opDesc: desc})
			nm.created = e.lastTS
		}
		e.mu.Unlock()
	}
	rt.mu.Lock()
	rt.colls[m.ns()] = nm
	rt.resetPlacementLocked(nm)
	rt.mu.Unlock()
	rt.writeCollectionConfig(r.ctx, nm)
	return bson.D{}, false, nil
}

// hashedChunks are a hashed key's initial chunks: one per shard, over the
// hash's range in equal parts.
func hashedChunks(nfields int, shards []*shard) []*chunk {
	n := len(shards)
	step := ^uint64(0)/uint64(n) + 1
	var out []*chunk
	for i, sh := range shards {
		lo, hi := boundKey(nfields, 0, bson.MinKey{}), boundKey(nfields, 0, bson.MaxKey{})
		if i > 0 {
			lo = boundKey(nfields, 0, int64(uint64(i)*step+uint64(1)<<63))
		}
		if i < n-1 {
			hi = boundKey(nfields, 0, int64(uint64(i+1)*step+uint64(1)<<63))
		}
		out = append(out, &chunk{id: bson.NewObjectID(), min: lo, max: hi, shard: sh})
	}
	return out
}
