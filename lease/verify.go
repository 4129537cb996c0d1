package lease

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// VerifyEpoch reads the lease's document through ctx and reports whether it
// still names this holder at its epoch: nil if so, else an error matching
// ErrLost that says who holds it now and at which epoch (or that the
// document is gone).
//
// It is the fence of a transaction that must take effect only under the
// lease: call it with the transaction's context (the session context of
// mongo.Session.WithTransaction, or ledger.RunTransaction's; the session
// must be of the client the Store's database belongs to) and abort on an
// error. The read then joins the transaction and sees its snapshot:
// the effects commit only if, as of that snapshot, no other member had
// taken the partition over. A takeover committed after the snapshot is not
// seen (MongoDB's snapshot reads do not conflict with later writes); the
// writes that must stay single (a ledger entry per event, say) need their
// own unique keys, which make the two owners' transactions conflict.
//
// It judges ownership, not time: a lease that expired on the server but
// that nobody took since still passes (no one else can have written under
// it); Valid judges time, on the local clock, without touching the server.
// Outside a transaction VerifyEpoch reads the current document.
func (h *Held) VerifyEpoch(ctx context.Context) error {
	l := h.Lease()
	var d struct {
		Owner *string `bson:"owner"`
		Epoch int64   `bson:"epoch"`
	}
	err := h.s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: leaseID(l.Group, l.Partition)}},
		options.FindOne().SetProjection(bson.D{{Key: fOwner, Value: 1}, {Key: fEpoch, Value: 1}})).Decode(&d)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("%w: group %q partition %d: %q no longer holds epoch %d: the lease document is gone",
			ErrLost, l.Group, l.Partition, l.Owner, l.Epoch)
	case err != nil:
		return wrapf(err, "verify the epoch of group %q partition %d", l.Group, l.Partition)
	}
	owner := ""
	if d.Owner != nil {
		owner = *d.Owner
	}
	if owner != l.Owner || d.Epoch != l.Epoch {
		what := fmt.Sprintf("owner %q holds it at epoch %d", owner, d.Epoch)
		if owner == "" {
			what = fmt.Sprintf("it was released (epoch %d)", d.Epoch)
		}
		return fmt.Errorf("%w: group %q partition %d: %q no longer holds epoch %d: %s",
			ErrLost, l.Group, l.Partition, l.Owner, l.Epoch, what)
	}
	return nil
}
