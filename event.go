package ferry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// OperationBackfill is the OperationType of a backfill event.
const OperationBackfill = "backfill"

// newBackfillEvent is the event for document doc of namespace ns, read by
// the backfill whose start marker is marker. It has no resume token: its
// Raw and FullDocument are the document itself, its DocumentKey is the
// one a change of the document carries (backfillKey: {_id: doc._id}, with
// the shard key's fields first on a sharded collection, shardKey non-nil),
// and its id is the hex sha256 of marker, ns + NUL and the documentKey, so
// one scan hands each document over under one id.
func newBackfillEvent(ns Namespace, doc, marker bson.Raw, partition int, epoch int64, shardKey bson.Raw) (*Event, error) {
	key, err := backfillKey(doc, shardKey)
	if err != nil {
		return nil, err
	}
	ev := &Event{}
	ev.initBackfill(ns, doc, key, marker, partition, epoch)
	return ev, nil
}

// initBackfill makes the zero Event ev the backfill event of doc, whose
// documentKey is key (backfillKey).
func (ev *Event) initBackfill(ns Namespace, doc, key, marker bson.Raw, partition int, epoch int64) {
	ev.OperationType, ev.Namespace, ev.DocumentKey, ev.FullDocument, ev.Raw = OperationBackfill, ns, key, doc, doc
	ev.Partition, ev.Epoch, ev.Backfill = partition, epoch, true
	ev.marker = marker // the id is computed on first use (ID)
}

// backfillID is the id of a backfill event: the hex sha256 of marker, ns
// + NUL and key.
func backfillID(marker []byte, ns Namespace, key bson.Raw) string {
	h := sha256.New()
	h.Write(marker)
	h.Write([]byte(ns.DB))
	if ns.Coll != "" {
		h.Write([]byte{'.'})
		h.Write([]byte(ns.Coll))
	}
	h.Write([]byte{0})
	h.Write(key)
	var sum [sha256.Size]byte
	var id [2 * sha256.Size]byte
	hex.Encode(id[:], h.Sum(sum[:0]))
	return string(id[:])
}

// DocumentKeyOf returns the documentKey the server gives a change of doc
// (a snapshot row carries the same): on a collection sharded on shardKey
// (its key pattern, as config.collections holds it; ShardKeyOf) the shard
// key's fields in order, each named by its path as written ("a.b") and
// left out when the document has no value there, then _id unless the
// shard key has it; with a nil shardKey (an unsharded collection),
// {_id: doc._id}.
func DocumentKeyOf(doc, shardKey bson.Raw) (bson.Raw, error) { return backfillKey(doc, shardKey) }

// ShardKeyOf returns the shard key pattern of collection ns, read from
// config.collections (through a mongos): nil, and no error, when ns is not
// sharded or the deployment is a replica set (which has no such
// collection).
func ShardKeyOf(ctx context.Context, client *mongo.Client, ns Namespace) (bson.Raw, error) {
	var coll struct {
		Key bson.Raw `bson:"key"`
	}
	err := client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns.String()}}).Decode(&coll)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ferry: read the shard key of %s from config.collections: %w", ns, err)
	}
	return coll.Key, nil
}

// idKeySize is the size of the documentKey {_id: id}.
func idKeySize(id bson.RawValue) int { return 4 + 1 + len("_id") + 1 + len(id.Value) + 1 }

// appendIDKey appends the documentKey {_id: id} to dst and returns dst and
// the key (a full slice of dst's new bytes).
func appendIDKey(dst []byte, id bson.RawValue) ([]byte, bson.Raw) {
	n := idKeySize(id)
	at := len(dst)
	dst = bsoncore.AppendInt32(dst, int32(n))
	dst = append(dst, byte(id.Type))
	dst = append(dst, "_id\x00"...)
	dst = append(dst, id.Value...)
	dst = append(dst, 0)
	return dst, bson.Raw(dst[at:len(dst):len(dst)])
}

// backfillKey is the documentKey of a scanned document as the server
// builds a change's: on a sharded collection (shardKey, its key pattern)
// the shard key's fields in order, each named by its path as written
// ("a.b") and left out when the document has no value there, then _id
// unless the shard key has it; otherwise {_id: doc._id}.
func backfillKey(doc, shardKey bson.Raw) (bson.Raw, error) {
	id, err := doc.LookupErr("_id")
	if err != nil {
		return nil, fmt.Errorf("document has no _id: %w", err)
	}
	if shardKey == nil {
		// {_id: <id>}, built in place: one allocation per row.
		_, key := appendIDKey(make([]byte, 0, idKeySize(id)), id)
		return key, nil
	}
	var key bson.D
	hasID := false
	if shardKey != nil {
		elems, err := shardKey.Elements()
		if err != nil {
			return nil, fmt.Errorf("the collection's shard key: %w", err)
		}
		for _, e := range elems {
			path := e.Key()
			hasID = hasID || path == "_id"
			if v, err := doc.LookupErr(strings.Split(path, ".")...); err == nil {
				key = append(key, bson.E{Key: path, Value: v})
			}
		}
	}
	if !hasID {
		key = append(key, bson.E{Key: "_id", Value: id})
	}
	return bson.Marshal(key)
}

// Namespace is a database and collection.
type Namespace struct{ DB, Coll string }

func (n Namespace) String() string {
	if n.Coll == "" {
		return n.DB
	}
	return n.DB + "." + n.Coll
}

// Event is one change handed to the handler. Its fields are decoded from
// Raw; the handler must not modify the byte slices. They alias the
// server's reply the event came in (see CopyEvents): a handler that keeps
// an event past its call should copy what it keeps.
type Event struct {
	// Token is the event's resume token (its _id), opaque; nil for a
	// backfill event.
	Token bson.Raw
	// OperationType is insert, update, replace, delete, drop, rename,
	// dropDatabase, ... or "backfill" (OperationBackfill) for documents
	// handed over by a backfill scan.
	OperationType            string
	Namespace                Namespace
	DocumentKey              bson.Raw
	FullDocument             bson.Raw
	FullDocumentBeforeChange bson.Raw
	UpdateDescription        bson.Raw
	ClusterTime              bson.Timestamp
	WallTime                 time.Time
	// Raw is the whole change event as the server sent it; for a backfill
	// event, the scanned document (also FullDocument), whose DocumentKey is
	// {_id: document._id}.
	Raw bson.Raw
	// Partition and Epoch identify the lease the event is applied under.
	Partition int
	Epoch     int64
	// Backfill is set for documents handed over by a backfill scan.
	Backfill bool
	// ScanStarted and ScanMarker are set on a snapshot's rows: when the
	// snapshot began (the server's clock) and the cluster time its chunk
	// was read at (also ClusterTime). Rows are dispatched in order with
	// the stream's events of the same document, so a row never follows a
	// newer change; a sink that applies events out of order can still
	// keep a change at or after ScanMarker, written since ScanStarted,
	// over the row, as the mongodb projection does.
	ScanStarted time.Time
	ScanMarker  bson.Timestamp
	// ImagesDropped is set on an event the server could not return whole
	// even split (a top-level field over 16 MB) and that OnOversize
	// OversizeDropImages delivers without its fullDocument and
	// fullDocumentBeforeChange.
	ImagesDropped bool
	// Attempt counts handler calls for this event, from 1.
	Attempt int

	// laneIdx is the index of the lane that delivers the event (Lane).
	laneIdx int

	idOnce sync.Once
	id     string
	// marker is a backfill event's snapshot chunk marker, from which ID
	// computes its id (backfillID).
	marker []byte
	// traceParent is the traceparent of the read batch the event came in
	// (HookRead), "" when none.
	traceParent string
	// deliveryTP is the traceparent of its current handler call's
	// delivery (HookDelivery), "" when none: DeliveryTraceParent.
	deliveryTP string
}

// Lane returns the index of the lane that delivers the event, from 0 to
// Concurrency-1: a lane delivers its events one after the other, and the
// events of one document always share a lane. A handler that keeps state
// per call in flight (group's transactional fencing keeps a fence document
// per lane) can key it by the lane without two calls contending for it.
func (e *Event) Lane() int { return e.laneIdx }

// ID returns the event id: the hex sha256 of the resume token's bytes
// (for a snapshot row, a backfill event, of the snapshot's id, its chunk's
// read time, the namespace and the documentKey). The same change has the same id whoever reads it and however
// often, so it serves as an idempotency key. It is computed on first use.
func (e *Event) ID() string {
	e.idOnce.Do(func() {
		switch {
		case e.id != "":
		case e.marker != nil:
			e.id = backfillID(e.marker, e.Namespace, e.DocumentKey)
		default:
			e.id = EventID(e.Token)
		}
	})
	return e.id
}

// EventID returns the event id of a resume token: hex sha256 of its bytes.
func EventID(token bson.Raw) string {
	sum := sha256.Sum256(token)
	var id [2 * sha256.Size]byte
	hex.Encode(id[:], sum[:])
	return string(id[:]) // one allocation: hex.EncodeToString makes two
}

// ParseEvent decodes a raw change event into an Event for partition and
// epoch. It reads change events only: a backfill event's Raw is the bare
// source document, which has no resume token. To rebuild the event of a
// dead-letter entry, of either kind, use DeadLetterEvent.
func ParseEvent(raw bson.Raw, partition int, epoch int64) (*Event, error) {
	return decodeEvent(raw, partition, epoch)
}

// decodeEvent builds an Event from a raw change event.
func decodeEvent(raw bson.Raw, partition int, epoch int64) (*Event, error) {
	ev := &Event{}
	if _, _, _, err := ev.decode(raw, partition, epoch, nil); err != nil {
		return nil, err
	}
	return ev, nil
}

// names keeps the strings of the namespace last decoded, so that a run of
// events of one collection shares them instead of allocating its own.
type names struct{ db, coll string }

// intern returns b as a string, the one in *last when it is equal.
func intern(last *string, b []byte) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// decode fills ev from a raw change event: the reader calls it for every
// event, so it walks the top-level elements once and allocates nothing of
// its own (nested values alias raw; the operation type and, with nm, the
// namespace are shared strings). When the event is a fragment of a split
// event (splitEvent {fragment, of}, see fragments) it reports so; ev then
// holds what that fragment carries.
func (ev *Event) decode(raw bson.Raw, partition int, epoch int64, nm *names) (fragment, of int32, split bool, _ error) {
	*ev = Event{Raw: raw, Partition: partition, Epoch: epoch}
	length, rem, ok := bsoncore.ReadLength(raw)
	if !ok || int(length) != len(raw) || length < 5 || raw[len(raw)-1] != 0 {
		return 0, 0, false, fmt.Errorf("ferry: malformed change event (%d bytes)", len(raw))
	}
	if nm == nil {
		nm = &names{}
	}
	rem = rem[:len(rem)-1] // the document's final NUL
	for len(rem) > 0 {
		t, key, val, rest, ok := nextElement(rem)
		if !ok {
			return 0, 0, false, fmt.Errorf("ferry: malformed change event element")
		}
		rem = rest
		switch string(key) {
		case "_id":
			if t != bsoncore.TypeEmbeddedDocument {
				return 0, 0, false, fmt.Errorf("ferry: change event _id is a %s, not a resume token document", t)
			}
			ev.Token = bson.Raw(val)
		case "operationType":
			if b, ok := stringBytes(t, val); ok {
				ev.OperationType = operationName(b)
			}
		case "ns":
			if t == bsoncore.TypeEmbeddedDocument {
				ev.Namespace = nm.namespace(val)
			}
		case "documentKey":
			if t == bsoncore.TypeEmbeddedDocument {
				ev.DocumentKey = bson.Raw(val)
			}
		case "fullDocument":
			if t == bsoncore.TypeEmbeddedDocument {
				ev.FullDocument = bson.Raw(val)
			}
		case "fullDocumentBeforeChange":
			if t == bsoncore.TypeEmbeddedDocument {
				ev.FullDocumentBeforeChange = bson.Raw(val)
			}
		case "updateDescription":
			if t == bsoncore.TypeEmbeddedDocument {
				ev.UpdateDescription = bson.Raw(val)
			}
		case "clusterTime":
			if t == bsoncore.TypeTimestamp {
				ev.ClusterTime = bson.Timestamp{T: le32(val[4:]), I: le32(val)}
			}
		case "wallTime":
			if t == bsoncore.TypeDateTime {
				ev.WallTime = time.UnixMilli(int64(uint64(le32(val)) | uint64(le32(val[4:]))<<32)).UTC()
			}
		case "splitEvent":
			fragment, of, split = splitOf(bsoncore.Value{Type: t, Data: val})
		}
	}
	if ev.Token == nil {
		return 0, 0, false, fmt.Errorf("ferry: change event has no _id (resume token)")
	}
	return fragment, of, split, nil
}

// namespace reads an event's ns document: {db, coll}.
func (nm *names) namespace(doc []byte) Namespace {
	var ns Namespace
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		t, key, val, rest, ok := nextElement(rem)
		if !ok {
			break
		}
		rem = rest
		b, isString := stringBytes(t, val)
		switch {
		case !isString:
		case string(key) == "db":
			ns.DB = intern(&nm.db, b)
		case string(key) == "coll":
			ns.Coll = intern(&nm.coll, b)
		}
	}
	return ns
}

// nextElement reads the BSON element b starts with: its type, key and
// value, and what follows it. ok is false when b does not hold a whole
// element.
func nextElement(b []byte) (t bsoncore.Type, key, val, rest []byte, ok bool) {
	if len(b) < 2 {
		return 0, nil, nil, nil, false
	}
	t = bsoncore.Type(b[0])
	k := bytes.IndexByte(b[1:], 0)
	if k < 0 {
		return 0, nil, nil, nil, false
	}
	key, b = b[1:1+k], b[2+k:]
	n := -1
	switch t {
	case bsoncore.TypeString, bsoncore.TypeJavaScript, bsoncore.TypeSymbol:
		if len(b) >= 4 {
			if l := int(int32(le32(b))); l >= 1 {
				n = 4 + l
			}
		}
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray, bsoncore.TypeCodeWithScope:
		if len(b) >= 4 {
			if l := int(int32(le32(b))); l >= 5 {
				n = l
			}
		}
	case bsoncore.TypeBinary:
		if len(b) >= 4 {
			if l := int(int32(le32(b))); l >= 0 {
				n = 5 + l
			}
		}
	case bsoncore.TypeDouble, bsoncore.TypeDateTime, bsoncore.TypeTimestamp, bsoncore.TypeInt64:
		n = 8
	case bsoncore.TypeInt32:
		n = 4
	case bsoncore.TypeBoolean:
		n = 1
	case bsoncore.TypeNull, bsoncore.TypeUndefined, bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		n = 0
	case bsoncore.TypeObjectID:
		n = 12
	case bsoncore.TypeDecimal128:
		n = 16
	default: // regex, DBPointer, or not a type
		v, _, ok := bsoncore.ReadValue(b, t)
		if ok {
			n = len(v.Data)
		}
	}
	if n < 0 || n > len(b) {
		return 0, nil, nil, nil, false
	}
	return t, key, b[:n], b[n:], true
}

// le32 reads a little-endian uint32.
func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// splitOf reads a splitEvent value: {fragment: i, of: n}, 1 ≤ i ≤ n.
func splitOf(v bsoncore.Value) (fragment, of int32, ok bool) {
	d, isDoc := v.DocumentOK()
	if !isDoc {
		return 0, 0, false
	}
	f, fok := d.Lookup("fragment").AsInt64OK()
	n, nok := d.Lookup("of").AsInt64OK()
	return int32(f), int32(n), fok && nok && f >= 1 && n >= f
}

// stringBytes returns the bytes of a BSON string value, aliasing it.
func stringBytes(t bsoncore.Type, v []byte) ([]byte, bool) {
	if t != bsoncore.TypeString || len(v) < 5 {
		return nil, false
	}
	n := int(int32(le32(v)))
	if n < 1 || 4+n != len(v) {
		return nil, false
	}
	return v[4 : 3+n], true // as the driver reads it: the NUL is not checked
}

// operationName returns the operation type b names, as a constant for the
// ones a stream carries, so that decoding allocates no string for it.
func operationName(b []byte) string {
	switch string(b) {
	case "insert":
		return "insert"
	case "update":
		return "update"
	case "replace":
		return "replace"
	case "delete":
		return "delete"
	case "drop":
		return "drop"
	case "rename":
		return "rename"
	case "dropDatabase":
		return "dropDatabase"
	case "invalidate":
		return "invalidate"
	case "create":
		return "create"
	case "createIndexes":
		return "createIndexes"
	case "dropIndexes":
		return "dropIndexes"
	case "modify":
		return "modify"
	case "shardCollection":
		return "shardCollection"
	}
	return string(b)
}

// shortID is an event id shortened for logs.
func shortID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// tokenData matches a resume token's _data as servers print it in error
// messages ({_data: "8263…"}, "_data":"8263…"): hex, usually hundreds of
// digits.
var tokenData = regexp.MustCompile(`(_data"?\s*:\s*"?)([0-9A-Fa-f]{12})[0-9A-Fa-f]{8,}`)

// RedactTokens shortens every resume token's _data in s to its first 12
// hex digits and "…": messages copied from the server into logs, failure
// records and dead letters never carry a token in full.
func RedactTokens(s string) string { return tokenData.ReplaceAllString(s, "${1}${2}…") }
