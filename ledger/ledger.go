package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/mongoerr"
)

var (
	// ErrInvalid marks a bad argument or option.
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrNotFound is returned by Get when the ledger holds no entry.
	ErrNotFound = errors.New("ledger: no entry")
)

// Field names of an entry document.
const (
	fStream    = "stream"
	fEvent     = "event"
	fPartition = "partition"
	fEpoch     = "epoch"
	fAppliedAt = "appliedAt"
)

// IndexName is the name of the TTL index New ensures on appliedAt.
const IndexName = fAppliedAt + "_1"

// Store is the ledger of one state database. It is safe for concurrent use.
// Every method uses ctx as given: with a session context in a transaction
// (mongo.NewSessionContext, RunTransaction), its reads and writes belong to
// that transaction. The store never starts sessions or transactions.
type Store struct {
	coll      *mongo.Collection
	retention time.Duration
}

// Entry is one applied event.
type Entry struct {
	Stream    string
	EventID   string
	Partition int
	Epoch     int64
	// AppliedAt is the server's clock when the entry was first written;
	// the entry expires Retention later.
	AppliedAt time.Time
}

// New returns the ledger in db and ensures its TTL index, {appliedAt: 1}
// named IndexName with expireAfterSeconds = the retention. When the index
// exists with another expireAfterSeconds, New changes it with collMod: the
// retention is a property of the collection, and the last New wins.
func New(ctx context.Context, db *mongo.Database, opts ...Option) (*Store, error) {
	cfg := config{collection: DefaultCollection, retention: DefaultRetention}
	var p optcheck.Problems
	if db == nil {
		p.Add("db", "nil database: pass the database the ledger lives in")
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalid); err != nil {
		return nil, err
	}
	s := &Store{coll: db.Collection(cfg.collection), retention: cfg.retention}
	if err := s.ensureIndex(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) ensureIndex(ctx context.Context) error {
	secs := expireAfterSeconds(s.retention)
	keys := bson.D{{Key: fAppliedAt, Value: 1}}
	_, err := s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    keys,
		Options: options.Index().SetName(IndexName).SetExpireAfterSeconds(secs),
	})
	// IndexOptionsConflict: the index's key exists with other options
	// (another expireAfterSeconds, or another name).
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(mongoerr.CodeIndexOptionsConflict) {
		err = s.coll.Database().RunCommand(ctx, bson.D{
			{Key: "collMod", Value: s.coll.Name()},
			{Key: "index", Value: bson.D{{Key: "keyPattern", Value: keys}, {Key: "expireAfterSeconds", Value: secs}}},
		}).Err()
	}
	if err != nil {
		return fmt.Errorf("ledger: ensure the TTL index on %s.%s: %w", s.coll.Database().Name(), s.coll.Name(), err)
	}
	return nil
}

// Collection returns the collection holding the entries.
func (s *Store) Collection() *mongo.Collection { return s.coll }

// Retention returns how long an entry lives.
func (s *Store) Retention() time.Duration { return s.retention }

// ID returns the _id of an entry: stream + "/" + eventID. It is unambiguous
// because an event id contains no "/".
func ID(stream, eventID string) string { return stream + "/" + eventID }

// entryDoc encodes an entry for RecordMany directly (the driver would
// encode a bson.D by reflection, once per entry of every batch).
func entryDoc(id, stream, event string, partition, epoch int64, at bson.DateTime) bson.Raw {
	b := make([]byte, 0, 96+len(id)+len(stream)+len(event))
	i, b := bsoncore.ReserveLength(b)
	b = bsoncore.AppendStringElement(b, "_id", id)
	b = bsoncore.AppendStringElement(b, fStream, stream)
	b = bsoncore.AppendStringElement(b, fEvent, event)
	b = bsoncore.AppendInt64Element(b, fPartition, partition)
	b = bsoncore.AppendInt64Element(b, fEpoch, epoch)
	b = bsoncore.AppendDateTimeElement(b, fAppliedAt, int64(at))
	b = append(b, 0)
	return bson.Raw(bsoncore.UpdateLength(b, i, int32(len(b[i:]))))
}

func validString(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s: empty", ErrInvalid, field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s: not valid UTF-8", ErrInvalid, field)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s: contains a NUL byte", ErrInvalid, field)
	}
	return nil
}

func validKey(stream, eventID string) error {
	if err := validString("stream", stream); err != nil {
		return err
	}
	if err := validString("event id", eventID); err != nil {
		return err
	}
	if strings.IndexByte(eventID, '/') >= 0 {
		return fmt.Errorf("%w: event id %q contains '/'", ErrInvalid, eventID)
	}
	return nil
}

// short shortens an event id for error messages.
func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// Seen reports whether the ledger holds the event. In a transaction it
// reads the transaction's snapshot (and its own writes).
func (s *Store) Seen(ctx context.Context, stream, eventID string) (bool, error) {
	if err := validKey(stream, eventID); err != nil {
		return false, err
	}
	opts := options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ID(stream, eventID)}}, opts).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, nil
	}
	return false, fmt.Errorf("ledger: seen %q %s: %w", stream, short(eventID), err)
}

// SeenMany reports which of the events the ledger holds: one find with
// $in per 1,000 ids. The result holds every id of ids, true when recorded.
func (s *Store) SeenMany(ctx context.Context, stream string, eventIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(eventIDs))
	const batch = 1000
	for start := 0; start < len(eventIDs); start += batch {
		chunk := eventIDs[start:min(start+batch, len(eventIDs))]
		keys := make(bson.A, 0, len(chunk))
		for _, id := range chunk {
			if err := validKey(stream, id); err != nil {
				return nil, err
			}
			out[id] = false
			keys = append(keys, ID(stream, id))
		}
		// One round trip: the whole answer in the first batch.
		cur, err := s.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}},
			options.Find().SetProjection(bson.D{{Key: fEvent, Value: 1}}).SetBatchSize(int32(len(chunk))))
		if err != nil {
			return nil, fmt.Errorf("ledger: seen %q (%d events): %w", stream, len(chunk), err)
		}
		var docs []struct {
			Event string `bson:"event"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("ledger: seen %q (%d events): %w", stream, len(chunk), err)
		}
		for _, d := range docs {
			out[d.Event] = true
		}
	}
	return out, nil
}

// Record writes the event's entry unless it is there already; recording an
// event twice is not an error, and the first entry (its appliedAt, epoch and
// partition) is kept.
func (s *Store) Record(ctx context.Context, stream, eventID string, partition int, epoch int64) error {
	_, err := s.RecordNew(ctx, stream, eventID, partition, epoch)
	return err
}

// RecordNew writes the event's entry and reports whether this call inserted
// it: false, with a nil error, when the ledger already held it.
//
// It is one upsert by _id whose pipeline keeps every stored field and sets
// appliedAt to $$NOW only on insert, so a duplicate is a no-op that writes
// nothing. In a transaction this matters: the duplicate leaves the
// transaction open (the caller decides what to commit), and takes no write
// lock on the entry. An entry committed by another transaction after this
// transaction's snapshot, or still uncommitted, makes RecordNew fail with
// WriteConflict (112, TransientTransactionError); the retried transaction
// then sees the entry and gets false.
func (s *Store) RecordNew(ctx context.Context, stream, eventID string, partition int, epoch int64) (inserted bool, err error) {
	if err := validKey(stream, eventID); err != nil {
		return false, err
	}
	if partition < 0 {
		return false, fmt.Errorf("%w: partition %d is negative", ErrInvalid, partition)
	}
	if epoch < 0 {
		return false, fmt.Errorf("%w: epoch %d is negative", ErrInvalid, epoch)
	}
	keep := func(field string, v any) bson.E {
		return bson.E{Key: field, Value: bson.D{{Key: "$ifNull", Value: bson.A{"$" + field, v}}}}
	}
	literal := func(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		keep(fStream, literal(stream)),
		keep(fEvent, literal(eventID)),
		keep(fPartition, literal(int64(partition))),
		keep(fEpoch, literal(epoch)),
		keep(fAppliedAt, "$$NOW"),
	}}}}
	res, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: ID(stream, eventID)}}, update, options.UpdateOne().SetUpsert(true))
	switch {
	case err == nil:
		return res.UpsertedCount == 1, nil
	case mongoerr.IsDuplicateKey(err):
		// Outside a transaction, a concurrent upsert of the same entry
		// won the insert (servers before 4.2 do not retry it themselves).
		return false, nil
	}
	return false, fmt.Errorf("ledger: record %q %s: %w", stream, short(eventID), err)
}

// RecordMany writes the entries of events applied together, in one
// unordered insertMany (which the driver splits only past the server's
// batch limits): an entry already there is a duplicate key, which means
// "already recorded" and is not an error; the first entry is kept. An id
// given twice is written once.
//
// Unlike Record, which stamps appliedAt with the server's $$NOW, an
// insert cannot run an expression: RecordMany stamps appliedAt with this
// process's clock, so the entries' expiry (Retention later) moves by the
// clock's skew from the server's.
//
// In a transaction a duplicate key aborts the whole transaction on the
// server: there, record only ids that SeenMany, in the same transaction,
// reported absent. An entry another transaction committed since this
// transaction's snapshot (or has not committed yet) then fails the insert
// with WriteConflict (TransientTransactionError): the retried transaction
// sees it.
func (s *Store) RecordMany(ctx context.Context, stream string, eventIDs []string, partition int, epoch int64) error {
	if partition < 0 {
		return fmt.Errorf("%w: partition %d is negative", ErrInvalid, partition)
	}
	if epoch < 0 {
		return fmt.Errorf("%w: epoch %d is negative", ErrInvalid, epoch)
	}
	now := bson.NewDateTimeFromTime(time.Now())
	docs := make([]any, 0, len(eventIDs))
	seen := make(map[string]bool, len(eventIDs))
	for _, id := range eventIDs {
		if err := validKey(stream, id); err != nil {
			return err
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		docs = append(docs, entryDoc(ID(stream, id), stream, id, int64(partition), epoch, now))
	}
	if len(docs) == 0 {
		return nil
	}
	_, err := s.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return nil
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
		for _, we := range bwe.WriteErrors {
			if !mongoerr.IsDuplicateKey(we) {
				return fmt.Errorf("ledger: record %q (%d events): %w", stream, len(docs), err)
			}
		}
		return nil // every failure is an entry recorded before
	}
	return fmt.Errorf("ledger: record %q (%d events): %w", stream, len(docs), err)
}

// Get returns the event's entry, or an error matching ErrNotFound.
func (s *Store) Get(ctx context.Context, stream, eventID string) (Entry, error) {
	if err := validKey(stream, eventID); err != nil {
		return Entry{}, err
	}
	var doc struct {
		Stream    string        `bson:"stream"`
		Event     string        `bson:"event"`
		Partition int64         `bson:"partition"`
		Epoch     int64         `bson:"epoch"`
		AppliedAt bson.DateTime `bson:"appliedAt"`
	}
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ID(stream, eventID)}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Entry{}, fmt.Errorf("%w: stream %q event %s", ErrNotFound, stream, short(eventID))
	}
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: get %q %s: %w", stream, short(eventID), err)
	}
	return Entry{
		Stream: doc.Stream, EventID: doc.Event, Partition: int(doc.Partition),
		Epoch: doc.Epoch, AppliedAt: doc.AppliedAt.Time().UTC(),
	}, nil
}

// Forget removes the event's entry, so that the event is applied again if
// it is replayed. Forgetting an absent entry is not an error. Meant for
// tests and operators.
func (s *Store) Forget(ctx context.Context, stream, eventID string) error {
	if err := validKey(stream, eventID); err != nil {
		return err
	}
	if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: ID(stream, eventID)}}); err != nil {
		return fmt.Errorf("ledger: forget %q %s: %w", stream, short(eventID), err)
	}
	return nil
}

// Count returns the number of entries of a stream. It reads the range of
// _id values starting with stream + "/" (the _id index) and checks the
// stream field, since a longer stream name may share the prefix.
func (s *Store) Count(ctx context.Context, stream string) (int64, error) {
	if err := validString("stream", stream); err != nil {
		return 0, err
	}
	// '0' is the byte after '/': the range holds exactly the _ids
	// starting with stream + "/".
	filter := bson.D{
		{Key: "_id", Value: bson.D{{Key: "$gte", Value: stream + "/"}, {Key: "$lt", Value: stream + "0"}}},
		{Key: fStream, Value: stream},
	}
	n, err := s.coll.CountDocuments(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("ledger: count %q: %w", stream, err)
	}
	return n, nil
}
