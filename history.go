package ferry

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongoerr"
)

// OplogStart returns the start of the source's history window: the
// cluster time of the oldest entry its oplog holds, the oldest position a
// change stream of this consumer can start at. A position before it (a
// checkpoint, a start time) fails with ChangeStreamHistoryLost (286); a
// partition's head-room is its position minus OplogStart, the early
// warning before that error.
//
// It needs no privilege beyond the stream's own (changeStream on its
// scope; it does not read local.oplog.rs): it probes, opening the stream's
// scope at a cluster time (startAtOperationTime, batch size 1, the first
// batch only, closed at once) and searching for the oldest time the server
// accepts: about 2·log2(window in seconds) probes to find the second (34
// for a day), then 32 for the increment within it. hint, when not zero,
// is a previous answer: the start only moves forward, so when it has not
// moved the answer takes 2 probes, and when it has the search goes forward
// from it.
func (c *Consumer) OplogStart(ctx context.Context, hint bson.Timestamp) (bson.Timestamp, error) {
	reaches := func(at bson.Timestamp) (bool, error) { return c.reachesBack(ctx, at) }
	ts, err := oplogStart(reaches, time.Now().Unix(), hint)
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("ferry: stream %q: find the start of the oplog: %w", c.cfg.name, err)
	}
	return ts, nil
}

// stillStart reports whether hint is still the oldest reachable time:
// reachable, and the time just before it not.
func stillStart(reaches func(bson.Timestamp) (bool, error), hint bson.Timestamp) bool {
	if ok, err := reaches(hint); err != nil || !ok {
		return false
	}
	before := bson.Timestamp{T: hint.T, I: hint.I - 1}
	if hint.I == 0 {
		before = bson.Timestamp{T: hint.T - 1, I: math.MaxUint32}
	}
	ok, err := reaches(before)
	return err == nil && !ok
}

// oplogStart finds the oldest reachable cluster time, given that reaches
// is monotone: the second first, then the increment within it.
func oplogStart(reaches func(bson.Timestamp) (bool, error), now int64, hint bson.Timestamp) (bson.Timestamp, error) {
	if !hint.IsZero() && stillStart(reaches, hint) {
		return hint, nil
	}
	sec, err := oldestReachable(func(s int64) (bool, error) {
		return reaches(bson.Timestamp{T: uint32(s), I: math.MaxUint32})
	}, now, int64(hint.T))
	if err != nil {
		return bson.Timestamp{}, err
	}
	// Within second sec: I = MaxUint32 is reachable; find the first I.
	good, bad := int64(math.MaxUint32), int64(-1)
	for good-bad > 1 {
		mid := bad + (good-bad)/2
		ok, err := reaches(bson.Timestamp{T: uint32(sec), I: uint32(mid)})
		if err != nil {
			return bson.Timestamp{}, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return bson.Timestamp{T: uint32(sec), I: uint32(good)}, nil
}

// reachesBack reports whether a change stream of the consumer's scope can
// start at cluster time at: false when the server answers
// ChangeStreamHistoryLost.
func (c *Consumer) reachesBack(ctx context.Context, at bson.Timestamp) (bool, error) {
	opts := options.ChangeStream().SetStartAtOperationTime(&at).SetBatchSize(1).SetMaxAwaitTime(time.Millisecond)
	var cs *mongo.ChangeStream
	var err error
	scope := c.cfg.scope
	switch {
	case scope.DB == "":
		cs, err = c.client.Watch(ctx, mongo.Pipeline{}, opts)
	case scope.Coll == "":
		cs, err = c.client.Database(scope.DB).Watch(ctx, mongo.Pipeline{}, opts)
	default:
		cs, err = c.client.Database(scope.DB).Collection(scope.Coll).Watch(ctx, mongo.Pipeline{}, opts)
	}
	if err == nil {
		// A server may raise the error at the first getMore rather than
		// at the aggregate.
		cs.TryNext(ctx)
		err = cs.Err()
		cs.Close(context.WithoutCancel(ctx))
	}
	switch {
	case err == nil:
		return true, nil
	case mongoerr.IsHistoryLost(err):
		return false, nil
	}
	return false, err
}

// oldestReachable finds the smallest second s with reaches(s), given that
// reaches is monotone (false before the oplog's start, true from it on).
// now is a second expected to be reachable (it is moved later if not);
// hint, when positive, is a previous answer.
func oldestReachable(reaches func(int64) (bool, error), now, hint int64) (int64, error) {
	probe := func(s int64) (bool, error) {
		if s < 1 {
			return false, nil // second 0 is no cluster time
		}
		return reaches(s)
	}
	// good: a second known reachable; bad: one known not (-1: none yet).
	good, bad := int64(-1), int64(-1)
	if hint > 0 && hint <= now {
		ok, err := probe(hint)
		if err != nil {
			return 0, err
		}
		if ok {
			good = hint
		} else {
			bad = hint
		}
	}
	// The start only moves forward: from a stale hint, look later,
	// doubling, up to now.
	for step := int64(1); bad >= 0 && good < 0 && bad+step < now; step *= 2 {
		ok, err := probe(bad + step)
		if err != nil {
			return 0, err
		}
		if ok {
			good = bad + step
		} else {
			bad += step
		}
	}
	if good < 0 {
		good = now
		ok, err := probe(good)
		if err != nil {
			return 0, err
		}
		// The server's clock may be ahead of ours: look later.
		for step := int64(1); !ok; step *= 2 {
			if step > 1<<40 {
				return 0, fmt.Errorf("no second up to %d is reachable", good)
			}
			bad, good = good, good+step
			if ok, err = probe(good); err != nil {
				return 0, err
			}
		}
	}
	// Look back from good, doubling, until a second is not reachable.
	for step := int64(1); bad < 0; step *= 2 {
		s := good - step
		if s < 1 {
			bad = 0
			break
		}
		ok, err := probe(s)
		if err != nil {
			return 0, err
		}
		if ok {
			good = s
		} else {
			bad = s
		}
	}
	for good-bad > 1 {
		mid := bad + (good-bad)/2
		ok, err := probe(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}
