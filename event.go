package ferry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

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
	// ID is the event id: the hex sha256 of the resume token's bytes. The
	// same change has the same id whoever reads it and however often, so
	// it serves as an idempotency key.
	ID string
	// Token is the event's resume token (its _id), opaque.
	Token bson.Raw
	// OperationType is insert, update, replace, delete, drop, rename,
	// dropDatabase, ... or "backfill" for documents handed over by a
	// backfill scan.
	OperationType            string
	Namespace                Namespace
	DocumentKey              bson.Raw
	FullDocument             bson.Raw
	FullDocumentBeforeChange bson.Raw
	UpdateDescription        bson.Raw
	ClusterTime              bson.Timestamp
	WallTime                 time.Time
	// Raw is the whole change event as the server sent it.
	Raw bson.Raw
	// Partition and Epoch identify the lease the event is applied under.
	Partition int
	Epoch     int64
	// Backfill is set for documents handed over by a backfill scan.
	Backfill bool
	// Attempt counts handler calls for this event, from 1.
	Attempt int
}

// EventID returns the event id of a resume token: hex sha256 of its bytes.
func EventID(token bson.Raw) string {
	sum := sha256.Sum256(token)
	return hex.EncodeToString(sum[:])
}

// decodeEvent builds an Event from a raw change event.
func decodeEvent(raw bson.Raw, partition int, epoch int64) (*Event, error) {
	ev := &Event{Raw: raw, Partition: partition, Epoch: epoch}
	elems, err := raw.Elements()
	if err != nil {
		return nil, fmt.Errorf("ferry: malformed change event: %w", err)
	}
	for _, el := range elems {
		v := el.Value()
		switch el.Key() {
		case "_id":
			doc, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("ferry: change event _id is a %s, not a resume token document", v.Type)
			}
			ev.Token = doc
		case "operationType":
			ev.OperationType, _ = v.StringValueOK()
		case "ns":
			if doc, ok := v.DocumentOK(); ok {
				if db, err := doc.LookupErr("db"); err == nil {
					ev.Namespace.DB, _ = db.StringValueOK()
				}
				if coll, err := doc.LookupErr("coll"); err == nil {
					ev.Namespace.Coll, _ = coll.StringValueOK()
				}
			}
		case "documentKey":
			ev.DocumentKey, _ = v.DocumentOK()
		case "fullDocument":
			ev.FullDocument, _ = v.DocumentOK()
		case "fullDocumentBeforeChange":
			ev.FullDocumentBeforeChange, _ = v.DocumentOK()
		case "updateDescription":
			ev.UpdateDescription, _ = v.DocumentOK()
		case "clusterTime":
			t, i, ok := v.TimestampOK()
			if ok {
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
	ev.ID = EventID(ev.Token)
	return ev, nil
}

// shortID is an event id shortened for logs.
func shortID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
