package mongostore

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/internal/record"
)

// SnapshotsCollection returns the collection of snapshot requests.
func (s *Store) SnapshotsCollection() *mongo.Collection { return s.snaps }

// RequestName is where a stream's snapshot request is kept, as messages
// name it: the collection and the _id, as in ferry.snapshots _id "orders".
func (s *Store) RequestName(stream string) string {
	return fmt.Sprintf("%s.%s _id %q", s.snaps.Database().Name(), s.snaps.Name(), stream)
}

// RequestSnapshot implements checkpoint.SnapshotRequests: one
// findAndModify upsert of the stream's document, every field $set and
// requested from $currentDate (the server's clock).
func (s *Store) RequestSnapshot(ctx context.Context, req checkpoint.SnapshotRequest) (checkpoint.SnapshotRequest, error) {
	if err := req.Validate(); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if err := s.begin(ctx, "request snapshot"); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if req.ID == "" {
		req.ID = record.NewRequestID()
	}
	update := bson.D{
		{Key: "$set", Value: record.RequestFields(req)},
		{Key: "$currentDate", Value: bson.D{{Key: record.RRequested, Value: bson.D{{Key: "$type", Value: "date"}}}}},
	}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	filter := bson.D{{Key: "_id", Value: req.Stream}}
	raw, err := s.snaps.FindOneAndUpdate(ctx, filter, update, opts).Raw()
	if mongo.IsDuplicateKeyError(err) {
		// Two upserts of a new stream's document raced and this one lost
		// the insert (servers before 4.2 do not retry it themselves): the
		// document exists now, so the update applies.
		raw, err = s.snaps.FindOneAndUpdate(ctx, filter, update, opts).Raw()
	}
	if err != nil {
		return checkpoint.SnapshotRequest{}, fmt.Errorf("mongostore: request snapshot of %q: %w", req.Stream, err)
	}
	stored, err := s.decodeRequest(req.Stream, raw)
	if err != nil {
		return checkpoint.SnapshotRequest{}, fmt.Errorf("mongostore: request snapshot of %q: %w", req.Stream, err)
	}
	return stored, nil
}

// SnapshotRequest implements checkpoint.SnapshotRequests: one find by _id.
func (s *Store) SnapshotRequest(ctx context.Context, stream string) (checkpoint.SnapshotRequest, error) {
	if err := checkpoint.ValidateStream(stream); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if err := s.begin(ctx, "snapshot request"); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	raw, err := s.snaps.FindOne(ctx, bson.D{{Key: "_id", Value: stream}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return checkpoint.SnapshotRequest{}, fmt.Errorf("%w: no snapshot request for stream %q", checkpoint.ErrNotFound, stream)
	}
	if err != nil {
		return checkpoint.SnapshotRequest{}, fmt.Errorf("mongostore: snapshot request of %q: %w", stream, err)
	}
	req, err := s.decodeRequest(stream, raw)
	if err != nil {
		return checkpoint.SnapshotRequest{}, fmt.Errorf("mongostore: snapshot request of %q: %w", stream, err)
	}
	return req, nil
}

// CancelSnapshot implements checkpoint.SnapshotRequests: one update of the
// stream's document, matched by _id and id.
func (s *Store) CancelSnapshot(ctx context.Context, stream, id string) error {
	if err := checkpoint.ValidateCancel(stream, id); err != nil {
		return err
	}
	if err := s.begin(ctx, "cancel snapshot"); err != nil {
		return err
	}
	res, err := s.snaps.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: stream}, {Key: record.RID, Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: record.RCancelled, Value: true}}}})
	if err != nil {
		return fmt.Errorf("mongostore: cancel snapshot %q of %q: %w", id, stream, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%w: snapshot request %q is not the current request of stream %q", checkpoint.ErrNotFound, id, stream)
	}
	return nil
}

func (s *Store) decodeRequest(stream string, raw bson.Raw) (checkpoint.SnapshotRequest, error) {
	req, err := record.DecodeRequest(stream, raw)
	var ce *checkpoint.CorruptError
	if errors.As(err, &ce) {
		ce.Record = s.RequestName(stream)
	}
	return req, err
}
