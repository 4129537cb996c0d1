package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/internal/record"
)

// Record is one stored checkpoint document as read, whether or not it can
// be decoded: what tools list, and overwrite or remove, when a record is
// damaged (ferry status, position show, position set, reset).
type Record struct {
	// ID is the document's _id ("<stream>/<partition>") and Partition the
	// partition it names.
	ID        string
	Partition int
	// Checkpoint is the decoded record, when Corrupt is nil.
	Checkpoint checkpoint.Checkpoint
	// Corrupt says why the record cannot be decoded (nil: it can), naming
	// it by collection and _id.
	Corrupt *checkpoint.CorruptError
	// Version and Epoch are the stored compare-and-set state, where it is
	// readable (0 where it is not): of a corrupt record too.
	Version, Epoch int64

	raw bson.Raw
}

// Records returns every record of a stream, ordered by partition: those
// that decode, and those that do not (Corrupt set), found by their _id
// ("<stream>/<partition>") whatever their fields hold. List fails on a
// corrupt record; Records reports it.
func (s *Store) Records(ctx context.Context, stream string) ([]Record, error) {
	if err := checkpoint.ValidateStream(stream); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, "records"); err != nil {
		return nil, err
	}
	// Every _id of the stream starts with "<stream>/"; '0' follows '/'.
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: stream + "/"}, {Key: "$lt", Value: stream + "0"}}}}
	cur, err := s.coll.Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("mongostore: records of %q: %w", stream, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := []Record{}
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").StringValueOK()
		p := partitionOf(id, stream)
		if p < 0 {
			continue // another stream's, whose name starts with this one's and a '/'
		}
		r := Record{ID: id, Partition: p, raw: bson.Raw(slices.Clone(cur.Current))}
		r.Version, r.Epoch = record.Peek(r.raw)
		cp, err := record.Decode(r.raw)
		if err != nil {
			var ce *checkpoint.CorruptError
			if !errors.As(record.Located(err, stream, p, s.recordNameByID(id)), &ce) {
				return nil, fmt.Errorf("mongostore: records of %q: %w", stream, err)
			}
			r.Corrupt = ce
		} else {
			r.Checkpoint = cp
		}
		out = append(out, r)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("mongostore: records of %q: %w", stream, err)
	}
	slices.SortFunc(out, func(a, b Record) int { return a.Partition - b.Partition })
	return out, nil
}

// partitionOf is the partition an _id of stream names, or -1.
func partitionOf(id, stream string) int {
	rest, ok := strings.CutPrefix(id, stream+"/")
	if !ok || rest == "" || strings.TrimLeft(rest, "0123456789") != "" {
		return -1
	}
	p, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return p
}

// asRead matches r's document only while it is exactly as Records read
// it: the compare-and-set of Overwrite and Remove, which need nothing of
// the record decodable.
func (r Record) asRead() bson.D {
	return bson.D{{Key: "_id", Value: r.ID},
		{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$$ROOT", bson.D{{Key: "$literal", Value: r.raw}}}}}}}
}

// Overwrite replaces the record r with cp (stored with Version
// cp.Version+1, as Save does), if the record is still exactly as Records
// read it; otherwise it changes nothing and returns an error matching
// checkpoint.ErrFenced. It writes every field of the layout, so a damaged
// record (a field missing, or of the wrong type) comes out whole; it is
// how a tool sets a position over a corrupt record. Like Save it joins
// ctx's transaction, if any.
func (s *Store) Overwrite(ctx context.Context, r Record, cp checkpoint.Checkpoint) (checkpoint.Checkpoint, error) {
	if err := cp.Validate(); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if r.ID != ID(cp.Stream, cp.Partition) {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: record %s is not the checkpoint of %q partition %d", checkpoint.ErrInvalid, r.ID, cp.Stream, cp.Partition)
	}
	if err := s.begin(ctx, "overwrite"); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	update := bson.D{
		{Key: "$set", Value: record.Fields(cp, cp.Version+1)},
		{Key: "$currentDate", Value: bson.D{{Key: record.FUpdatedAt, Value: bson.D{{Key: "$type", Value: "date"}}}}},
	}
	raw, err := s.coll.FindOneAndUpdate(ctx, r.asRead(), update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: overwrite %s: %w: the record changed since it was read", s.recordNameByID(r.ID), checkpoint.ErrFenced)
	}
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: overwrite %s: %w", s.recordNameByID(r.ID), err)
	}
	saved, err := record.Decode(raw)
	if err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("mongostore: overwrite %s: %w", s.recordNameByID(r.ID),
			record.Located(err, cp.Stream, cp.Partition, s.recordNameByID(r.ID)))
	}
	return saved, nil
}

// Remove deletes the record r if it is still exactly as Records read it;
// otherwise it deletes nothing and returns an error matching
// checkpoint.ErrFenced. It is how a tool resets a corrupt record, whose
// version Delete cannot compare.
func (s *Store) Remove(ctx context.Context, r Record) error {
	if err := s.begin(ctx, "remove"); err != nil {
		return err
	}
	res, err := s.coll.DeleteOne(ctx, r.asRead())
	if err != nil {
		return fmt.Errorf("mongostore: remove %s: %w", s.recordNameByID(r.ID), err)
	}
	if res.DeletedCount != 1 {
		return fmt.Errorf("mongostore: remove %s: %w: the record changed since it was read", s.recordNameByID(r.ID), checkpoint.ErrFenced)
	}
	return nil
}
