package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestCorruptLeaseRepairedAboveEveryEpoch: a partition's lease gets epoch
// "x" by hand while its fence documents record epoch 9 (a transactional
// owner's). The member the partition is assigned to replaces the lease —
// at an epoch no lower than any the partition's checkpoint and fences
// record — and, once the replacement expires (one lease TTL), owns the
// partition at the epoch above them all (10), so that neither its
// checkpoint claim nor its fence is refused, and every earlier owner's
// write is.
func TestCorruptLeaseRepairedAboveEveryEpoch(t *testing.T) {
	e := newFenv(t)
	a := e.join("a", 1)
	poll.Until(t, 20*time.Second, func() error {
		if _, ok := a.g.Owned()[0]; !ok {
			return fmt.Errorf("a owns no partition yet: %+v", a.g.Status())
		}
		return nil
	})
	a.stop()
	ctx := context.Background()
	if _, err := e.state.Collection("fences").InsertOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "group", Value: "s"},
		{Key: "partition", Value: 0}, {Key: "slot", Value: 3}}}, {Key: "epoch", Value: int64(9)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.state.Collection("leases").UpdateOne(ctx, bson.D{{Key: "_id", Value: "s/0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: "x"}}}}); err != nil {
		t.Fatal(err)
	}
	b := e.join("b", 1)
	poll.Until(t, 20*time.Second, func() error {
		if epoch, ok := b.g.Owned()[0]; !ok || epoch != 10 {
			return fmt.Errorf("b owns partition 0 at epoch %d (%v), want 10: %+v", epoch, ok, b.g.Status())
		}
		return nil
	})
	var cp struct {
		Epoch int64 `bson:"epoch"`
	}
	poll.Until(t, 20*time.Second, func() error {
		if err := e.state.Collection("checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: "s/0"}}).Decode(&cp); err != nil || cp.Epoch != 10 {
			return fmt.Errorf("checkpoint epoch %d (%v), want 10: b claimed it", cp.Epoch, err)
		}
		return nil
	})
}
