package mongotest

import (
	"encoding/binary"
	"sort"
	"strconv"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// cursor is a server-side cursor: a materialised result (find, aggregate,
// listCollections, listIndexes) or a change stream.
type cursor struct {
	id   int64
	ns   string // "db.coll" as returned in replies
	db   string
	docs []bson.D // remaining results of a materialised cursor
	// raws are docs encoded where the emulator holds them so (stored
	// versions, docRef.raw): nil, or as long as docs with nil for a
	// document to encode.
	raws   []bson.Raw
	stream *changeStream
	// query marks the cursor of a find or an aggregate: the documents
	// its getMores return count in metrics.document.returned.
	query bool

	// mu serialises getMores on one cursor (a change-stream getMore waits
	// without holding the engine lock).
	mu sync.Mutex
}

const (
	maxBatchBytes     = 16 * 1024 * 1024
	maxBSONObjectSize = 16*1024*1024 + 16*1024 // the server's limit for a document it returns
)

// newCursor registers a cursor for the results left after the first batch.
// Callers hold e.mu.
func (e *engine) newCursor(ns, db string, rest []bson.D, raws []bson.Raw, cs *changeStream) *cursor {
	e.nextCur++
	id := e.nextCur<<20 | int64(e.processID[11])<<8 | int64(e.nextCur&0xff)
	c := &cursor{id: id, ns: ns, db: db, docs: rest, raws: raws, stream: cs}
	e.cursors[id] = c
	return c
}

// storedBatch is a batch of a find's reply, with the documents' stored
// encodings (docRef.raw) where the emulator holds them: the reply copies
// those bytes instead of encoding the bson.D again (replyEncoder writes
// them straight into the message). mongos reads a shard's replies in
// process (router.drain): it takes docs.
type storedBatch struct {
	docs []bson.D
	raws []bson.Raw // as long as docs; nil where docs[i] is to be encoded
}

// MarshalBSONValue encodes the batch as an array, for an encoder other
// than replyEncoder's own path.
func (b storedBatch) MarshalBSONValue() (byte, []byte, error) {
	arr, err := b.appendArray(nil)
	return byte(bson.TypeArray), arr, err
}

// appendArray appends the batch, a BSON array, to dst. The documents'
// first bytes are touched run by run (maxTouchRun) before the run is
// copied: stored documents come in no order of their memory (a hashed
// index's), and their fetches then overlap rather than stall each copy.
func (b storedBatch) appendArray(dst []byte) ([]byte, error) {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var touched byte
	for i, d := range b.docs {
		if i%maxTouchRun == 0 {
			for _, raw := range b.raws[i:min(i+maxTouchRun, len(b.raws))] {
				if len(raw) > 0 {
					touched ^= raw[0]
				}
			}
		}
		dst = append(dst, byte(bson.TypeEmbeddedDocument))
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, 0)
		if raw := b.raws[i]; raw != nil {
			dst = append(dst, raw...)
			continue
		}
		enc, err := bson.Marshal(d)
		if err != nil {
			return nil, err
		}
		dst = append(dst, enc...)
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	touchSink.Add(int64(touched))
	return dst, nil
}

// takeBatch splits off the next batch: at most n documents (n <= 0: no
// count limit) and about 16 MiB, and returns it with its length. raws,
// nil or as long as docs, are the documents' encodings where known
// (cursor.raws): with them the batch is a storedBatch, else a bson.A.
func takeBatch(docs []bson.D, raws []bson.Raw, n int) (any, int, []bson.D, []bson.Raw) {
	var size int64
	k := 0
	for k < len(docs) {
		if n > 0 && k >= n {
			break
		}
		var s int64
		if raws != nil && raws[k] != nil {
			s = int64(len(raws[k]))
		} else {
			s = docSize(docs[k])
		}
		if k > 0 && size+s > maxBatchBytes {
			break
		}
		size += s
		k++
	}
	if raws != nil {
		return storedBatch{docs: docs[:k:k], raws: raws[:k:k]}, k, docs[k:], raws[k:]
	}
	batch := make(bson.A, k)
	for i, d := range docs[:k] {
		batch[i] = d
	}
	return batch, k, docs[k:], nil
}

// cursorReply shapes {cursor: {firstBatch|nextBatch, id, ns}}; batch is a
// bson.A or a storedBatch (takeBatch).
func cursorReply(first bool, id int64, ns string, batch any, extra ...bson.E) bson.D {
	key := "nextBatch"
	if first {
		key = "firstBatch"
	}
	cur := bson.D{{Key: key, Value: batch}}
	cur = append(cur, extra...)
	cur = append(cur, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: ns})
	return bson.D{{Key: "cursor", Value: cur}}
}

// firstBatchReply returns the first batch of a materialised result and opens
// a cursor for the rest when needed. Callers hold e.mu.
func (e *engine) firstBatchReply(ns, db string, docs []bson.D, batchSize int, single bool) bson.D {
	return e.firstBatch(ns, db, docs, nil, batchSize, single, false)
}

// queryReply is firstBatchReply for the result of a find or an aggregate:
// the documents it returns, now and in the cursor's getMores, count in
// metrics.document.returned. raws are the documents' encodings where known
// (nil: none; see takeBatch). Callers hold e.mu.
func (e *engine) queryReply(ns, db string, docs []bson.D, raws []bson.Raw, batchSize int, single bool) bson.D {
	return e.firstBatch(ns, db, docs, raws, batchSize, single, true)
}

func (e *engine) firstBatch(ns, db string, docs []bson.D, raws []bson.Raw, batchSize int, single, query bool) bson.D {
	if batchSize < 0 {
		batchSize = 101
	}
	var batch any = bson.A{}
	n, rest, restRaws := 0, docs, raws
	if batchSize > 0 {
		batch, n, rest, restRaws = takeBatch(docs, raws, batchSize)
	}
	var id int64
	if len(rest) > 0 && !single {
		cur := e.newCursor(ns, db, rest, restRaws, nil)
		cur.query = query
		id = cur.id
	}
	if query {
		e.metrics.returned += int64(n)
	}
	return cursorReply(true, id, ns, batch)
}

func batchSizeArg(d bson.D, def int) (int, error) {
	v, ok := lookupTop(d, "batchSize")
	if !ok {
		return def, nil
	}
	n, ok := asInt64(v)
	if !ok || n < 0 {
		return 0, errorf(mongoerr.CodeBadValue, "batchSize must be a non-negative number")
	}
	if n == 0 {
		return 0, nil
	}
	return int(n), nil
}

func sortRefs(refs []docRef, s *mql.Sort) {
	sort.SliceStable(refs, func(i, j int) bool { return s.Less(refs[i].doc, refs[j].doc) })
}

func cmdGetMore(e *engine, r *request) (bson.D, error) {
	id, ok := r.cmd[0].Value.(int64)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", typeName(r.cmd[0].Value))
	}
	collName, _ := lookupD(r.cmd, "collection").(string)
	e.mu.Lock()
	cur := e.cursors[id]
	e.mu.Unlock()
	if cur == nil {
		return nil, errorf(mongoerr.CodeCursorNotFound, "cursor id %d not found", id)
	}
	if cur.db+"."+collName != cur.ns {
		return nil, errorf(mongoerr.CodeBadValue, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s", r.db, collName, cur.ns)
	}
	n, err := batchSizeArg(r.cmd, 0)
	if err != nil {
		return nil, err
	}
	if n == 0 { // getMore's batchSize 0 means "no limit"
		n = -1
	}
	r.streamCursor = cur.stream != nil
	if fp := e.fail.check("failGetMoreAfterCursorCheckout", r, ""); fp != nil {
		e.mu.Lock()
		delete(e.cursors, id)
		e.mu.Unlock()
		if cur.stream != nil {
			cur.stream.kill()
		}
		return nil, errorf(fp.ErrorCode, "Failing command via 'failGetMoreAfterCursorCheckout' failpoint")
	}
	if cur.stream != nil {
		return e.streamGetMore(r, cur, n)
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	batch, k, rest, raws := takeBatch(cur.docs, cur.raws, n)
	cur.docs, cur.raws = rest, raws
	if cur.query {
		e.metrics.returned += int64(k)
	}
	if len(rest) == 0 {
		delete(e.cursors, id)
		id = 0
	}
	return cursorReply(false, id, cur.ns, batch), nil
}

func cmdKillCursors(e *engine, r *request) (bson.D, error) {
	ids, _ := lookupD(r.cmd, "cursors").(bson.A)
	killed, notFound := bson.A{}, bson.A{}
	for _, v := range ids {
		id, _ := v.(int64)
		if c, ok := e.cursors[id]; ok {
			delete(e.cursors, id)
			if c.stream != nil {
				c.stream.kill()
			}
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}
