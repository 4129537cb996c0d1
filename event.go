package ferry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
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
	return &Event{
		OperationType: OperationBackfill, Namespace: ns, DocumentKey: key, FullDocument: doc, Raw: doc,
		Partition: partition, Epoch: epoch, Backfill: true,
		id: EventID(append(append(append([]byte(nil), marker...), ns.String()+"\x00"...), key...)),
	}, nil
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
// Raw; the handler must not modify the byte slices.
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
	// ScanStarted and ScanMarker are set on the backfill events of a scan
	// that runs while the stream is applied from its start marker (a
	// consumer with a sweeper): when the scan began (the server's clock)
	// and the marker's cluster time. Such an event must not overwrite what
	// a streamed event applied since the scan began put there (a change at
	// or after the marker is newer than the scanned document may be); the
	// mongodb projection guards its backfill writes so.
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
// (for a backfill event, of the backfill's start marker, namespace and
// documentKey). The same change has the same id whoever reads it and however
// often, so it serves as an idempotency key. It is computed on first use.
func (e *Event) ID() string {
	e.idOnce.Do(func() {
		if e.id == "" {
			e.id = EventID(e.Token)
		}
	})
	return e.id
}

// EventID returns the event id of a resume token: hex sha256 of its bytes.
func EventID(token bson.Raw) string {
	sum := sha256.Sum256(token)
	return hex.EncodeToString(sum[:])
}

// ParseEvent decodes a raw change event into an Event for partition and
// epoch. It reads change events only: a backfill event's Raw is the bare
// source document, which has no resume token. To rebuild the event of a
// dead-letter entry, of either kind, use DeadLetterEvent.
func ParseEvent(raw bson.Raw, partition int, epoch int64) (*Event, error) {
	return decodeEvent(raw, partition, epoch)
}

// decodeEvent builds an Event from a raw change event. The reader calls it
// for every event, so it walks the top-level elements once without
// allocating; nested values alias raw.
func decodeEvent(raw bson.Raw, partition int, epoch int64) (*Event, error) {
	ev := &Event{Raw: raw, Partition: partition, Epoch: epoch}
	doc := bsoncore.Document(raw)
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || int(length) != len(doc) || length < 5 {
		return nil, fmt.Errorf("ferry: malformed change event (%d bytes)", len(raw))
	}
	rem = rem[:len(rem)-1] // the document's final NUL
	for len(rem) > 0 {
		el, rest, ok := bsoncore.ReadElement(rem)
		if !ok {
			return nil, fmt.Errorf("ferry: malformed change event element")
		}
		rem = rest
		v := el.Value()
		switch el.Key() {
		case "_id":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("ferry: change event _id is a %s, not a resume token document", v.Type)
			}
			ev.Token = bson.Raw(d)
		case "operationType":
			ev.OperationType, _ = v.StringValueOK()
		case "ns":
			if d, ok := v.DocumentOK(); ok {
				if db, err := d.LookupErr("db"); err == nil {
					ev.Namespace.DB, _ = db.StringValueOK()
				}
				if coll, err := d.LookupErr("coll"); err == nil {
					ev.Namespace.Coll, _ = coll.StringValueOK()
				}
			}
		case "documentKey":
			if d, ok := v.DocumentOK(); ok {
				ev.DocumentKey = bson.Raw(d)
			}
		case "fullDocument":
			if d, ok := v.DocumentOK(); ok {
				ev.FullDocument = bson.Raw(d)
			}
		case "fullDocumentBeforeChange":
			if d, ok := v.DocumentOK(); ok {
				ev.FullDocumentBeforeChange = bson.Raw(d)
			}
		case "updateDescription":
			if d, ok := v.DocumentOK(); ok {
				ev.UpdateDescription = bson.Raw(d)
			}
		case "clusterTime":
			if t, i, ok := v.TimestampOK(); ok {
				ev.ClusterTime = bson.Timestamp{T: t, I: i}
			}
		case "wallTime":
			if dt, ok := v.DateTimeOK(); ok {
				ev.WallTime = time.UnixMilli(dt).UTC()
			}
		}
	}
	if ev.Token == nil {
		return nil, fmt.Errorf("ferry: change event has no _id (resume token)")
	}
	return ev, nil
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
