package mongotest

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Commands on a sharded collection. A write goes to the shard owning each
// document (its shard key's chunk); a read or write whose filter pins the
// whole shard key by equality goes to that chunk's shard, others to every
// shard holding chunks, their results merged at the mongos: a find's sort,
// skip and limit, count's sum, distinct's union, and an aggregate's
// pipeline after its leading $match stages (which the shards run). An
// updateOne, deleteOne or findAndModify that does not pin the shard key
// finds its document first (the first match, in sort order when sorted),
// then writes it on its shard, as mongos' "without shard key" protocol
// does; an upsert must pin the key (ShardKeyNotFound, 61).
//
// A write command sends each shard one command with that shard's
// statements: a retryable write's retry then finds, on every shard, the
// same statements at the same positions. An ordered write stops at the
// first statement that fails on its shard, but statements sent to other
// shards in the same command ran (a real mongos sends ordered batches in
// order).

// shardedCommand runs a command on a sharded collection.
func (rt *router) shardedCommand(r *request, m *collMeta) (bson.D, bool, error) {
	defer rt.lockForCommand(m)()
	switch r.name {
	case "insert":
		return rt.shardedInsert(r, m)
	case "update":
		return rt.shardedUpdate(r, m)
	case "delete":
		return rt.shardedDelete(r, m)
	case "find":
		return rt.shardedFind(r, m)
	case "count":
		return rt.shardedCount(r, m)
	case "distinct":
		return rt.shardedDistinct(r, m)
	case "aggregate":
		return rt.shardedAggregate(r, m)
	case "findAndModify", "findandmodify":
		return rt.shardedFindAndModify(r, m)
	case "drop":
		return rt.shardedDrop(r, m)
	case "createIndexes", "dropIndexes", "deleteIndexes":
		return rt.broadcastDDL(r, m)
	case "collMod":
		reply, final, err := rt.broadcastDDL(r, m)
		if err == nil {
			// Every shard's copy, a new one too, gets the options.
			pe := rt.primaryShard(r.ctx, m.db, true).srv.eng
			pe.mu.Lock()
			if c := pe.coll(m.db, m.coll); c != nil {
				rt.mu.Lock()
				m.options = c.options
				rt.mu.Unlock()
			}
			pe.mu.Unlock()
		}
		return reply, final, err
	case "renameCollection":
		return nil, false, errorf(mongoerr.CodeIllegalOperation, "mongotest: renameCollection of the sharded collection %s is not emulated", m.ns())
	}
	return rt.forward(r, rt.primaryShard(r.ctx, m.db, true), r.cmd)
}

// call runs a command on a shard for a request, with the transaction's
// fields for that shard; a closed connection is an error.
func (rt *router) call(r *request, sh *shard, cmd bson.D) (bson.D, error) {
	cmd, err := rt.txnCommand(r, sh, cmd)
	if err != nil {
		return nil, err
	}
	reply := rt.send(r, rt.shardConn(r.conn, sh.srv), sh, cmd, nil)
	if reply == nil {
		return nil, errorf(mongoerr.CodeHostUnreachable, "Connection closed by peer while running %s on shard %s", r.name, sh.id)
	}
	return reply, nil
}

// remoteError is a shard's error as mongos returns it from a command it
// sent to several shards: the code and labels kept, the message wrapped.
func remoteError(sh *shard, ce *cmdError) *cmdError {
	out := *ce
	out.Msg = "Error on remote shard " + sh.srv.Addr() + " :: caused by :: " + ce.Msg
	return &out
}

// callOK is call for a command sent to several shards: a shard's error
// reply is the (wrapped) error.
func (rt *router) callOK(r *request, sh *shard, cmd bson.D) (bson.D, error) {
	reply, err := rt.call(r, sh, cmd)
	if err != nil {
		return nil, err
	}
	if ce := replyError(reply); ce != nil {
		return nil, remoteError(sh, ce)
	}
	return reply, nil
}

// drain reads every document of the cursor a shard's reply opened.
func (rt *router) drain(r *request, sh *shard, reply bson.D) ([]bson.D, error) {
	cur, _ := lookupD(reply, "cursor").(bson.D)
	var docs []bson.D
	batch := lookupD(cur, "firstBatch")
	for {
		switch b := batch.(type) {
		case bson.A:
			for _, v := range b {
				if d, ok := v.(bson.D); ok {
					docs = append(docs, d)
				}
			}
		case storedBatch: // a find's: the documents, not their encodings
			docs = append(docs, b.docs...)
		}
		id, _ := lookupD(cur, "id").(int64)
		if id == 0 {
			return docs, nil
		}
		ns, _ := lookupD(cur, "ns").(string)
		db, coll, _ := splitNS(ns)
		cmd := append(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}, {Key: "$db", Value: db}}, txnFields(r.cmd)...)
		next, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, err
		}
		cur, _ = lookupD(next, "cursor").(bson.D)
		batch = lookupD(cur, "nextBatch")
	}
}

// targets returns the shards a filter concerns: the one its shard key
// equality pins, or every shard holding chunks.
func (rt *router) targets(m *collMeta, filter bson.D) []*shard {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if sh := m.targetOf(filter); sh != nil {
		return []*shard{sh}
	}
	return rt.owners(m)
}

// shardOfDoc returns the shard owning a document.
func (rt *router) shardOfDoc(m *collMeta, doc bson.D) *shard {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return m.chunkFor(m.keyOf(doc)).shard
}

// writeBatch is one shard's part of a write command: its statements and
// their indexes in the command.
type writeBatch struct {
	sh    *shard
	stmts bson.A
	index []int
}

// groupWrites groups a write's statements by shard, in the order the
// shards first appear.
func groupWrites(target []*shard, stmts bson.A) []*writeBatch {
	var out []*writeBatch
	by := map[*shard]*writeBatch{}
	for i, st := range stmts {
		sh := target[i]
		if sh == nil {
			continue
		}
		b := by[sh]
		if b == nil {
			b = &writeBatch{sh: sh}
			by[sh] = b
			out = append(out, b)
		}
		b.stmts = append(b.stmts, st)
		b.index = append(b.index, i)
	}
	return out
}

// writeResult merges the shards' replies to a write command.
type writeResult struct {
	n, nModified int64
	upserted     bson.A
	writeErrors  []bson.D
	wce          any
	opTime       bson.Timestamp
}

func (w *writeResult) add(reply bson.D, index []int) {
	n, _ := asInt64(lookupD(reply, "n"))
	nm, _ := asInt64(lookupD(reply, "nModified"))
	w.n += n
	w.nModified += nm
	remap := func(d bson.D) bson.D {
		j, _ := asInt64(lookupD(d, "index"))
		if int(j) < len(index) {
			return replaceField(d, "index", int32(index[j]))
		}
		return d
	}
	if up, ok := lookupD(reply, "upserted").(bson.A); ok {
		for _, v := range up {
			if d, ok := v.(bson.D); ok {
				w.upserted = append(w.upserted, remap(d))
			}
		}
	}
	if we, ok := lookupD(reply, "writeErrors").(bson.A); ok {
		for _, v := range we {
			if d, ok := v.(bson.D); ok {
				w.writeErrors = append(w.writeErrors, remap(d))
			}
		}
	}
	if wce := lookupD(reply, "writeConcernError"); wce != nil && w.wce == nil {
		w.wce = wce
	}
	if op, ok := lookupD(reply, "operationTime").(bson.Timestamp); ok && tsLess(w.opTime, op) {
		w.opTime = op
	}
}

// reply is the merged reply (final: ok, cluster time and operation time
// included).
func (w *writeResult) reply(rt *router, update bool) bson.D {
	out := bson.D{{Key: "n", Value: int32(w.n)}}
	if update {
		out = append(out, bson.E{Key: "nModified", Value: int32(w.nModified)})
	}
	if len(w.upserted) > 0 {
		sortByIndex(w.upserted)
		out = append(out, bson.E{Key: "upserted", Value: w.upserted})
	}
	if len(w.writeErrors) > 0 {
		errs := make(bson.A, len(w.writeErrors))
		for i, d := range w.writeErrors {
			errs[i] = d
		}
		sortByIndex(errs)
		out = append(out, bson.E{Key: "writeErrors", Value: errs})
	}
	if w.wce != nil {
		out = append(out, bson.E{Key: "writeConcernError", Value: w.wce})
	}
	out = append(out, bson.E{Key: "ok", Value: 1.0})
	out = rt.e.withOperationTime(out, &w.opTime)
	return out
}

func sortByIndex(a bson.A) {
	sort.SliceStable(a, func(i, j int) bool {
		x, _ := asInt64(lookupD(a[i].(bson.D), "index"))
		y, _ := asInt64(lookupD(a[j].(bson.D), "index"))
		return x < y
	})
}

// runWrites sends each shard its statements (field names the array) and
// merges the replies.
func (rt *router) runWrites(r *request, field string, target []*shard, stmts bson.A) (*writeResult, error) {
	base := withoutFields(r.cmd, field)
	res := &writeResult{}
	ordered := boolArg(r, "ordered", true)
	for _, b := range groupWrites(target, stmts) {
		cmd := append(append(bson.D(nil), base...), bson.E{Key: field, Value: b.stmts})
		reply, err := rt.call(r, b.sh, cmd)
		if err != nil {
			return nil, err
		}
		if ce := replyError(reply); ce != nil {
			return nil, remoteError(b.sh, ce)
		}
		res.add(reply, b.index)
		if ordered && len(res.writeErrors) > 0 {
			break
		}
	}
	return res, nil
}

func (rt *router) shardedInsert(r *request, m *collMeta) (bson.D, bool, error) {
	docs, err := docsArg(r, "documents")
	if err != nil {
		return nil, false, err
	}
	target := make([]*shard, len(docs))
	stmts := make(bson.A, len(docs))
	for i, v := range docs {
		d, ok := v.(bson.D)
		if !ok {
			return nil, false, errorf(mongoerr.CodeTypeMismatch, "document to insert must be an object, got %s", typeName(v))
		}
		if _, has := lookupTop(d, "_id"); !has {
			d = append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, d...)
		}
		stmts[i] = d
		target[i] = rt.shardOfDoc(m, d)
	}
	res, err := rt.runWrites(r, "documents", target, stmts)
	if err != nil {
		return nil, false, err
	}
	return res.reply(rt, false), true, nil
}

// findOne returns the first document (its _id, and the shard holding it)
// a filter matches on the shards, in sort order when sort is given.
func (rt *router) findOne(r *request, m *collMeta, filter, sortSpec, collation any, shards []*shard) (any, *shard, bool, error) {
	var best bson.D
	var bestShard *shard
	var s *mql.Sort
	if sd, ok := sortSpec.(bson.D); ok && len(sd) > 0 {
		var err error
		if s, err = mql.CompileSort(sd); err != nil {
			return nil, nil, false, err
		}
	}
	for _, sh := range shards {
		cmd := bson.D{{Key: "find", Value: m.coll}, {Key: "filter", Value: orEmpty(filter)}, {Key: "limit", Value: int64(1)}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: m.db}}
		if s != nil {
			cmd = append(cmd, bson.E{Key: "sort", Value: sortSpec})
		}
		if collation != nil {
			cmd = append(cmd, bson.E{Key: "collation", Value: collation})
		}
		if let := lookupD(r.cmd, "let"); let != nil {
			cmd = append(cmd, bson.E{Key: "let", Value: let})
		}
		if r.autocommit != nil { // in a transaction (a retryable write's find is not)
			cmd = append(cmd, txnFields(r.cmd)...)
		}
		reply, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, nil, false, err
		}
		docs, err := rt.drain(r, sh, reply)
		if err != nil {
			return nil, nil, false, err
		}
		if len(docs) == 0 {
			continue
		}
		if best == nil || s != nil && s.Less(docs[0], best) {
			best, bestShard = docs[0], sh
			if s == nil {
				break
			}
		}
	}
	if best == nil {
		return nil, nil, false, nil
	}
	return best[0].Value, bestShard, true, nil
}

func orEmpty(v any) any {
	if v == nil {
		return bson.D{}
	}
	return v
}

// pinToID narrows a filter to one document.
func pinToID(filter any, id any) bson.D {
	idf := bson.D{{Key: "_id", Value: id}}
	if fd, ok := filter.(bson.D); ok && len(fd) > 0 {
		return bson.D{{Key: "$and", Value: bson.A{fd, idf}}}
	}
	return idf
}

// targetOne decides where a single-document statement (updateOne,
// deleteOne) goes: the shard its filter pins, or the shard of its first
// match, with the filter narrowed to it (nil shard: nothing matches).
func (rt *router) targetOne(r *request, m *collMeta, st bson.D, qKey string, upsert bool) (*shard, bson.D, error) {
	q, _ := lookupD(st, qKey).(bson.D)
	rt.mu.Lock()
	sh := m.targetOf(q)
	owners := rt.owners(m)
	rt.mu.Unlock()
	if sh != nil {
		return sh, st, nil
	}
	if upsert {
		return nil, nil, errorf(codeShardKeyNotFound, "Failed to target upsert by query :: could not extract exact shard key from the query %s: an upsert on the sharded collection %s must pin every field of its shard key %s by equality", showKey(q), m.ns(), showKey(m.key))
	}
	id, owner, found, err := rt.findOne(r, m, q, lookupD(st, "sort"), lookupD(st, "collation"), owners)
	if err != nil || !found {
		return nil, nil, err
	}
	return owner, replaceField(st, qKey, pinToID(q, id)), nil
}

func (rt *router) shardedUpdate(r *request, m *collMeta) (bson.D, bool, error) {
	stmts, err := docsArg(r, "updates")
	if err != nil {
		return nil, false, err
	}
	var target []*shard
	var out bson.A
	var orig []int
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, false, errorf(mongoerr.CodeTypeMismatch, "update statement must be an object")
		}
		q, _ := lookupD(st, "q").(bson.D)
		if mql.Truthy(lookupD(st, "multi")) {
			for _, sh := range rt.targets(m, q) {
				target = append(target, sh)
				out = append(out, st)
				orig = append(orig, i)
			}
			continue
		}
		sh, nst, err := rt.targetOne(r, m, st, "q", mql.Truthy(lookupD(st, "upsert")))
		if err != nil {
			return nil, false, err
		}
		target = append(target, sh)
		out = append(out, nst)
		orig = append(orig, i)
	}
	return rt.finishWrites(r, "updates", target, out, orig, true)
}

func (rt *router) shardedDelete(r *request, m *collMeta) (bson.D, bool, error) {
	stmts, err := docsArg(r, "deletes")
	if err != nil {
		return nil, false, err
	}
	var target []*shard
	var out bson.A
	var orig []int
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, false, errorf(mongoerr.CodeTypeMismatch, "delete statement must be an object")
		}
		q, _ := lookupD(st, "q").(bson.D)
		if n, _ := asInt64(lookupD(st, "limit")); n == 0 {
			for _, sh := range rt.targets(m, q) {
				target = append(target, sh)
				out = append(out, st)
				orig = append(orig, i)
			}
			continue
		}
		sh, nst, err := rt.targetOne(r, m, st, "q", false)
		if err != nil {
			return nil, false, err
		}
		target = append(target, sh)
		out = append(out, nst)
		orig = append(orig, i)
	}
	return rt.finishWrites(r, "deletes", target, out, orig, false)
}

// finishWrites runs the statements a write command sent (a multi
// statement once per shard it concerns, a single-document one narrowed to
// its document); orig gives each one's index in the command.
func (rt *router) finishWrites(r *request, field string, target []*shard, out bson.A, orig []int, update bool) (bson.D, bool, error) {
	res := &writeResult{}
	base := withoutFields(r.cmd, field)
	ordered := boolArg(r, "ordered", true)
	for _, b := range groupWrites(target, out) {
		cmd := append(append(bson.D(nil), base...), bson.E{Key: field, Value: b.stmts})
		reply, err := rt.call(r, b.sh, cmd)
		if err != nil {
			return nil, false, err
		}
		if ce := replyError(reply); ce != nil {
			return nil, false, remoteError(b.sh, ce)
		}
		idx := make([]int, len(b.index))
		for k, i := range b.index {
			idx[k] = orig[i]
		}
		res.add(reply, idx)
		if ordered && len(res.writeErrors) > 0 {
			break
		}
	}
	if res.opTime.IsZero() {
		res.opTime = rt.cl.clock.current()
	}
	return res.reply(rt, update), true, nil
}

// shardedFind runs a find: on the one shard its filter pins, passed
// through; on several, each shard's matches merged, sorted, skipped,
// limited and projected at the mongos.
func (rt *router) shardedFind(r *request, m *collMeta) (bson.D, bool, error) {
	filter, _ := lookupD(r.cmd, "filter").(bson.D)
	shards, rcmd, at, snapshot := rt.readTargets(r, m, filter)
	if len(shards) == 1 {
		return rt.forward(r, shards[0], rcmd)
	}
	skip, _ := asInt64(lookupD(r.cmd, "skip"))
	limit, _ := asInt64(lookupD(r.cmd, "limit"))
	single := boolArg(r, "singleBatch", false)
	if limit < 0 {
		limit, single = -limit, true
	}
	if skip < 0 {
		return nil, false, errorf(mongoerr.CodeBadValue, "BSON field 'skip' value must be >= 0, actual value '%d'", skip)
	}
	batchSize, err := batchSizeArg(r.cmd, -1)
	if err != nil {
		return nil, false, err
	}
	var proj *mql.Projection
	pd, _ := lookupD(r.cmd, "projection").(bson.D)
	if len(pd) > 0 {
		if proj, err = mql.CompileProjection(pd); err != nil {
			return nil, false, err
		}
	}
	vars, err := rt.cmdVars(r)
	if err != nil {
		return nil, false, err
	}
	if vars, err = withCollation(vars, lookupD(r.cmd, "collation")); err != nil {
		return nil, false, err
	}
	var sortSpec *mql.Sort
	if sd, ok := lookupD(r.cmd, "sort").(bson.D); ok && len(sd) > 0 {
		if sortSpec, err = mql.CompileSort(sd); err != nil {
			return nil, false, err
		}
		sortSpec = sortSpec.WithCollation(vars.Collation)
	}
	cmd := withoutFields(rcmd, "skip", "limit", "projection", "batchSize", "singleBatch")
	if limit > 0 {
		cmd = append(cmd, bson.E{Key: "limit", Value: skip + limit})
	}
	var all []bson.D
	for _, sh := range shards {
		reply, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, false, err
		}
		docs, err := rt.drain(r, sh, reply)
		if err != nil {
			return nil, false, err
		}
		all = append(all, docs...)
	}
	if sortSpec != nil {
		sort.SliceStable(all, func(i, j int) bool { return sortSpec.Less(all[i], all[j]) })
	}
	if int(skip) >= len(all) {
		all = nil
	} else {
		all = all[skip:]
	}
	if limit > 0 && int(limit) < len(all) {
		all = all[:limit]
	}
	if proj != nil {
		for i, d := range all {
			if all[i], err = proj.Apply(d, vars); err != nil {
				return nil, false, err
			}
		}
	}
	reply := rt.mergedCursorReply(m.ns(), all, batchSize, single)
	if snapshot {
		reply = withAtClusterTime(reply, at)
	}
	return reply, false, nil
}

// mergedCursorReply returns the first batch of a result merged at the
// mongos, and a mongos cursor for the rest.
func (rt *router) mergedCursorReply(ns string, docs []bson.D, batchSize int, single bool) bson.D {
	if batchSize < 0 {
		batchSize = 101
	}
	var batch any = bson.A{}
	rest := docs
	if batchSize > 0 {
		batch, _, rest, _ = takeBatch(docs, nil, batchSize)
	}
	var id int64
	if len(rest) > 0 && !single {
		id = rt.newCursor(&routerCursor{ns: ns, docs: rest}).id
	}
	return cursorReply(true, id, ns, batch)
}

// shardedCount sums each shard's count (skip and limit applied to the sum).
func (rt *router) shardedCount(r *request, m *collMeta) (bson.D, bool, error) {
	q, _ := lookupD(r.cmd, "query").(bson.D)
	shards := rt.targets(m, q)
	if len(shards) == 1 {
		return rt.forward(r, shards[0], r.cmd)
	}
	cmd := withoutFields(r.cmd, "skip", "limit")
	var n int64
	for _, sh := range shards {
		reply, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, false, err
		}
		c, _ := asInt64(lookupD(reply, "n"))
		n += c
	}
	skip, _ := asInt64(lookupD(r.cmd, "skip"))
	limit, _ := asInt64(lookupD(r.cmd, "limit"))
	n = max(n-skip, 0)
	if limit < 0 {
		limit = -limit
	}
	if limit > 0 && limit < n {
		n = limit
	}
	return bson.D{{Key: "n", Value: int32(n)}}, false, nil
}

// shardedDistinct unions each shard's distinct values.
func (rt *router) shardedDistinct(r *request, m *collMeta) (bson.D, bool, error) {
	q, _ := lookupD(r.cmd, "query").(bson.D)
	shards, cmd, at, snapshot := rt.readTargets(r, m, q)
	if len(shards) == 1 {
		return rt.forward(r, shards[0], cmd)
	}
	var values bson.A
	for _, sh := range shards {
		reply, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, false, err
		}
		vs, _ := lookupD(reply, "values").(bson.A)
	next:
		for _, v := range vs {
			for _, have := range values {
				if mql.Equal(v, have) {
					continue next
				}
			}
			values = append(values, v)
		}
	}
	if values == nil {
		values = bson.A{}
	}
	reply := bson.D{{Key: "values", Value: values}}
	if snapshot {
		reply = withAtClusterTime(reply, at)
	}
	return reply, false, nil
}

// shardedAggregate runs an aggregate: on the one shard its leading $match
// pins, passed through; otherwise the shards run the leading $match stages
// and the mongos the rest of the pipeline over their merged results.
func (rt *router) shardedAggregate(r *request, m *collMeta) (bson.D, bool, error) {
	pipeline, _ := lookupD(r.cmd, "pipeline").(bson.A)
	var lead bson.A
	for _, st := range pipeline {
		if d, ok := st.(bson.D); ok && len(d) == 1 && d[0].Key == "$match" {
			lead = append(lead, st)
			continue
		}
		break
	}
	rest := pipeline[len(lead):]
	var filter bson.D
	if len(lead) == 1 {
		filter, _ = lead[0].(bson.D)[0].Value.(bson.D)
	}
	shards, rcmd, at, snapshot := rt.readTargets(r, m, filter)
	if len(shards) == 1 {
		return rt.forward(r, shards[0], rcmd)
	}
	for _, st := range rest {
		if d, ok := st.(bson.D); ok && len(d) > 0 && (d[0].Key == "$out" || d[0].Key == "$merge") {
			return nil, false, errorf(mongoerr.CodeNotImplemented, "mongotest: %s from the sharded collection %s is not emulated", d[0].Key, m.ns())
		}
	}
	p, err := mql.CompilePipeline(rest)
	if err != nil {
		return nil, false, err
	}
	vars, err := rt.cmdVars(r)
	if err != nil {
		return nil, false, err
	}
	if vars, err = withCollation(vars, lookupD(r.cmd, "collation")); err != nil {
		return nil, false, err
	}
	cmd := withoutFields(rcmd, "pipeline", "cursor")
	cmd = append(cmd, bson.E{Key: "pipeline", Value: append(bson.A{}, lead...)},
		bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: int32(1 << 30)}}})
	var all []bson.D
	for _, sh := range shards {
		reply, err := rt.callOK(r, sh, cmd)
		if err != nil {
			return nil, false, err
		}
		docs, err := rt.drain(r, sh, reply)
		if err != nil {
			return nil, false, err
		}
		all = append(all, docs...)
	}
	out, err := p.Run(all, vars)
	if err != nil {
		return nil, false, err
	}
	batchSize, err := batchSizeArg(cursorOpts(r), -1)
	if err != nil {
		return nil, false, err
	}
	reply := rt.mergedCursorReply(m.ns(), out, batchSize, false)
	if snapshot {
		reply = withAtClusterTime(reply, at)
	}
	return reply, false, nil
}

// shardedFindAndModify runs a findAndModify on the shard its query pins,
// or on the shard of its first match (in its sort order).
func (rt *router) shardedFindAndModify(r *request, m *collMeta) (bson.D, bool, error) {
	q, _ := lookupD(r.cmd, "query").(bson.D)
	rt.mu.Lock()
	sh := m.targetOf(q)
	owners := rt.owners(m)
	rt.mu.Unlock()
	if sh != nil {
		return rt.forward(r, sh, r.cmd)
	}
	if mql.Truthy(lookupD(r.cmd, "upsert")) {
		return nil, false, errorf(codeShardKeyNotFound, "Query for sharded findAndModify must contain the shard key: the query %s on %s does not pin every field of the shard key %s by equality", showKey(q), m.ns(), showKey(m.key))
	}
	id, owner, found, err := rt.findOne(r, m, q, lookupD(r.cmd, "sort"), lookupD(r.cmd, "collation"), owners)
	if err != nil {
		return nil, false, err
	}
	if !found {
		// Nothing matches: any owner answers {value: null}.
		return rt.forward(r, owners[0], r.cmd)
	}
	return rt.forward(r, owner, replaceField(r.cmd, "query", pinToID(q, id)))
}

// shardedDrop drops a sharded collection on every shard (the others'
// drops fromMigrate, so change streams see the primary's) and forgets it.
func (rt *router) shardedDrop(r *request, m *collMeta) (bson.D, bool, error) {
	reply, final, err := rt.broadcastDDL(r, m)
	if err != nil {
		return nil, false, err
	}
	rt.mu.Lock()
	if rt.colls[m.ns()] == m {
		delete(rt.colls, m.ns())
		rt.forgetPlacement(m.ns())
	}
	rt.mu.Unlock()
	rt.forgetCollectionConfig(r.ctx, m.ns())
	return reply, final, nil
}

// broadcastDDL runs a command on every shard, the primary's reply being
// the mongos' (the others' oplog entries fromMigrate).
func (rt *router) broadcastDDL(r *request, m *collMeta) (bson.D, bool, error) {
	primary := rt.primaryShard(r.ctx, m.db, true)
	rt.mu.Lock()
	shards := rt.liveShards()
	rt.mu.Unlock()
	var primaryReply bson.D
	for _, sh := range shards {
		cmd, err := rt.txnCommand(r, sh, r.cmd)
		if err != nil {
			return nil, false, err
		}
		ic := rt.shardConn(r.conn, sh.srv)
		var reply bson.D
		if sh == primary {
			reply = rt.send(r, ic, sh, cmd, nil)
			primaryReply = reply
		} else {
			mc := &conn{srv: sh.srv, id: ic.id, appName: ic.appName, fromMigrate: true}
			reply = rt.send(r, mc, sh, cmd, nil)
		}
		if ce := replyError(reply); ce != nil && sh == primary {
			return reply, true, nil
		}
	}
	return primaryReply, true, nil
}

// cmdVars are a command's variables ($$NOW, let) as the mongos evaluates
// them.
func (rt *router) cmdVars(r *request) (*mql.Vars, error) {
	rt.e.mu.Lock()
	defer rt.e.mu.Unlock()
	vars, err := rt.e.cmdVars(r)
	if vars != nil {
		vars.ClusterTime = rt.cl.clock.current()
	}
	return vars, err
}
