// Package deadletter keeps the events a Ferry consumer gave up on: each
// entry records the event (its raw change document), the last error, how
// many attempts were made and when, so an operator can list and replay it.
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

// Entry is one dead-lettered event.
type Entry struct {
	Stream    string    `bson:"stream"`
	Partition int       `bson:"partition"`
	EventID   string    `bson:"eventId"`
	Operation string    `bson:"operationType"`
	Namespace string    `bson:"ns"`
	Event     bson.Raw  `bson:"event"` // the change event as received
	Error     string    `bson:"error"`
	Attempts  int       `bson:"attempts"`
	FirstAt   time.Time `bson:"firstAttemptAt"`
	LastAt    time.Time `bson:"lastAttemptAt"`
	Epoch     int64     `bson:"epoch"`
}

// Store keeps dead-lettered events.
type Store interface {
	Put(ctx context.Context, e Entry) error
	List(ctx context.Context, stream string, limit int) ([]Entry, error)
	Delete(ctx context.Context, stream, eventID string) error
}

// Mongo stores entries in a MongoDB collection ("dlq" by default).
type Mongo struct{ coll *mongo.Collection }

// NewMongo returns a store on db.coll.
func NewMongo(db *mongo.Database, coll string) *Mongo {
	if coll == "" {
		coll = "dlq"
	}
	return &Mongo{coll: db.Collection(coll)}
}

func entryID(stream, eventID string) string { return stream + "/" + eventID }

// Put inserts or refreshes an entry.
func (m *Mongo) Put(ctx context.Context, e Entry) error {
	if e.Stream == "" || e.EventID == "" {
		return fmt.Errorf("deadletter: entry needs Stream and EventID")
	}
	var event any = e.Event
	if len(e.Event) == 0 {
		event = nil
	}
	_, err := m.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: entryID(e.Stream, e.EventID)}},
		bson.D{
			{Key: "$set", Value: bson.D{
				{Key: "stream", Value: e.Stream}, {Key: "partition", Value: e.Partition},
				{Key: "eventId", Value: e.EventID}, {Key: "operationType", Value: e.Operation},
				{Key: "ns", Value: e.Namespace}, {Key: "event", Value: event}, {Key: "error", Value: e.Error},
				{Key: "attempts", Value: e.Attempts}, {Key: "lastAttemptAt", Value: e.LastAt}, {Key: "epoch", Value: e.Epoch},
			}},
			{Key: "$setOnInsert", Value: bson.D{{Key: "firstAttemptAt", Value: e.FirstAt}}},
		}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("deadletter: put %s: %w", e.EventID, err)
	}
	return nil
}

// List returns up to limit entries of a stream (0: all), oldest first.
func (m *Mongo) List(ctx context.Context, stream string, limit int) ([]Entry, error) {
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
	res, err := m.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: entryID(stream, eventID)}})
	if err != nil {
		return fmt.Errorf("deadletter: delete: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}
