package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// FailuresCollection is the state database's collection of failed streams,
// one document per (stream, member):
//
//	{_id: "<stream>/<member>", stream, member, partition, class, message,
//	 clears, since, retryAt: date|null, updatedAt, expiresAt,
//	 recheckRequestedAt: date (only while a re-check is requested)}
//
// A failed member refreshes its document while it stays failed and
// deletes it when the stream recovers or the member stops; expiresAt
// (updatedAt plus three refresh periods, by the server's clock, with a TTL
// index) retires the document of a member that died failed. A tool that
// changed the stream's checkpoints (ferry position set, ferry reset) asks
// the failed members to re-check at once with RequestRecheck: each does at
// its next refresh, whether or not its failure can clear by itself.
const FailuresCollection = "failures"

// FailureRecord is a member's failed stream as recorded in the state store.
// Times are the server's clock.
type FailureRecord struct {
	Stream    string    `bson:"stream"`
	Member    string    `bson:"member"`
	Partition int       `bson:"partition"`
	Class     string    `bson:"class"`   // a ferry.FailureClass
	Message   string    `bson:"message"` // what happened (ferry.Failure.Detail)
	Clears    bool      `bson:"clears"`  // re-checked with backoff; false: stays failed until the configuration changes
	Since     time.Time `bson:"since"`
	RetryAt   time.Time `bson:"retryAt"` // next re-check (zero when Clears is false)
	UpdatedAt time.Time `bson:"updatedAt"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// Failures returns the live failure records of a stream (expiresAt not
// passed by the server's clock), ordered by member.
func Failures(ctx context.Context, state *mongo.Database, stream string) ([]FailureRecord, error) {
	pipe := mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "stream", Value: stream}}}},
		{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$expiresAt", "$$NOW"}}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "member", Value: 1}}}},
	}
	cur, err := state.Collection(FailuresCollection).Aggregate(ctx, pipe)
	if err != nil {
		return nil, fmt.Errorf("group: read the failures of %s: %w", stream, err)
	}
	var out []FailureRecord
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("group: read the failures of %s: %w", stream, err)
	}
	return out, nil
}

// RequestRecheck asks every failed member of stream to re-check the
// stream at its next refresh of its failure record (at most 10 s later),
// as if its re-check time had come: for after the stream's checkpoints
// were changed from outside (a position set, a reset), which can end a
// failure that does not clear by itself. It returns how many failed
// members were asked.
func RequestRecheck(ctx context.Context, state *mongo.Database, stream string) (int, error) {
	res, err := state.Collection(FailuresCollection).UpdateMany(ctx, bson.D{{Key: "stream", Value: stream}},
		mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "recheckRequestedAt", Value: "$$NOW"}}}}})
	if err != nil {
		return 0, fmt.Errorf("group: ask the failed members of %s to re-check: %w", stream, err)
	}
	return int(res.ModifiedCount), nil
}

// failureRecords writes this member's failure record.
type failureRecords struct {
	coll    *mongo.Collection
	stream  string
	member  string
	refresh time.Duration // how often a failed member rewrites its record
}

func (f *failureRecords) id() string { return f.stream + "/" + f.member }

// ensureIndex creates the TTL index on expiresAt (idempotent).
func (f *failureRecords) ensureIndex(ctx context.Context) error {
	_, err := f.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "expiresAt", Value: 1}},
		Options: options.Index().SetName("expiresAt_ttl").SetExpireAfterSeconds(0),
	})
	return err
}

// put writes (or refreshes) the record of a failed stream. It reports
// whether a re-check was requested (RequestRecheck) since the last put,
// and clears the request.
func (f *failureRecords) put(ctx context.Context, s Status) (recheck bool, err error) {
	if s.Failure == nil {
		return false, nil
	}
	var retryAt any
	if !s.RetryAt.IsZero() {
		retryAt = s.RetryAt
	}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "stream", Value: f.stream},
		{Key: "member", Value: f.member},
		{Key: "partition", Value: s.FailedPartition},
		{Key: "class", Value: string(s.Failure.Class)},
		{Key: "message", Value: s.Failure.Detail},
		{Key: "clears", Value: s.Failure.Clears},
		{Key: "since", Value: s.FailedSince},
		{Key: "retryAt", Value: bson.D{{Key: "$literal", Value: retryAt}}},
		{Key: "updatedAt", Value: "$$NOW"},
		{Key: "expiresAt", Value: bson.D{{Key: "$add", Value: bson.A{"$$NOW", (3 * f.refresh).Milliseconds()}}}},
		{Key: "recheckRequestedAt", Value: "$$REMOVE"},
	}}}}
	var before struct {
		RequestedAt time.Time `bson:"recheckRequestedAt"`
	}
	err = f.coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: f.id()}}, update, options.FindOneAndUpdate().
		SetUpsert(true).SetReturnDocument(options.Before).SetProjection(bson.D{{Key: "recheckRequestedAt", Value: 1}})).Decode(&before)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil // a new record
	}
	return !before.RequestedAt.IsZero(), err
}

// clear deletes the record.
func (f *failureRecords) clear(ctx context.Context) error {
	_, err := f.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: f.id()}})
	return err
}
