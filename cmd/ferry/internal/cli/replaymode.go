package cli

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/ledger"
	"github.com/ferry-io/ferry/sink"
)

// replayDelivery delivers a replayed dead letter the way the stream's
// delivery mode delivers its events, so that the ledger — which ferry
// verify reads — says it was applied:
//
//   - idempotent: the ledger is consulted first (an event recorded
//     already, under the stream or the one it started from, is not
//     delivered again), the sink written, then the entry recorded
//     (ledger.Store.Record: the entry the consumer writes, partition and
//     epoch those of the dead letter);
//   - transactional: the entry (RecordNew) and the sink's writes in one
//     transaction: an event recorded already makes no effect;
//   - at-least-once: the sink written, nothing recorded. Such a stream
//     keeps no ledger; ferry verify counts its applied events, a replayed
//     one too, as unverifiable (applied or lost cannot be told apart).
type replayDelivery struct {
	st     *config.Stream
	sink   sink.Sink
	ledger *ledger.Store // nil in at-least-once delivery
	client *mongo.Client // the state store's, for transactional delivery
}

// newReplayDelivery opens the ledger when the stream's mode keeps one.
func newReplayDelivery(ctx context.Context, st *config.Stream, s sink.Sink, db *mongo.Database) (*replayDelivery, error) {
	d := &replayDelivery{st: st, sink: s, client: db.Client()}
	if st.Delivery.Mode == group.AtLeastOnce {
		return d, nil
	}
	l, err := ledger.New(ctx, db)
	if err != nil {
		return nil, err
	}
	d.ledger = l
	return d, nil
}

// deliver delivers ev, dead-lettered by partition with epoch. applied is
// false when the ledger held the event already: it was not delivered
// again.
func (d *replayDelivery) deliver(ctx context.Context, ev *ferry.Event, partition int, epoch int64) (applied bool, err error) {
	stream, id := d.st.Name, ev.ID()
	switch d.st.Delivery.Mode {
	case group.Idempotent:
		if seen, err := d.seen(ctx, id); err != nil || seen {
			return false, err
		}
		if err := d.sink.Write(ctx, []*ferry.Event{ev}); err != nil {
			return false, err
		}
		if err := d.ledger.Record(ctx, stream, id, partition, epoch); err != nil {
			return false, fmt.Errorf("delivered, but not recorded in the ledger (a replay delivers it again, with the same event id): %w", err)
		}
		return true, nil
	case group.Transactional:
		err := ledger.RunTransaction(ctx, d.client, func(sctx context.Context) error {
			applied = false
			inserted, err := d.ledger.RecordNew(sctx, stream, id, partition, epoch)
			if err != nil || !inserted {
				return err
			}
			if from := d.from(); from != "" {
				if seen, err := d.ledger.Seen(sctx, from, id); err != nil || seen {
					return err // recorded under this stream too now
				}
			}
			if err := d.sink.Write(sctx, []*ferry.Event{ev}); err != nil {
				return err
			}
			applied = true
			return nil
		})
		return applied, err
	}
	return true, d.sink.Write(ctx, []*ferry.Event{ev})
}

// seen reports whether the ledger holds the event under the stream or
// under the stream it started from (source.start_at checkpoints_of), as
// the consumer's idempotent delivery asks.
func (d *replayDelivery) seen(ctx context.Context, id string) (bool, error) {
	seen, err := d.ledger.Seen(ctx, d.st.Name, id)
	if err != nil || seen || d.from() == "" {
		return seen, err
	}
	return d.ledger.Seen(ctx, d.from(), id)
}

// from is the stream this one started from, whose ledger entries count.
func (d *replayDelivery) from() string {
	if d.st.Source.StartAt.Kind == "checkpoints" {
		return d.st.Source.StartAt.Stream
	}
	return ""
}
