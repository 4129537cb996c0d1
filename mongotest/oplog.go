package mongotest

import (
	"sort"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Oplog operation kinds. Each entry becomes zero or more change events,
// depending on the stream that reads it.
const (
	opNoop          = "noop"
	opInsert        = "insert"
	opUpdate        = "update"
	opReplace       = "replace"
	opDelete        = "delete"
	opDrop          = "drop"
	opRename        = "rename"
	opDropDatabase  = "dropDatabase"
	opCreate        = "create"
	opCreateIndexes = "createIndexes"
	opDropIndexes   = "dropIndexes"
	opModify        = "modify"
	// A sharded cluster's DDL events (sharding_meta.go).
	opShardCollection   = "shardCollection"
	opReshardCollection = "reshardCollection"
)

// oplogEntry is one replicated write. Documents are immutable once logged.
type oplogEntry struct {
	seq  int64
	ts   bson.Timestamp
	wall bson.DateTime
	op   string
	db   string
	coll string
	uuid *[16]byte

	docKey            bson.D // CRUD: {_id: ...}
	doc               bson.D // insert / replace: the new document; update: the post-image
	preImage          bson.D // update / replace / delete on a collection with pre-images enabled
	preImageRecorded  bool
	postImageRecorded bool
	upd               *mql.UpdateDescription

	toDB, toColl string    // rename
	dropTarget   *[16]byte // rename onto an existing collection
	opDesc       bson.D    // expanded events: operationDescription
	stateBefore  bson.D    // modify: stateBeforeChange
	nsType       string    // create: collection / view / timeseries

	txnOpIndex int
	lsid       bson.D
	txnNumber  *int64
	// fromMigrate marks a shard's writes that only move data (a chunk
	// migration, a sharded DDL's participants): change streams do not
	// show them (sharded.go).
	fromMigrate bool

	size int64

	// cache guards the fields below, which change streams fill in
	// without the engine lock.
	cache sync.Mutex
	// Encoded documents, cached on first use: every change stream that
	// returns this entry shares one encoding instead of re-encoding it.
	docRaw, preRaw bson.Raw
	// The event's resume token (the same for every stream), and encoded
	// events by the stream options that shape them (partitioned consumers
	// read every entry once per partition).
	tokData string
	tokBits []byte
	events  []cachedEvent
}

type cachedEvent struct {
	shape uint8
	raw   bson.Raw
}

// cachedEvent returns the encoded event for a stream shape, if cached.
func (ent *oplogEntry) cachedEvent(shape uint8) bson.Raw {
	ent.cache.Lock()
	defer ent.cache.Unlock()
	for _, c := range ent.events {
		if c.shape == shape {
			return c.raw
		}
	}
	return nil
}

// cacheEvent caches the encoded event for a stream shape and returns the
// cached one (another stream's, when it cached one first).
func (ent *oplogEntry) cacheEvent(shape uint8, raw bson.Raw) bson.Raw {
	ent.cache.Lock()
	defer ent.cache.Unlock()
	for _, c := range ent.events {
		if c.shape == shape {
			return c.raw
		}
	}
	ent.events = append(ent.events, cachedEvent{shape: shape, raw: raw})
	return raw
}

// token returns the encoding of the entry's resume token tok, encoding it
// on first use.
func (ent *oplogEntry) token(tok resumetoken.Token) (string, []byte) {
	ent.cache.Lock()
	defer ent.cache.Unlock()
	if ent.tokData == "" {
		ent.tokData, ent.tokBits = tok.Encode()
	}
	return ent.tokData, ent.tokBits
}

// rawDoc returns the entry's document encoded.
func (ent *oplogEntry) rawDoc() bson.Raw {
	ent.cache.Lock()
	defer ent.cache.Unlock()
	if ent.docRaw == nil && ent.doc != nil {
		ent.docRaw, _ = bson.Marshal(ent.doc)
	}
	return ent.docRaw
}

// rawPre returns the entry's pre-image encoded.
func (ent *oplogEntry) rawPre() bson.Raw {
	ent.cache.Lock()
	defer ent.cache.Unlock()
	if ent.preRaw == nil && ent.preImage != nil {
		ent.preRaw, _ = bson.Marshal(ent.preImage)
	}
	return ent.preRaw
}

// oplog is the in-memory replication log, bounded by entries, bytes and age.
type oplog struct {
	entries []*oplogEntry
	bytes   int64
	nextSeq int64
	trimmed bool
	// units counts the entries as a real server's oplog holds them: the
	// writes of one transaction (entries sharing its commit's cluster
	// time) are one applyOps entry there.
	units int
}

func (o *oplog) last() *oplogEntry {
	if len(o.entries) == 0 {
		return nil
	}
	return o.entries[len(o.entries)-1]
}

func (o *oplog) first() *oplogEntry {
	if len(o.entries) == 0 {
		return nil
	}
	return o.entries[0]
}

// indexOfSeq returns the slice index of the entry with sequence number seq,
// or the index where it would be.
func (o *oplog) indexOfSeq(seq int64) int {
	if len(o.entries) == 0 {
		return 0
	}
	i := seq - o.entries[0].seq
	if i < 0 {
		return 0
	}
	if i > int64(len(o.entries)) {
		return len(o.entries)
	}
	return int(i)
}

// seqAtOrAfter returns the sequence number of the first entry with ts >= t.
func (o *oplog) seqAtOrAfter(t bson.Timestamp) int64 {
	i := sort.Search(len(o.entries), func(i int) bool { return !tsLess(o.entries[i].ts, t) })
	if i == len(o.entries) {
		return o.nextSeq
	}
	return o.entries[i].seq
}

func tsLess(a, b bson.Timestamp) bool {
	if a.T != b.T {
		return a.T < b.T
	}
	return a.I < b.I
}

func tsCompare(a, b bson.Timestamp) int {
	switch {
	case tsLess(a, b):
		return -1
	case tsLess(b, a):
		return 1
	}
	return 0
}

// appendOplog stamps the entry with the next cluster time and wall time,
// appends it, trims the log to its bounds and wakes waiting change streams.
// Callers hold e.mu.
func (e *engine) appendOplog(ent *oplogEntry) {
	if e.curTxn != nil && e.divertOplog(ent) {
		return
	}
	now := e.nowLocked()
	ent.ts = e.nextTimestamp(now)
	ent.wall = bson.NewDateTimeFromTime(now)
	e.appendStamped(ent)
}

// appendStamped appends an entry whose ts and wall are already set (the
// writes of one transaction share a cluster time).
func (e *engine) appendStamped(ent *oplogEntry) {
	o := &e.oplog
	ent.seq = o.nextSeq
	if e.fromMigrate {
		ent.fromMigrate = true
	}
	o.nextSeq++
	if last := o.last(); last == nil || last.ts != ent.ts {
		o.units++
	}
	ent.size = approxSize(ent)
	o.entries = append(o.entries, ent)
	o.bytes += ent.size
	e.trimOplog()
	close(e.newEntry)
	e.newEntry = make(chan struct{})
}

func (e *engine) trimOplog() {
	o := &e.oplog
	drop := 0
	n := len(o.entries)
	var bytes = o.bytes
	minWall := bson.DateTime(0)
	if e.cfg.oplogMaxAge > 0 {
		minWall = bson.NewDateTimeFromTime(e.nowLocked().Add(-e.cfg.oplogMaxAge))
	}
	units := o.units
	for drop < n-1 {
		ent := o.entries[drop]
		over := units > e.cfg.oplogMaxEntries || bytes > e.cfg.oplogMaxBytes || (minWall != 0 && ent.wall < minWall)
		if !over {
			break
		}
		// A transaction's writes leave together, as its one applyOps
		// entry would; the newest entry always stays.
		end := drop + 1
		for end < n && o.entries[end].ts == ent.ts {
			end++
		}
		if end > n-1 {
			break
		}
		for ; drop < end; drop++ {
			bytes -= o.entries[drop].size
		}
		units--
	}
	o.units = units
	if drop == 0 {
		return
	}
	for i := 0; i < drop; i++ {
		o.entries[i] = nil
	}
	o.entries = o.entries[drop:]
	o.bytes = bytes
	o.trimmed = true
	// Release the backing array's dropped prefix from time to time.
	if cap(o.entries) > 2*len(o.entries)+1024 {
		o.entries = append([]*oplogEntry(nil), o.entries...)
	}
}

// approxSize estimates an entry's size for the byte bound.
func approxSize(ent *oplogEntry) int64 {
	n := int64(64 + len(ent.db) + len(ent.coll))
	for _, d := range []bson.D{ent.docKey, ent.doc, ent.preImage} {
		if d != nil {
			n += docSize(d)
		}
	}
	return n
}

// docSize estimates a document's BSON size without encoding it.
func docSize(d bson.D) int64 {
	n := int64(5)
	for _, e := range d {
		n += int64(len(e.Key)) + 2 + valueSize(e.Value)
	}
	return n
}

func valueSize(v any) int64 {
	switch x := v.(type) {
	case bson.D:
		return docSize(x)
	case bson.A:
		n := int64(5)
		for i, el := range x {
			n += 2 + int64(digits(i)) + valueSize(el)
		}
		return n
	case string:
		return int64(len(x)) + 5
	case bson.Binary:
		return int64(len(x.Data)) + 5
	case bson.Raw:
		return int64(len(x))
	case int32, bool:
		return 4
	case nil:
		return 0
	default:
		return 8
	}
}

func digits(i int) int {
	n := 1
	for i >= 10 {
		i /= 10
		n++
	}
	return n
}
