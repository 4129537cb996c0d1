// Package deadletter keeps the events a Ferry consumer gave up on: each
// entry records the event (its raw document), the last error, how many
// attempts were made and when, so an operator can list and replay it.
//
// An entry holds one of two kinds of event (Kind):
//
//   - KindChange: Event is the change event as the server sent it; its
//     _id is the resume token, from which the event id is derived.
//   - KindBackfill: Event is a source document a backfill scan read, handed
//     to the handler as operation "backfill". It has no resume token: its
//     event id (derived from the scan's start marker) is only in EventID,
//     and its namespace only in Namespace ("db.coll"). DocumentKey is
//     {_id: <the document's _id>}.
//
// ferry.DeadLetterEvent turns an entry back into the event the handler saw,
// with the same event id, for either kind. Entries written before Kind and
// DocumentKey were recorded have neither; Operation "backfill" then marks a
// backfill entry, and its DocumentKey is taken from the document's _id.
//
// Guarantees: Put is idempotent per (stream, event id) — putting the same
// event twice keeps one entry with the latest error and attempt count — so
// a consumer that crashes after dead-lettering and replays the event does
// not duplicate entries.
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ErrNotFound is returned when an entry does not exist.
var ErrNotFound = errors.New("deadletter: not found")

// Kinds of entries (Entry.Kind).
const (
	KindChange   = "change"   // Event is a change event; its _id is the resume token
	KindBackfill = "backfill" // Event is a document read by a backfill scan
)

// Entry is one dead-lettered event.
type Entry struct {
	Stream    string `bson:"stream"`
	Partition int    `bson:"partition"`
	// EventID is the event id the handler saw (ferry.Event.ID).
	EventID string `bson:"eventId"`
	// Kind is KindChange or KindBackfill; empty in entries written before
	// it was recorded (Operation "backfill" then means KindBackfill).
	Kind      string `bson:"kind,omitempty"`
	Operation string `bson:"operationType"`
	// Namespace is "db.coll" (or "db" for a database-level event). A
	// database name never contains a dot, so the first dot splits it.
	Namespace string `bson:"ns"`
	// DocumentKey is the event's documentKey; empty for control events and
	// in entries written before it was recorded.
	DocumentKey bson.Raw `bson:"documentKey,omitempty"`
	// Event is the change event as received (KindChange) or the scanned
	// document (KindBackfill).
	Event bson.Raw `bson:"event"`
	// ResumeAfter is the resume token after which a stream continues with
	// the change that followed this one (ferry position set
	// -token-from-dlq): the event's own token, or for a split event its
	// last fragment's. Empty for backfill events and in entries written
	// before it was recorded.
	ResumeAfter bson.Raw `bson:"resumeAfter,omitempty"`
	// Size is the event's size in bytes when Event was left out because
	// the event is too large to store (over MaxEventBytes); 0 otherwise.
	Size     int       `bson:"size,omitempty"`
	Error    string    `bson:"error"`
	Attempts int       `bson:"attempts"`
	FirstAt  time.Time `bson:"firstAttemptAt"`
	LastAt   time.Time `bson:"lastAttemptAt"`
	Epoch    int64     `bson:"epoch"`
	// TraceID is the trace id (32 hex digits) of the delivery that gave
	// up, when tracing was on: it joins the entry to the delivery's spans
	// and log lines. Empty otherwise.
	TraceID string `bson:"traceId,omitempty"`
}

// MaxEventBytes is the largest event an entry stores whole: an entry must
// fit a 16 MB document. A larger event's entry keeps its documentKey,
// operation and size, and no body (replaying it needs the source).
const MaxEventBytes = 15 << 20

// Store keeps dead-lettered events.
type Store interface {
	Put(ctx context.Context, e Entry) error
	List(ctx context.Context, stream string, limit int) ([]Entry, error)
	Delete(ctx context.Context, stream, eventID string) error
}

// Mongo stores entries in a MongoDB collection ("dlq" by default).
type Mongo struct{ coll *mongo.Collection }

// ErrNoDatabase is the error of every method of a Mongo made by NewMongo
// without a database.
var ErrNoDatabase = errors.New("deadletter: NewMongo was given a nil database; pass the state database (deadletter.NewMongo(client.Database(\"ferry\"), \"dlq\"))")

// NewMongo returns a store on db's collection coll ("" for "dlq").
//
// It is the one Ferry constructor outside the option style of package
// ferry ("Options"): it has nothing optional and nothing to check before
// it is used, so it takes its two arguments positionally, contacts
// nothing and returns no error. A nil db is reported by every method
// (ErrNoDatabase), not by a panic.
func NewMongo(db *mongo.Database, coll string) *Mongo {
	if coll == "" {
		coll = "dlq"
	}
	if db == nil {
		return &Mongo{}
	}
	return &Mongo{coll: db.Collection(coll)}
}

func entryID(stream, eventID string) string { return stream + "/" + eventID }

// Put inserts or refreshes an entry.
func (m *Mongo) Put(ctx context.Context, e Entry) error {
	if m.coll == nil {
		return ErrNoDatabase
	}
	if e.Stream == "" || e.EventID == "" {
		return fmt.Errorf("deadletter: entry needs Stream and EventID")
	}
	var event any = e.Event
	if len(e.Event) == 0 {
		event = nil
	}
	set := bson.D{
		{Key: "stream", Value: e.Stream}, {Key: "partition", Value: e.Partition},
		{Key: "eventId", Value: e.EventID}, {Key: "operationType", Value: e.Operation},
		{Key: "ns", Value: e.Namespace}, {Key: "event", Value: event}, {Key: "error", Value: e.Error},
		{Key: "attempts", Value: e.Attempts}, {Key: "lastAttemptAt", Value: e.LastAt}, {Key: "epoch", Value: e.Epoch},
	}
	// The optional fields are set when known and removed otherwise, so a
	// refreshed entry never keeps a stale value.
	var unset bson.D
	if e.Kind != "" {
		set = append(set, bson.E{Key: "kind", Value: e.Kind})
	} else {
		unset = append(unset, bson.E{Key: "kind", Value: ""})
	}
	if len(e.DocumentKey) > 0 {
		set = append(set, bson.E{Key: "documentKey", Value: e.DocumentKey})
	} else {
		unset = append(unset, bson.E{Key: "documentKey", Value: ""})
	}
	if e.TraceID != "" {
		set = append(set, bson.E{Key: "traceId", Value: e.TraceID})
	} else {
		unset = append(unset, bson.E{Key: "traceId", Value: ""})
	}
	update := bson.D{
		{Key: "$set", Value: set},
		{Key: "$setOnInsert", Value: bson.D{{Key: "firstAttemptAt", Value: e.FirstAt}}},
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	_, err := m.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: entryID(e.Stream, e.EventID)}}, update,
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("deadletter: put %s: %w", e.EventID, err)
	}
	return nil
}

// List returns up to limit entries of a stream (0: all), oldest first.
func (m *Mongo) List(ctx context.Context, stream string, limit int) ([]Entry, error) {
	if m.coll == nil {
		return nil, ErrNoDatabase
	}
	opts := options.Find().SetSort(bson.D{{Key: "firstAttemptAt", Value: 1}, {Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := m.coll.Find(ctx, bson.D{{Key: "stream", Value: stream}}, opts)
	if err != nil {
		return nil, fmt.Errorf("deadletter: list: %w", err)
	}
	var out []Entry
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("deadletter: list: %w", err)
	}
	return out, nil
}

// Delete removes one entry.
func (m *Mongo) Delete(ctx context.Context, stream, eventID string) error {
	if m.coll == nil {
		return ErrNoDatabase
	}
	res, err := m.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: entryID(stream, eventID)}})
	if err != nil {
		return fmt.Errorf("deadletter: delete: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}
