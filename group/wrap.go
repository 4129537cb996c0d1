package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/ledger"
)

// newConsumer returns partition p's consumer, its handler wrapped in the
// delivery mode (held nil: only to check the options).
func (g *Group) newConsumer(held *lease.Held, p int, opts []ferry.Option) (*ferry.Consumer, error) {
	if g.batch != nil {
		return ferry.NewBatchConsumer(g.client, g.wrapBatch(held, p), opts...)
	}
	return ferry.NewConsumer(g.client, g.wrap(held, p), opts...)
}

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
			rctx, cancel := recordContext(ctx)
			defer cancel()
			return cfg.ledgerStore.Record(rctx, cfg.name, ev.ID(), p, ev.Epoch)
		}
	case Transactional:
		return func(ctx context.Context, ev *ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			return ledger.RunTransaction(ctx, g.cfg.state.Client(), func(sctx context.Context) error {
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
				if err := fence(sctx, held); err != nil {
					return err
				}
				if err := h(sctx, ev); err != nil {
					return err
				}
				// The read above sees this transaction's snapshot only: the
				// fence write is what keeps a stopped member's effect from
				// committing after a takeover (fence.go).
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

// fence checks, inside the transaction, that partition p's lease still
// names this member at held's epoch (lease.Held.VerifyEpoch); otherwise
// another member took over and the partition stops.
func fence(sctx context.Context, held *lease.Held) error {
	if err := held.VerifyEpoch(sctx); err != nil {
		if errors.Is(err, lease.ErrLost) {
			return ferry.StopPartition(fmt.Errorf("%w: %w", ErrEpochChanged, err))
		}
		return err
	}
	return nil
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
