package group

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/ledger"
)

// wrap applies the delivery mode around the user's handler.
func (g *Group) wrap(held *lease.Held, p int) ferry.Handler {
	cfg := &g.cfg
	h := g.handler
	switch cfg.mode {
	case Idempotent:
		return func(ctx context.Context, ev *ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			seen, err := g.seen(ctx, ev.ID())
			if err != nil {
				return err
			}
			if seen {
				g.ledgerDuplicates.Add(1)
				return nil // applied before (a replay)
			}
			if err := h(ctx, ev); err != nil {
				return err
			}
			return cfg.ledgerStore.Record(ctx, cfg.name, ev.ID(), p, ev.Epoch)
		}
	case Transactional:
		leases := g.leases.LeasesCollection()
		return func(ctx context.Context, ev *ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			return ledger.RunTransaction(ctx, g.client, func(sctx context.Context) error {
				inserted, err := cfg.ledgerStore.RecordNew(sctx, cfg.name, ev.ID(), p, ev.Epoch)
				if err != nil {
					return err
				}
				if !inserted {
					g.ledgerDuplicates.Add(1)
					return nil // a duplicate: applied before, no effect
				}
				if from := g.from; from != "" {
					// Applied by the stream this one started from?
					seen, err := cfg.ledgerStore.Seen(sctx, from, ev.ID())
					if err != nil {
						return err
					}
					if seen {
						g.ledgerDuplicates.Add(1)
						return nil // recorded under this stream too now
					}
				}
				// The lease must still carry our epoch, or another member
				// took over: a fast refusal, but only a read of this
				// transaction's snapshot (see fence.go); passFence, after
				// the effect, is the fencing.
				var l struct {
					Owner string `bson:"owner"`
					Epoch int64  `bson:"epoch"`
				}
				err = leases.FindOne(sctx, bson.D{{Key: "group", Value: cfg.name}, {Key: "partition", Value: p}}).Decode(&l)
				if err != nil {
					return err
				}
				if l.Owner != cfg.memberID || l.Epoch != ev.Epoch {
					return ferry.StopPartition(fmt.Errorf("%w: partition %d is now epoch %d of %q, not %d", ErrEpochChanged, p, l.Epoch, l.Owner, ev.Epoch))
				}
				if err := h(sctx, ev); err != nil {
					return err
				}
				return g.passFence(sctx, p, ev)
			})
		}
	}
	return func(ctx context.Context, ev *ferry.Event) error {
		if !held.Valid() {
			return ferry.StopPartition(ErrLeaseLost)
		}
		return h(ctx, ev)
	}
}

// seen reports whether the ledger holds the event under this stream, or
// under the stream it started from (ferry.StartAtCheckpointsOf): the same
// change has the same event id under any definition, so the overlap of a
// move to a new definition is absorbed.
func (g *Group) seen(ctx context.Context, eventID string) (bool, error) {
	seen, err := g.cfg.ledgerStore.Seen(ctx, g.cfg.name, eventID)
	if err != nil || seen || g.from == "" {
		return seen, err
	}
	return g.cfg.ledgerStore.Seen(ctx, g.from, eventID)
}
