package group

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
)

// Transactional fencing. A transaction reads a snapshot, and MongoDB
// aborts it only for a write to a document changed since: reading the
// lease inside the transaction proves nothing about the moment it
// commits. A member stopped (SIGSTOP, a long GC pause) after that read
// commits its effect when it resumes, after another member took the
// partition over — the effect of an event the new owner may never see
// again (it backfilled past it, and swept the projection), so it stays.
//
// So the check is a write. Each partition has fenceSlots fence documents
// in the state database's fences collection, {_id: {group, partition,
// slot}, epoch}. A new owner raises them to its epoch before its consumer
// reads anything (raiseFence); every transaction, as its last statement
// before the commit, increments the fence document of its lane's slot,
// matching its own epoch (passFence). Then either the transaction wrote
// the fence document first, and the new owner's raise waits until it has
// committed or aborted (it is ordered before the takeover, and before
// anything the new owner reads), or the raise came first, and the
// transaction's write conflicts (WriteConflict, a retry, whose new
// snapshot no longer matches its epoch) or matches nothing: no effect.
//
// A lane's transactions run one after the other, so with a slot per lane
// (the lane index modulo fenceSlots) a member's own transactions do not
// contend for fence documents while Concurrency is at most fenceSlots.
//
// The price: a member killed between its fence write and its commit leaves
// its transaction open until transactionLifetimeLimitSeconds, and the next
// owner's start waits for it (as its writes to the same documents would).

// fenceWaitNotice is how long raising a fence waits before it logs why.
var fenceWaitNotice = 5 * time.Second

// fenceSlots is the number of fence documents per partition.
const fenceSlots = 64

// fenceCollection is the collection of fence documents, beside the leases.
const fenceCollection = "fences"

func (g *Group) fences() *mongo.Collection {
	return g.leases.LeasesCollection().Database().Collection(fenceCollection)
}

func fenceID(group string, p, slot int) bson.D {
	return bson.D{{Key: "group", Value: group}, {Key: "partition", Value: p}, {Key: "slot", Value: slot}}
}

// raiseFence raises partition p's fence documents to epoch (never lowers
// them). A transaction of an older epoch holding one of them makes it wait
// until that transaction ends.
func (g *Group) raiseFence(ctx context.Context, p int, epoch int64) error {
	// The wait is invisible otherwise (a killed member's transaction can
	// hold a fence for up to transactionLifetimeLimitSeconds): say so
	// once it lasts, and when it ends.
	start := time.Now()
	waiting := make(chan struct{})
	notice := time.AfterFunc(fenceWaitNotice, func() {
		close(waiting)
		g.log.Warn("partition takeover waits for an earlier owner's open transaction to end (a member killed mid-transaction holds it until transactionLifetimeLimitSeconds, 60 s by default; lower that server parameter to shorten the wait)",
			"partition", p, "epoch", epoch)
	})
	defer func() {
		if !notice.Stop() {
			<-waiting
			g.log.Info("partition takeover: the earlier owner's transaction ended", "partition", p, "epoch", epoch,
				"waited", time.Since(start).Round(time.Millisecond))
		}
	}()
	models := make([]mongo.WriteModel, fenceSlots)
	for slot := range fenceSlots {
		models[slot] = mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: fenceID(g.cfg.name, p, slot)}}).
			SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: "epoch", Value: epoch}}}}).SetUpsert(true)
	}
	if _, err := g.fences().BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		return fmt.Errorf("group: raise the fence of partition %d to epoch %d: %w", p, epoch, err)
	}
	return nil
}

// passFence, inside a transaction (sctx), writes the fence document of
// ev's lane for partition p under ev's epoch; it fails the partition
// (ErrEpochChanged) when the fence is at another epoch.
func (g *Group) passFence(sctx context.Context, p int, ev *ferry.Event) error {
	slot := ev.Lane() % fenceSlots
	res, err := g.fences().UpdateOne(sctx, bson.D{{Key: "_id", Value: fenceID(g.cfg.name, p, slot)}, {Key: "epoch", Value: ev.Epoch}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}})
	if err != nil {
		return err // a WriteConflict is transient: the transaction is retried
	}
	if res.MatchedCount == 0 {
		return ferry.StopPartition(fmt.Errorf("%w: partition %d's fence is no longer at epoch %d (a new owner took it over)",
			ErrEpochChanged, p, ev.Epoch))
	}
	return nil
}
