package mongotest

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// routerCursor is a cursor of the mongos: one shard's cursor it passes
// through, a result it merged from several shards, or a change stream
// merged from every shard's.
type routerCursor struct {
	id int64
	ns string
	// A shard's cursor.
	sh      *shard
	shardID int64
	// A merged result.
	docs []bson.D
	// A change stream.
	stream *mergedStream

	mu sync.Mutex // serialises getMores
}

// newCursor registers a mongos cursor.
func (rt *router) newCursor(rc *routerCursor) *routerCursor {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.nextCur++
	rc.id = rt.nextCur<<16 | int64(rt.processID[11])<<8 | 0x5e
	rt.cursors[rc.id] = rc
	return rc
}

func (rt *router) dropCursor(rc *routerCursor) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.cursors[rc.id] == rc {
		delete(rt.cursors, rc.id)
	}
}

// adoptCursor turns the cursor a shard's reply opened into a mongos
// cursor.
func (rt *router) adoptCursor(reply bson.D, sh *shard, r *request) bson.D {
	for i, el := range reply {
		if el.Key != "cursor" {
			continue
		}
		cur, ok := el.Value.(bson.D)
		if !ok {
			if raw, isRaw := el.Value.(bson.Raw); isRaw {
				if err := bson.Unmarshal(raw, &cur); err != nil {
					return reply
				}
			} else {
				return reply
			}
		}
		id, _ := lookupD(cur, "id").(int64)
		if id == 0 {
			return reply
		}
		ns, _ := lookupD(cur, "ns").(string)
		rc := rt.newCursor(&routerCursor{ns: ns, sh: sh, shardID: id})
		out := append(bson.D(nil), reply...)
		out[i].Value = replaceField(cur, "id", rc.id)
		return out
	}
	return reply
}

// routerGetMore continues a mongos cursor.
func routerGetMore(rt *router, r *request) (bson.D, bool, error) {
	id, ok := r.cmd[0].Value.(int64)
	if !ok {
		return nil, false, errorf(mongoerr.CodeTypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", typeName(r.cmd[0].Value))
	}
	collName, _ := lookupD(r.cmd, "collection").(string)
	rt.mu.Lock()
	rc := rt.cursors[id]
	rt.mu.Unlock()
	if rc == nil {
		return nil, false, errorf(mongoerr.CodeCursorNotFound, "cursor id %d not found", id)
	}
	if r.db+"."+collName != rc.ns {
		return nil, false, errorf(mongoerr.CodeBadValue, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s", r.db, collName, rc.ns)
	}
	n, err := batchSizeArg(r.cmd, 0)
	if err != nil {
		return nil, false, err
	}
	if n == 0 {
		n = -1
	}
	r.streamCursor = rc.stream != nil
	if fp := rt.e.fail.check("failGetMoreAfterCursorCheckout", r, ""); fp != nil {
		rt.dropCursor(rc)
		if rc.stream != nil {
			rc.stream.cancel() // wakes a getMore waiting on the cursor
			rc.mu.Lock()
			rc.stream.kill()
			rc.mu.Unlock()
		}
		return nil, false, errorf(fp.ErrorCode, "Failing command via 'failGetMoreAfterCursorCheckout' failpoint")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch {
	case rc.stream != nil:
		return rt.streamGetMore(r, rc, n)
	case rc.sh != nil:
		cmd := replaceField(r.cmd, "getMore", rc.shardID)
		cmd, err := rt.txnCommand(r, rc.sh, cmd)
		if err != nil {
			return nil, false, err
		}
		reply := rt.send(r, rt.shardConn(r.conn, rc.sh.srv), rc.sh, cmd, nil)
		if reply == nil {
			rt.dropCursor(rc)
			return nil, false, errorf(mongoerr.CodeHostUnreachable, "Connection closed by peer while running getMore on shard %s", rc.sh.id)
		}
		if err := replyError(reply); err != nil {
			if err.Code == mongoerr.CodeCursorNotFound {
				rt.dropCursor(rc)
			}
			return reply, true, nil
		}
		return rt.relabelCursor(reply, rc), true, nil
	}
	batch, _, rest, _ := takeBatch(rc.docs, nil, n)
	rc.docs = rest
	out := id
	if len(rest) == 0 {
		rt.dropCursor(rc)
		out = 0
	}
	return cursorReply(false, out, rc.ns, batch), false, nil
}

// relabelCursor gives a shard's getMore reply the mongos cursor's id (0
// once the shard's cursor is exhausted).
func (rt *router) relabelCursor(reply bson.D, rc *routerCursor) bson.D {
	for i, el := range reply {
		if el.Key != "cursor" {
			continue
		}
		cur, ok := el.Value.(bson.D)
		if !ok {
			raw, isRaw := el.Value.(bson.Raw)
			if !isRaw || bson.Unmarshal(raw, &cur) != nil {
				return reply
			}
		}
		id, _ := lookupD(cur, "id").(int64)
		if id == 0 {
			rt.dropCursor(rc)
		} else {
			id = rc.id
		}
		out := append(bson.D(nil), reply...)
		out[i].Value = replaceField(cur, "id", id)
		return out
	}
	return reply
}

// routerKillCursors kills mongos cursors, and the shards' cursors behind
// them.
func routerKillCursors(rt *router, r *request) (bson.D, bool, error) {
	ids, _ := lookupD(r.cmd, "cursors").(bson.A)
	killed, notFound := bson.A{}, bson.A{}
	for _, v := range ids {
		id, _ := v.(int64)
		rt.mu.Lock()
		rc := rt.cursors[id]
		delete(rt.cursors, id)
		rt.mu.Unlock()
		if rc == nil {
			notFound = append(notFound, id)
			continue
		}
		killed = append(killed, id)
		switch {
		case rc.stream != nil:
			rc.stream.cancel() // wakes a getMore waiting on the cursor
			rc.mu.Lock()
			rc.stream.kill()
			rc.mu.Unlock()
		case rc.sh != nil:
			_, coll, _ := splitNS(rc.ns)
			cmd := bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{rc.shardID}}, {Key: "$db", Value: r.db}}
			if cmd2, err := rt.txnCommand(r, rc.sh, append(cmd, txnFields(r.cmd)...)); err == nil {
				cmd = cmd2
			}
			rt.send(r, rt.shardConn(r.conn, rc.sh.srv), rc.sh, cmd, nil)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, false, nil
}

// txnFields are a command's session and transaction fields.
func txnFields(cmd bson.D) bson.D {
	var out bson.D
	for _, el := range cmd {
		switch el.Key {
		case "lsid", "txnNumber", "autocommit":
			out = append(out, el)
		}
	}
	return out
}
