package mongotest

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// routerBulkWrite runs a client bulkWrite through the mongos: each
// operation goes to the shard owning its namespace (an unsharded one's
// primary shard) or, on a sharded collection, its document (an insert) or
// the shard its filter's shard key equality pins; each shard gets one
// bulkWrite with its operations (so a retry finds them at the same
// positions), and the mongos merges the counts and the results cursor,
// each result's idx the command's. An ordered bulkWrite stops at the first
// shard reporting an error, but operations already sent to other shards
// ran. An operation on a sharded collection that its filter does not pin
// is refused (238).
func routerBulkWrite(rt *router, r *request) (bson.D, bool, error) {
	ops, err := docsArg(r, "ops")
	if err != nil {
		return nil, false, err
	}
	infos, err := docsArg(r, "nsInfo")
	if err != nil {
		return nil, false, err
	}
	type part struct {
		sh    *shard
		ops   bson.A
		index []int       // each op's index in the command
		ns    map[int]int // the command's nsInfo index → this part's
		info  bson.A
	}
	var parts []*part
	byShard := map[*shard]*part{}
	for i, v := range ops {
		op, ok := v.(bson.D)
		if !ok || len(op) == 0 {
			return nil, false, errorf(mongoerr.CodeTypeMismatch, "BSON field 'bulkWrite.ops' must be an array of objects")
		}
		nsIdx, ok := asInt64(op[0].Value)
		if !ok || nsIdx < 0 || int(nsIdx) >= len(infos) {
			return nil, false, errorf(mongoerr.CodeBadValue, "BulkWrite ops entry %d has an invalid nsInfo index %v", i, op[0].Value)
		}
		info, _ := infos[nsIdx].(bson.D)
		ns, _ := lookupD(info, "ns").(string)
		db, coll, _ := splitNS(ns)
		var sh *shard
		if m := rt.sharded(db + "." + coll); m != nil {
			rt.mu.Lock()
			switch op[0].Key {
			case "insert":
				if d, ok := lookupD(op, "document").(bson.D); ok {
					if _, has := lookupTop(d, "_id"); !has {
						d = append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, d...)
						op = replaceField(op, "document", d)
					}
					sh = m.chunkFor(m.keyOf(d)).shard
				}
			default:
				f, _ := lookupD(op, "filter").(bson.D)
				sh = m.targetOf(f)
			}
			rt.mu.Unlock()
			if sh == nil {
				return nil, false, errorf(mongoerr.CodeNotImplemented, "mongotest: a bulkWrite %s on the sharded collection %s must pin its shard key %s by equality (use %sMany/%sOne commands instead)", op[0].Key, ns, showKey(m.key), op[0].Key, op[0].Key)
			}
		} else {
			sh = rt.primaryShard(r.ctx, db, db != "admin" && db != "local")
		}
		p := byShard[sh]
		if p == nil {
			p = &part{sh: sh, ns: map[int]int{}}
			byShard[sh] = p
			parts = append(parts, p)
		}
		j, ok := p.ns[int(nsIdx)]
		if !ok {
			j = len(p.info)
			p.ns[int(nsIdx)] = j
			p.info = append(p.info, infos[nsIdx])
		}
		op = append(bson.D{{Key: op[0].Key, Value: int32(j)}}, op[1:]...)
		p.ops = append(p.ops, op)
		p.index = append(p.index, i)
	}
	if len(parts) == 1 {
		return rt.forward(r, parts[0].sh, r.cmd)
	}
	ordered := boolArg(r, "ordered", true)
	base := withoutFields(r.cmd, "ops", "nsInfo", "cursor")
	counts := map[string]int64{}
	var results []bson.D
	var wce any
	for _, p := range parts {
		cmd := append(append(bson.D(nil), base...), bson.E{Key: "ops", Value: p.ops}, bson.E{Key: "nsInfo", Value: p.info},
			bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: int32(1 << 30)}}})
		reply, err := rt.callOK(r, p.sh, cmd)
		if err != nil {
			return nil, false, err
		}
		docs, err := rt.drain(r, p.sh, reply)
		if err != nil {
			return nil, false, err
		}
		for _, d := range docs {
			j, _ := asInt64(lookupD(d, "idx"))
			if int(j) < len(p.index) {
				d = replaceField(d, "idx", int32(p.index[j]))
			}
			results = append(results, d)
		}
		for _, k := range []string{"nErrors", "nInserted", "nMatched", "nModified", "nUpserted", "nDeleted"} {
			n, _ := asInt64(lookupD(reply, k))
			counts[k] += n
		}
		if w := lookupD(reply, "writeConcernError"); w != nil && wce == nil {
			wce = w
		}
		if ordered && counts["nErrors"] > 0 {
			break
		}
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, _ := asInt64(lookupD(results[i], "idx"))
		b, _ := asInt64(lookupD(results[j], "idx"))
		return a < b
	})
	bs, err := batchSizeArg(cursorOpts(r), 0)
	if err != nil {
		return nil, false, err
	}
	if bs == 0 {
		bs = len(results) + 1
	}
	reply := rt.mergedCursorReply("admin.$cmd.bulkWrite", results, bs, false)
	for _, k := range []string{"nErrors", "nInserted", "nMatched", "nModified", "nUpserted", "nDeleted"} {
		reply = append(reply, bson.E{Key: k, Value: int32(counts[k])})
	}
	if wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: wce})
	}
	return reply, false, nil
}
