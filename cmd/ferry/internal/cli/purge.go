package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// Tombstone purging for streams with the mongodb sink.
//
// When may a tombstone go? It exists so that an event older than the
// delete, applied after it, cannot resurrect the document. Such an event
// can only come from a replay, and a partition replays from its
// checkpoint's resume token on. So a tombstone may go once every
// partition's checkpoint token is past the delete: strictly, the delete's
// clusterTime (_ferry.ct) is below the clusterTime of every partition's
// token (the token of a transaction's event at time T still replays the
// rest of T; events older than the delete have a clusterTime <= the
// delete's, so none of them can be replayed). The minimum over all
// partitions is used, whatever partition the document hashes to.
//
// The rule first proposed, "_ferry.at < min UpdatedAt of the checkpoints",
// is NOT safe: a checkpoint is the contiguous prefix of finished events,
// while the lanes apply the events of different documents concurrently, so
// a delete can be applied (at) before a checkpoint write (UpdatedAt) that
// still stops short of it (an older event of another document was still
// being retried). After a purge, a crash then replays that document's
// older insert, and the document reappears until the replayed delete
// follows. Nor does any fixed margin help: an event can be retried for
// arbitrarily long. The bound below therefore compares clusterTimes, which
// are what the checkpoint tokens order by, and only maps them to the
// PurgeTombstones cut-off (a time, compared with _ferry.at) at the end:
//
//  1. Every partition 0..n-1 (and any other partition listed) must have a
//     checkpoint in state running with a token; otherwise no purge (a
//     partition without a token starts from its origin or the configured
//     start and may replay anything; needs-backfill, invalidated and
//     stalled partitions have not applied what follows their token). A
//     backfill's Sweep removes the tombstones anyway.
//  2. pos = min over the partitions of the token's clusterTime (the
//     checkpoint's ClusterTime if the token cannot be decoded; no purge if
//     both are zero).
//  3. now = the state cluster's server time (hello's localTime): the clock
//     of _ferry.at, since the projection lives in the state store's cluster.
//  4. The oldest tombstone not covered (ct >= pos, or no ct) bounds the
//     cut-off: before = min(now - retention, its at). Every tombstone with
//     at < before then has ct < pos. A tombstone rewritten after the query
//     gets at = $$NOW >= now > before, so it is not purged either; a write
//     whose $$NOW was taken before now - retention (>= 1m) but not yet
//     visible to the query would need to have stayed uncommitted longer
//     than a transaction may live.
//
// The retention on top covers what checkpoints do not: a fenced-off
// member still finishing an older write, and dead letters replayed later
// (an older dead-lettered event replayed after its document's tombstone
// was purged resurrects it). Purging is idempotent, so every member of the
// group running it is harmless.

// purgeHooks lets tests run the purge loop fast and watch its passes.
type purgeHooks struct {
	interval func(retention time.Duration) time.Duration // nil: purgeInterval
	pass     func(stream string, r purgeResult)          // nil, or called after every pass
}

// purgeTestHooks is nil outside tests.
var purgeTestHooks atomic.Pointer[purgeHooks]

// purgeInterval is how often the purge runs: a quarter of the retention,
// at most 10 minutes.
func purgeInterval(retention time.Duration) time.Duration {
	return min(retention/4, 10*time.Minute)
}

// purgeResult is what one pass did.
type purgeResult struct {
	Purged int64
	Before time.Time // the cut-off passed to PurgeTombstones (zero: none)
	Skip   string    // why the pass purged nothing without trying
	Err    error
}

// tombstonePurger purges the tombstones of one stream's projection.
type tombstonePurger struct {
	stream     string
	partitions int
	retention  time.Duration
	sink       *mongoproj.Sink
	store      checkpoint.Store
	state      *mongo.Database // the state store: its server clock is the projection's
	log        *slog.Logger
	purged     atomic.Int64
}

// run purges shortly after start and then every interval, until ctx ends.
func (p *tombstonePurger) run(ctx context.Context) {
	interval := purgeInterval(p.retention)
	hooks := purgeTestHooks.Load()
	if hooks != nil && hooks.interval != nil {
		interval = hooks.interval(p.retention)
	}
	t := time.NewTimer(min(interval, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(interval, time.Minute))
		r := p.pass(pctx)
		cancel()
		switch {
		case r.Err != nil && ctx.Err() == nil:
			p.log.Warn("tombstone purge failed", "stream", p.stream, "err", r.Err)
		case r.Purged > 0:
			p.log.Info("purged tombstones", "stream", p.stream, "count", r.Purged, "before", r.Before)
		case r.Skip != "":
			p.log.Debug("tombstone purge skipped", "stream", p.stream, "reason", r.Skip)
		}
		if hooks != nil && hooks.pass != nil {
			hooks.pass(p.stream, r)
		}
		t.Reset(interval)
	}
}

// pass computes the cut-off (see the comment at the top of the file) and
// purges the tombstones written before it.
func (p *tombstonePurger) pass(ctx context.Context) purgeResult {
	cps, err := p.store.List(ctx, p.stream)
	if err != nil {
		return purgeResult{Err: err}
	}
	pos, skip := checkpointBound(cps, p.partitions)
	if skip != "" {
		return purgeResult{Skip: skip}
	}
	now, err := serverTime(ctx, p.state)
	if err != nil {
		return purgeResult{Err: err}
	}
	before := now.Add(-p.retention)
	uncovered := bson.D{
		{Key: mongoproj.Field + ".del", Value: true},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: mongoproj.Field + ".ct", Value: bson.D{{Key: "$gte", Value: pos}}}},
			bson.D{{Key: mongoproj.Field + ".ct", Value: bson.D{{Key: "$exists", Value: false}}}},
		}},
	}
	var oldest struct {
		Stamp struct {
			At time.Time `bson:"at"`
		} `bson:"_ferry"`
	}
	err = p.sink.Target().FindOne(ctx, uncovered, options.FindOne().
		SetSort(bson.D{{Key: mongoproj.Field + ".at", Value: 1}}).
		SetProjection(bson.D{{Key: mongoproj.Field + ".at", Value: 1}})).Decode(&oldest)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return purgeResult{Err: fmt.Errorf("find the oldest tombstone not yet behind every checkpoint: %w", err)}
	case oldest.Stamp.At.IsZero():
		return purgeResult{Skip: "a tombstone not yet behind every checkpoint has no write time"}
	case oldest.Stamp.At.Before(before):
		before = oldest.Stamp.At
	}
	n, err := p.sink.PurgeTombstones(ctx, before)
	if err != nil {
		return purgeResult{Before: before, Err: err}
	}
	p.purged.Add(n)
	return purgeResult{Purged: n, Before: before}
}

// checkpointBound returns the lowest clusterTime at which any partition of
// the stream resumes: tombstones of deletes strictly older than it cannot be
// needed by a replay. skip says why there is no such bound (then nothing may
// be purged).
func checkpointBound(cps []checkpoint.Checkpoint, partitions int) (pos bson.Timestamp, skip string) {
	seen := make(map[int]bool, len(cps))
	first := true
	for _, cp := range cps {
		switch {
		case cp.State != checkpoint.StateRunning:
			return bson.Timestamp{}, fmt.Sprintf("partition %d is %s", cp.Partition, cp.State)
		case cp.Token == nil:
			return bson.Timestamp{}, fmt.Sprintf("partition %d has no resume token yet", cp.Partition)
		}
		ts := cp.ClusterTime
		if tok, err := resumetoken.Parse(cp.Token); err == nil && !tok.ClusterTime.IsZero() {
			ts = tok.ClusterTime
		}
		if ts.IsZero() {
			return bson.Timestamp{}, fmt.Sprintf("partition %d's position has no clusterTime", cp.Partition)
		}
		seen[cp.Partition] = true
		if first || ts.Before(pos) {
			pos, first = ts, false
		}
	}
	for p := range partitions {
		if !seen[p] {
			return bson.Timestamp{}, fmt.Sprintf("partition %d has no checkpoint yet", p)
		}
	}
	if first {
		return bson.Timestamp{}, "no checkpoint yet"
	}
	return pos, ""
}

// serverTime returns the server's clock (hello's localTime).
func serverTime(ctx context.Context, db *mongo.Database) (time.Time, error) {
	var reply struct {
		LocalTime time.Time `bson:"localTime"`
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&reply); err != nil {
		return time.Time{}, fmt.Errorf("read the server time: %w", err)
	}
	if reply.LocalTime.IsZero() {
		return time.Time{}, errors.New("read the server time: hello returned no localTime")
	}
	return reply.LocalTime, nil
}
