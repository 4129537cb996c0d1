// Package mongostore is a checkpoint.Store in a MongoDB collection
// ("checkpoints" in the state database by default), the default state store
// of Ferry.
//
// Layout: one document per (stream, partition):
//
//	{_id: "<stream>/<partition>", stream, partition, version, epoch,
//	 token: BinData(0, <raw token bytes>) | null, identity,
//	 definition: BinData(0, <raw BSON>) | null, clusterTime: Timestamp | null,
//	 pendingSince: Timestamp | null, readDelayMs: long,
//	 snapshot: BinData(0, <raw BSON>) | null, state, note, updatedAt: Date}
//
// The token, the definition and the snapshot progress record are binary so
// that they come back byte for byte; decode them with bson.Raw to read them
// in a shell. A document written before snapshot existed has no snapshot
// field and loads with Snapshot nil, one without readDelayMs with
// ReadDelay 0; the next Save adds them. The _id is
// unambiguous because the partition, after the last "/", has no "/".
//
// Snapshot requests (checkpoint.SnapshotRequests) are in a second
// collection of the same database ("snapshots" by default,
// SnapshotsCollection), one document per stream:
//
//	{_id: "<stream>", id: "<request id>", filter: BinData(0, <raw BSON>) | null,
//	 requested: Date, cancelled: bool, note}
//
// RequestSnapshot is one findAndModify upsert on _id ($set of every field,
// requested from $currentDate: the server's clock); SnapshotRequest is one
// find by _id (the _id index: cheap to poll); CancelSnapshot is one update
// matching _id and id. The filter is binary for the same reason as the
// token, and because older servers refuse $-prefixed field names in stored
// documents.
//
// Guarantees, beyond those of every checkpoint.Store:
//
//   - Save is one findAndModify: filter {_id, version: cp.Version, epoch:
//     {$lte: cp.Epoch}}, update $set + $currentDate, returning the new
//     document. The server applies it atomically to the one document; for
//     cp.Version 0 it is an upsert, and the duplicate-key error it gets when a
//     checkpoint already exists means fenced. UpdatedAt is the server's clock.
//   - Every method uses ctx as given: when ctx is a session context
//     (mongo.NewSessionContext) in a transaction, the Save is part of that
//     transaction, is visible only if it commits and vanishes if it aborts.
//     The store never starts sessions. Ferry's own transactional mode does
//     not put the checkpoint in its transaction: it writes it after the
//     commit (what the transaction holds is described once, in package
//     group's doc, "Transactional mode").
//   - In a transaction, a Save racing another transaction's write to the same
//     checkpoint may fail with WriteConflict (112, label
//     TransientTransactionError) instead of ErrFenced; the error is returned
//     unchanged inside the wrapping, so mongo.Session.WithTransaction retries,
//     and the retry is fenced. A duplicate-key error (a fenced first Save)
//     aborts the transaction on the server, so the *checkpoint.FenceError
//     then reports the stored version and epoch as -1 (unknown).
//   - Outside transactions the driver's retryable writes retry a Save after
//     a network error, and the server answers the retry with the first
//     attempt's result, so a blip does not turn a success into "fenced".
//   - New creates no collection or index and sends nothing (the server
//     creates a collection at its first write); List filters on the stream
//     field and sorts by partition, a scan of this (small) collection.
//   - The store never logs, and its errors never contain a token. A record
//     that cannot be decoded is a *checkpoint.CorruptError naming the
//     collection and _id (RecordName); Records lists a stream's records
//     whether or not they decode, and Overwrite and Remove replace or
//     delete one compare-and-set on the whole record as read, so a tool can
//     repair a record no Save or Delete can compare.
//
// New takes Options (Collection, SnapshotsCollection) in the style of package ferry: they only
// record values, New validates once and its error matches
// checkpoint.ErrInvalid and lists every problem, each naming its option.
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/internal/record"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// Store is a checkpoint.Store in a MongoDB collection. It is safe for
// concurrent use.
type Store struct {
	coll   *mongo.Collection
	snaps  *mongo.Collection
	closed atomic.Bool
}

var (
	_ checkpoint.Store            = (*Store)(nil)
	_ checkpoint.SnapshotRequests = (*Store)(nil)
)

// New returns a store in db. It does not contact the server.
func New(db *mongo.Database, opts ...Option) (*Store, error) {
	cfg := config{collection: DefaultCollection, snapshots: DefaultSnapshotsCollection}
	var p optcheck.Problems
	if db == nil {
		p.Add("db", "nil database: pass the database the checkpoints live in")
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(checkpoint.ErrInvalid); err != nil {
		return nil, err
	}
	return &Store{coll: db.Collection(cfg.collection), snaps: db.Collection(cfg.snapshots)}, nil
}

// Collection returns the collection the store writes.
func (s *Store) Collection() *mongo.Collection { return s.coll }

// Close marks the store closed; it does not disconnect the client. Later
// calls return nil.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// ID returns the _id of the document holding a partition's checkpoint.
func ID(stream string, partition int) string {
	return stream + "/" + strconv.Itoa(partition)
}

// RecordName is where a partition's checkpoint is kept, as messages name
// it: the collection and the _id, as in ferry.checkpoints _id "orders/0".
// It implements checkpoint.Locator.
func (s *Store) RecordName(stream string, partition int) string {
	return s.recordNameByID(ID(stream, partition))
}

func (s *Store) recordNameByID(id string) string {
	return fmt.Sprintf("%s.%s _id %q", s.coll.Database().Name(), s.coll.Name(), id)
}

func (s *Store) begin(ctx context.Context, op string) error {
	if s.closed.Load() {
		return fmt.Errorf("mongostore: %s: %w", op, checkpoint.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mongostore: %s: %w", op, err)
	}
	return nil
}

func notFound(stream string, partition int) error {
	return fmt.Errorf("%w: stream %q partition %d", checkpoint.ErrNotFound, stream, partition)
}

// Load implements checkpoint.Store.
func (s *Store) Load(ctx context.Context, stream string, partition int) (checkpoint.Checkpoint, error) {
	if err := checkpoint.ValidateKey(stream, partition); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.begin(ctx, "load"); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ID(stream, partition)}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return checkpoint.Checkpoint{}, notFound(stream, partition)
	}
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: load %q partition %d: %w", stream, partition, err)
	}
	cp, err := record.Decode(raw)
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: load %q partition %d: %w", stream, partition,
			record.Located(err, stream, partition, s.RecordName(stream, partition)))
	}
	return cp, nil
}

// Save implements checkpoint.Store.
func (s *Store) Save(ctx context.Context, cp checkpoint.Checkpoint) (checkpoint.Checkpoint, error) {
	if err := cp.Validate(); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.begin(ctx, "save"); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	filter := bson.D{
		{Key: "_id", Value: ID(cp.Stream, cp.Partition)},
		{Key: record.FVersion, Value: cp.Version},
		{Key: record.FEpoch, Value: bson.D{{Key: "$lte", Value: cp.Epoch}}},
	}
	update := bson.D{
		{Key: "$set", Value: record.Fields(cp, cp.Version+1)},
		{Key: "$currentDate", Value: bson.D{{Key: record.FUpdatedAt, Value: bson.D{{Key: "$type", Value: "date"}}}}},
	}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.After).SetUpsert(cp.Version == 0)
	raw, err := s.coll.FindOneAndUpdate(ctx, filter, update, opts).Raw()
	switch {
	case err == nil:
	case errors.Is(err, mongo.ErrNoDocuments), mongo.IsDuplicateKeyError(err):
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: %w", s.fence(ctx, cp))
	default:
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: save %q partition %d: %w", cp.Stream, cp.Partition, err)
	}
	saved, err := record.Decode(raw)
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: save %q partition %d: %w", cp.Stream, cp.Partition,
			record.Located(err, cp.Stream, cp.Partition, s.RecordName(cp.Stream, cp.Partition)))
	}
	return saved, nil
}

// fence builds the error of a lost Save, reading what is stored to say why.
func (s *Store) fence(ctx context.Context, cp checkpoint.Checkpoint) error {
	fe := &checkpoint.FenceError{
		Op: "save", Stream: cp.Stream, Partition: cp.Partition,
		Version: cp.Version, Epoch: cp.Epoch,
		StoredVersion: -1, StoredEpoch: -1,
	}
	version, epoch, err := s.stored(ctx, cp.Stream, cp.Partition)
	if err == nil {
		fe.StoredVersion, fe.StoredEpoch = version, epoch
	}
	return fe
}

// stored reads the version and epoch of a stored checkpoint: 0, 0 when
// there is none.
func (s *Store) stored(ctx context.Context, stream string, partition int) (version, epoch int64, err error) {
	opts := options.FindOne().SetProjection(bson.D{{Key: record.FVersion, Value: 1}, {Key: record.FEpoch, Value: 1}})
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ID(stream, partition)}}, opts).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	v, okV := raw.Lookup(record.FVersion).AsInt64OK()
	e, okE := raw.Lookup(record.FEpoch).AsInt64OK()
	if !okV || !okE {
		return 0, 0, &checkpoint.CorruptError{Stream: stream, Partition: partition, Record: s.RecordName(stream, partition),
			Problem: "its version or epoch is not an integer"}
	}
	return v, e, nil
}

// List implements checkpoint.Store.
func (s *Store) List(ctx context.Context, stream string) ([]checkpoint.Checkpoint, error) {
	if err := checkpoint.ValidateStream(stream); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, "list"); err != nil {
		return nil, err
	}
	opts := options.Find().SetSort(bson.D{{Key: record.FPartition, Value: 1}})
	cur, err := s.coll.Find(ctx, bson.D{{Key: record.FStream, Value: stream}}, opts)
	if err != nil {
		return nil, fmt.Errorf("mongostore: list %q: %w", stream, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := []checkpoint.Checkpoint{}
	for cur.Next(ctx) {
		cp, err := record.Decode(cur.Current)
		if err != nil {
			id, _ := cur.Current.Lookup("_id").StringValueOK()
			p := partitionOf(id, stream)
			return nil, fmt.Errorf("mongostore: list %q: %w", stream, record.Located(err, stream, p, s.recordNameByID(id)))
		}
		out = append(out, cp)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("mongostore: list %q: %w", stream, err)
	}
	return out, nil
}

// Delete implements checkpoint.Store.
func (s *Store) Delete(ctx context.Context, stream string, partition int, version int64) error {
	if err := checkpoint.ValidateKey(stream, partition); err != nil {
		return err
	}
	if version < 0 {
		return fmt.Errorf("%w: Version: %d is negative", checkpoint.ErrInvalid, version)
	}
	if err := s.begin(ctx, "delete"); err != nil {
		return err
	}
	res, err := s.coll.DeleteOne(ctx, bson.D{
		{Key: "_id", Value: ID(stream, partition)},
		{Key: record.FVersion, Value: version},
	})
	if err != nil {
		return fmt.Errorf("mongostore: delete %q partition %d: %w", stream, partition, err)
	}
	if res.DeletedCount == 1 {
		return nil
	}
	storedVersion, storedEpoch, err := s.stored(ctx, stream, partition)
	if err != nil {
		return fmt.Errorf("mongostore: delete %q partition %d: %w", stream, partition, err)
	}
	if storedVersion == 0 {
		return notFound(stream, partition)
	}
	return fmt.Errorf("mongostore: %w", &checkpoint.FenceError{
		Op: "delete", Stream: stream, Partition: partition, Version: version,
		StoredVersion: storedVersion, StoredEpoch: storedEpoch,
	})
}
