package ledger

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// CountApplied returns how many entries of a stream were applied at or
// after from and before to (appliedAt; the server's clock for Record and
// RecordNew, the writer's for RecordMany). It reads the range of the TTL
// index on appliedAt and checks the stream field. `ferry verify` asks it
// when a window holds no change: entries applied in the window say the
// stream was active there. An entry lives Retention: older activity is
// not counted.
func (s *Store) CountApplied(ctx context.Context, stream string, from, to time.Time) (int64, error) {
	if err := validString("stream", stream); err != nil {
		return 0, err
	}
	if !from.Before(to) {
		return 0, nil
	}
	filter := bson.D{
		{Key: fAppliedAt, Value: bson.D{{Key: "$gte", Value: bson.NewDateTimeFromTime(from)}, {Key: "$lt", Value: bson.NewDateTimeFromTime(to)}}},
		{Key: fStream, Value: stream},
	}
	n, err := s.coll.CountDocuments(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("ledger: count the entries of %q applied from %s to %s: %w", stream,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}
