package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Lease is the state of one partition's lease as the server stored it. All
// times are the server's clock.
type Lease struct {
	Group     string
	Partition int
	// Owner holds the lease; "" when it was released (or never taken).
	Owner string
	// Epoch grows by one at the start of every tenure: whenever the lease
	// is acquired by someone who did not hold it live a moment before
	// (another owner, or the same owner after a release or an expiry). It
	// is the fencing token: writes made under the lease carry it, and
	// stores reject writes with an epoch lower than the highest they saw.
	Epoch int64
	// ExpiresAt is when the lease expires unless renewed ($$NOW + ttl at
	// the last acquire or renewal; $$NOW at a release).
	ExpiresAt time.Time
	// AcquiredAt is when the current tenure (Epoch) began.
	AcquiredAt time.Time
	// Expired is set by Get and List: ExpiresAt < the server's $$NOW when
	// it was read. Acquire and Renew return live leases (false).
	Expired bool
}

// Free reports whether the lease could be acquired by anyone at the time it
// was read (released, or expired by the server's clock).
func (l Lease) Free() bool { return l.Owner == "" || l.Expired }

// Owners returns partition → owner of the leases in list held live (not
// Free).
func Owners(list []Lease) map[int]string {
	m := make(map[int]string, len(list))
	for _, l := range list {
		if !l.Free() {
			m[l.Partition] = l.Owner
		}
	}
	return m
}

// Document layout, one per (group, partition):
//
//	{_id: "<group>/<partition>", group, partition, owner: string|null,
//	 epoch: long, expiresAt: date, acquiredAt: date}
const (
	fGroup      = "group"
	fPartition  = "partition"
	fOwner      = "owner"
	fEpoch      = "epoch"
	fExpiresAt  = "expiresAt"
	fAcquiredAt = "acquiredAt"
	fExpired    = "expired"
)

// leaseID is the _id of a partition's lease document; unambiguous because
// the partition, after the last "/", has no "/".
func leaseID(group string, partition int) string { return group + "/" + strconv.Itoa(partition) }

// decodeLive reads the lease an Acquire or Renew returned: a corrupt
// document that is not Usable is its *CorruptError.
func (s *Store) decodeLive(raw bson.Raw) (Lease, error) {
	l, ce := s.decodeLease(raw)
	if ce != nil && !ce.Usable {
		return Lease{}, ce
	}
	return l, nil
}

// acquirePipeline is the update of Acquire. It always matches the
// partition's document (or upserts it) and decides on the server, against
// one $$NOW, whether to take it:
//
//	take = owner is null or expiresAt < $$NOW or (owner = me and expiresAt >= $$NOW)
//	keep = owner = me and expiresAt >= $$NOW   (our live lease: same tenure)
//
// When take is false every field is set to its own value, so the document is
// unchanged and the returned document names the live holder.
func acquirePipeline(group string, partition int, owner string, ttl time.Duration) mongo.Pipeline {
	curOwner := op("$ifNull", "$owner", nil)
	oursLive := op("$and", op("$eq", curOwner, lit(owner)), op("$gte", "$expiresAt", "$$NOW"))
	free := op("$or", op("$eq", curOwner, nil), op("$lt", op("$ifNull", "$expiresAt", nil), "$$NOW"))
	newTenure := op("$and", "$_take", op("$not", "$_keep"))
	epoch := op("$ifNull", "$epoch", int64(0))
	return mongo.Pipeline{
		{{Key: "$set", Value: bson.D{
			{Key: "_take", Value: op("$or", free, oursLive)},
			{Key: "_keep", Value: oursLive},
		}}},
		{{Key: "$set", Value: bson.D{
			{Key: fGroup, Value: lit(group)},
			{Key: fPartition, Value: int64(partition)},
			{Key: fOwner, Value: op("$cond", "$_take", lit(owner), "$owner")},
			{Key: fEpoch, Value: op("$cond", newTenure, op("$add", epoch, int64(1)), epoch)},
			{Key: fExpiresAt, Value: op("$cond", "$_take", nowPlus(ttl), "$expiresAt")},
			{Key: fAcquiredAt, Value: op("$cond", newTenure, "$$NOW", "$acquiredAt")},
		}}},
		{{Key: "$unset", Value: bson.A{"_take", "_keep"}}},
	}
}

// Acquire takes the partition's lease for owner for ttl, by the server's
// clock, if it is free, expired, or already owner's. It is one atomic
// findAndModify (an upsert on the lease's _id with a pipeline update judged
// by $$NOW). A new tenure increments the epoch; re-acquiring a live lease
// one already holds extends it and keeps the epoch. If someone else holds
// it, Acquire returns a *HeldError (ErrHeld) naming the holder and its
// epoch, read in the same operation.
//
// owner should be unique per process incarnation (DefaultMemberID is):
// two processes acquiring under one owner name share a tenure and an epoch,
// and fencing cannot tell them apart.
func (s *Store) Acquire(ctx context.Context, group string, partition int, owner string, ttl time.Duration) (Lease, error) {
	if err := validKey(group, partition); err != nil {
		return Lease{}, err
	}
	if err := validName("owner", owner); err != nil {
		return Lease{}, err
	}
	if err := validTTL("ttl", ttl); err != nil {
		return Lease{}, err
	}
	filter := bson.D{{Key: "_id", Value: leaseID(group, partition)}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	update := acquirePipeline(group, partition, owner, ttl)
	var raw bson.Raw
	var err error
	// Two first-ever acquires can race to insert the document; the loser
	// gets a duplicate-key error and retries, which then reads the winner.
	// (MongoDB 4.4+ retries this itself for an _id-only filter.)
	for attempt := 0; attempt < 3; attempt++ {
		raw, err = s.leases.FindOneAndUpdate(ctx, filter, update, opts).Raw()
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return Lease{}, wrapf(err, "acquire group %q partition %d", group, partition)
	}
	l, err := s.decodeLive(raw)
	if err != nil {
		return Lease{}, fmt.Errorf("lease: acquire group %q partition %d: %w", group, partition, err)
	}
	if l.Owner != owner {
		return Lease{}, &HeldError{Current: l}
	}
	return l, nil
}

// Renew extends l for ttl from the server's $$NOW, if it is still l.Owner's
// with l.Epoch and has not expired. Otherwise it returns an error matching
// ErrLost that says, as far as one more read can tell, what became of it.
// It is one atomic findAndModify.
func (s *Store) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := validKey(l.Group, l.Partition); err != nil {
		return Lease{}, err
	}
	if err := validName("owner", l.Owner); err != nil {
		return Lease{}, err
	}
	if err := validTTL("ttl", ttl); err != nil {
		return Lease{}, err
	}
	filter := bson.D{
		{Key: "_id", Value: leaseID(l.Group, l.Partition)},
		{Key: fOwner, Value: l.Owner},
		{Key: fEpoch, Value: l.Epoch},
		{Key: "$expr", Value: op("$gte", "$expiresAt", "$$NOW")},
	}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: fExpiresAt, Value: nowPlus(ttl)}}}}}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.After)
	raw, err := s.leases.FindOneAndUpdate(ctx, filter, update, opts).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Lease{}, s.lost(ctx, "renew", l)
	}
	if err != nil {
		return Lease{}, wrapf(err, "renew group %q partition %d epoch %d", l.Group, l.Partition, l.Epoch)
	}
	return s.decodeLive(raw)
}

// Release frees l (owner null, expiresAt $$NOW, epoch kept) if it is still
// l.Owner's with l.Epoch, expired or not, so that another owner can take it
// at once. Otherwise it changes nothing and returns an error matching
// ErrLost.
func (s *Store) Release(ctx context.Context, l Lease) error {
	if err := validKey(l.Group, l.Partition); err != nil {
		return err
	}
	if err := validName("owner", l.Owner); err != nil {
		return err
	}
	filter := bson.D{
		{Key: "_id", Value: leaseID(l.Group, l.Partition)},
		{Key: fOwner, Value: l.Owner},
		{Key: fEpoch, Value: l.Epoch},
	}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: fOwner, Value: nil}, {Key: fExpiresAt, Value: "$$NOW"}}}}}
	res, err := s.leases.UpdateOne(ctx, filter, update)
	if err != nil {
		return wrapf(err, "release group %q partition %d epoch %d", l.Group, l.Partition, l.Epoch)
	}
	if res.MatchedCount == 0 {
		return s.lost(ctx, "release", l)
	}
	return nil
}

// lost builds the ErrLost error of a Renew or Release that matched nothing,
// saying what the lease has become. The read is informational: the lease may
// change again right after it.
func (s *Store) lost(ctx context.Context, op string, l Lease) error {
	what := "it no longer exists"
	cur, err := s.Get(ctx, l.Group, l.Partition)
	switch {
	case err == nil && cur.Epoch != l.Epoch:
		what = fmt.Sprintf("owner %q holds it at epoch %d", cur.Owner, cur.Epoch)
	case err == nil && cur.Owner != l.Owner:
		what = "it was released"
	case err == nil && cur.Expired:
		what = "it expired on the server at " + cur.ExpiresAt.Format(time.RFC3339Nano)
	case err == nil:
		what = "it changed while being read"
	case !errors.Is(err, ErrNotFound):
		what = "its current state could not be read: " + err.Error()
	}
	return fmt.Errorf("%w: %s group %q partition %d: %q no longer holds epoch %d: %s",
		ErrLost, op, l.Group, l.Partition, l.Owner, l.Epoch, what)
}

// stateStages add the server-judged expired flag to lease documents.
func stateStages() mongo.Pipeline {
	return mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: fExpired, Value: op("$lt", "$expiresAt", "$$NOW")}}}}}
}

// Get returns one partition's lease with Expired judged by the server's
// clock, or an error matching ErrNotFound when it was never acquired.
func (s *Store) Get(ctx context.Context, group string, partition int) (Lease, error) {
	if err := validKey(group, partition); err != nil {
		return Lease{}, err
	}
	pipe := append(mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "_id", Value: leaseID(group, partition)}}}}}, stateStages()...)
	ls, err := s.aggregate(ctx, pipe)
	if bad, ok := AsCorruptRecords(err); ok && len(ls) == 0 {
		return Lease{}, bad[0]
	}
	if err != nil && len(ls) == 0 {
		return Lease{}, wrapf(err, "get group %q partition %d", group, partition)
	}
	if len(ls) == 0 {
		return Lease{}, fmt.Errorf("%w: group %q partition %d", ErrNotFound, group, partition)
	}
	return ls[0], nil
}

// List returns every lease of a group ordered by partition, each with
// Expired judged by the server's clock at the time of the read (empty, no
// error, when there are none).
//
// A lease document that cannot be read as stored (a field of the wrong
// type) does not hide the others: List returns every usable lease (see
// CorruptError.Usable) and a CorruptRecords error naming each corrupt
// one; a lease that is not usable is left out.
func (s *Store) List(ctx context.Context, group string) ([]Lease, error) {
	if err := validName("group", group); err != nil {
		return nil, err
	}
	pipe := append(mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: fGroup, Value: group}}}}}, stateStages()...)
	pipe = append(pipe, bson.D{{Key: "$sort", Value: bson.D{{Key: fPartition, Value: 1}}}})
	ls, err := s.aggregate(ctx, pipe)
	if _, ok := AsCorruptRecords(err); ok {
		return ls, err
	}
	if err != nil {
		return nil, wrapf(err, "list group %q", group)
	}
	return ls, nil
}

// aggregate reads lease documents: the usable ones, and a CorruptRecords
// error when some are corrupt.
func (s *Store) aggregate(ctx context.Context, pipe mongo.Pipeline) ([]Lease, error) {
	cur, err := s.leases.Aggregate(ctx, pipe)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := []Lease{}
	var bad CorruptRecords
	for cur.Next(ctx) {
		l, ce := s.decodeLease(cur.Current)
		if ce != nil {
			bad = append(bad, ce)
			if !ce.Usable {
				continue
			}
		}
		out = append(out, l)
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, bad
	}
	return out, nil
}
