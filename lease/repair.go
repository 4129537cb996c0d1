package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// RepairOwner holds a lease Repair rewrote, for one lease TTL: no member
// takes it before the owner of the damaged lease, which can no longer
// renew it, has stopped working on the partition by itself.
const RepairOwner = "(repair)"

// Inspect reads a partition's lease document as stored and returns its
// *CorruptError when a field of it cannot be read; nil (and a nil error)
// when it reads, or when there is none. It finds the document by its _id,
// whatever its group field holds.
func (s *Store) Inspect(ctx context.Context, group string, partition int) (*CorruptError, error) {
	if err := validKey(group, partition); err != nil {
		return nil, err
	}
	raw, err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: leaseID(group, partition)}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrapf(err, "inspect group %q partition %d", group, partition)
	}
	_, ce := s.decodeLease(raw)
	return ce, nil
}

// Repair rewrites a partition's lease document that cannot be read as
// stored, so that the partition can be leased again; a document that reads
// is left alone. It reports whether it changed the document.
//
// Where only a field shown for information is wrong (acquiredAt, group,
// partition), those are put right in place and the lease is otherwise
// unchanged: its holder keeps it. Where the owner, the epoch or the
// expiry cannot be read, nobody can renew the lease, and Acquire cannot
// take it (it adds one to the epoch): Repair replaces it with a lease
// held by RepairOwner until ttl from the server's $$NOW, at an epoch of
// at least floor and of the document's own epoch where that still reads.
// The caller passes as floor the highest epoch the partition's writes
// record (its checkpoint's, its fences'), so that the next owner, who
// takes it at the next epoch once it expires, is fenced by none of them
// and fences off every earlier one; and its holder, which can no longer
// renew it, has stopped by itself (Held.Valid) before then.
//
// Both are one update, compare-and-set on the whole document as read: of
// members repairing at once, one does it, and a document that changed
// meanwhile is left alone (false, nil).
func (s *Store) Repair(ctx context.Context, group string, partition int, floor int64, ttl time.Duration) (bool, error) {
	if err := validKey(group, partition); err != nil {
		return false, err
	}
	if err := validTTL("ttl", ttl); err != nil {
		return false, err
	}
	id := leaseID(group, partition)
	raw, err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, wrapf(err, "repair group %q partition %d", group, partition)
	}
	l, ce := s.decodeLease(raw)
	if ce == nil {
		return false, nil
	}
	var set bson.D
	if ce.Usable {
		set = bson.D{
			{Key: fGroup, Value: lit(group)},
			{Key: fPartition, Value: int64(partition)},
			{Key: fAcquiredAt, Value: op("$cond", op("$eq", op("$type", "$"+fAcquiredAt), "date"), "$"+fAcquiredAt, "$$NOW")},
		}
	} else {
		epoch := floor
		if !ce.wrong(fEpoch) {
			epoch = max(epoch, l.Epoch)
		}
		set = bson.D{
			{Key: fGroup, Value: lit(group)},
			{Key: fPartition, Value: int64(partition)},
			{Key: fOwner, Value: lit(RepairOwner)},
			{Key: fEpoch, Value: epoch},
			{Key: fExpiresAt, Value: nowPlus(ttl)},
			{Key: fAcquiredAt, Value: "$$NOW"},
		}
	}
	asRead := bson.D{{Key: "_id", Value: id}, {Key: "$expr", Value: op("$eq", "$$ROOT", lit(raw))}}
	res, err := s.leases.UpdateOne(ctx, asRead, mongo.Pipeline{{{Key: "$set", Value: set}}}, options.UpdateOne())
	if err != nil {
		return false, fmt.Errorf("lease: repair %s: %w", ce.Record, err)
	}
	return res.ModifiedCount == 1, nil
}

// wrong reports whether field is one of the fields that cannot be read.
func (e *CorruptError) wrong(field string) bool {
	for _, f := range e.Fields {
		if f == field {
			return true
		}
	}
	return false
}
