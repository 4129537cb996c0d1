package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/ledger"
)

// wrapBatch applies the delivery mode around the user's batch handler,
// per batch: the ledger is read and written once per batch (SeenMany,
// RecordMany), and in transactional mode one transaction holds the whole
// batch.
func (g *Group) wrapBatch(held *lease.Held, p int) ferry.BatchHandler {
	cfg := &g.cfg
	h := g.batch
	switch cfg.mode {
	case Idempotent:
		return func(ctx context.Context, batch []*ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			fresh, at, err := g.unseen(ctx, batch)
			if err != nil {
				return err
			}
			g.ledgerDuplicates.Add(int64(len(batch) - len(fresh)))
			if len(fresh) == 0 {
				return nil // all applied before (a replay)
			}
			herr := h(ctx, fresh)
			if wholeBatch(herr, len(fresh)) {
				return herr // nothing is recorded: each event is tried alone next
			}
			errs := ferry.EventErrors(herr, len(fresh))
			// Effect, then record: only the events whose effect the
			// handler acknowledged.
			applied := make([]string, 0, len(fresh))
			for i, ev := range fresh {
				if errs[i] == nil {
					applied = append(applied, ev.ID())
				}
			}
			if len(applied) > 0 {
				rctx, cancel := recordContext(ctx)
				err := cfg.ledgerStore.RecordMany(rctx, cfg.name, applied, p, fresh[0].Epoch)
				cancel()
				if err != nil {
					// The effects happened but are not recorded: they are
					// retried, and the receiver drops the duplicates by
					// the idempotency key.
					for i := range errs {
						if errs[i] == nil {
							errs[i] = err
						}
					}
				}
			}
			return spread(errs, at, len(batch))
		}
	case Transactional:
		return func(ctx context.Context, batch []*ferry.Event) error {
			if !held.Valid() {
				return ferry.StopPartition(ErrLeaseLost)
			}
			var dups int
			var herr error // the handler's error, which aborted the transaction
			var at []int
			err := ledger.RunTransaction(ctx, g.cfg.state.Client(), func(sctx context.Context) error {
				herr = nil
				fresh, idx, err := g.unseen(sctx, batch)
				if err != nil {
					return err
				}
				dups, at = len(batch)-len(fresh), idx
				if len(fresh) == 0 {
					return nil // all applied before: no effect
				}
				ids := make([]string, len(fresh))
				for i, ev := range fresh {
					ids[i] = ev.ID()
				}
				// Absent in this transaction's snapshot: an entry committed
				// since conflicts, and the retried transaction sees it.
				if err := cfg.ledgerStore.RecordMany(sctx, cfg.name, ids, p, fresh[0].Epoch); err != nil {
					return err
				}
				if err := fence(sctx, held); err != nil {
					return err
				}
				if herr = h(sctx, fresh); herr != nil {
					return herr
				}
				// A lane's batch: its events share the lane's fence slot
				// (fence.go).
				return g.passFence(sctx, p, fresh[0])
			})
			if err == nil {
				g.ledgerDuplicates.Add(int64(dups))
				return nil
			}
			if herr == nil || err != herr || wholeBatch(herr, len(batch)-dups) {
				return err // the whole batch failed (or a ledger, lease or commit error): each event is tried alone next
			}
			// The handler failed some events, which aborted the
			// transaction: none of the batch took effect. The failed
			// events keep their errors; the others were not applied
			// because of them.
			errs := ferry.EventErrors(herr, len(batch)-dups)
			for i := range errs {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("%w: the transaction of its batch was aborted by another event's failure", ferry.ErrNotAttempted)
				}
			}
			return spread(errs, at, len(batch))
		}
	}
	return func(ctx context.Context, batch []*ferry.Event) error {
		if !held.Valid() {
			return ferry.StopPartition(ErrLeaseLost)
		}
		return h(ctx, batch)
	}
}

// wholeBatch reports whether err, returned for a batch of n, fails the
// whole batch rather than some of its events (a *ferry.BatchError of n).
func wholeBatch(err error, n int) bool {
	var be *ferry.BatchError
	return err != nil && !(errors.As(err, &be) && len(be.Errs) == n)
}

// spread returns the errors of the events at indexes at of a batch of n
// (the others applied) as the batch's error.
func spread(errs []error, at []int, n int) error {
	be := ferry.NewBatchError(n)
	for i, err := range errs {
		be.Set(at[i], err)
	}
	return be.Err()
}

// unseen returns the events of batch the ledger does not hold, under this
// stream or under the stream it started from (see seen), and their indexes
// in batch: one find per stream (ledger.SeenMany).
func (g *Group) unseen(ctx context.Context, batch []*ferry.Event) ([]*ferry.Event, []int, error) {
	ids := make([]string, len(batch))
	for i, ev := range batch {
		ids[i] = ev.ID()
	}
	seen, err := g.cfg.ledgerStore.SeenMany(ctx, g.cfg.name, ids)
	if err != nil {
		return nil, nil, err
	}
	if g.from != "" {
		var rest []string
		for _, id := range ids {
			if !seen[id] {
				rest = append(rest, id)
			}
		}
		if len(rest) > 0 {
			also, err := g.cfg.ledgerStore.SeenMany(ctx, g.from, rest)
			if err != nil {
				return nil, nil, err
			}
			for id, ok := range also {
				seen[id] = seen[id] || ok
			}
		}
	}
	fresh := make([]*ferry.Event, 0, len(batch))
	at := make([]int, 0, len(batch))
	for i, ev := range batch {
		if !seen[ev.ID()] {
			fresh = append(fresh, ev)
			at = append(at, i)
		}
	}
	return fresh, at, nil
}
