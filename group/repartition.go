package group

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/lease"
)

// ErrGroupRunning: Repartition found live members; stop the group first.
var ErrGroupRunning = errors.New("group: members are still running")

// Repartition changes a stream's partition count. It is never implicit:
// run it with the group stopped. Every new partition starts from the oldest
// checkpoint of the old partitions, so no event is skipped; events between
// that point and each old partition's own position are delivered again,
// which the ledger absorbs in the idempotent and transactional modes. The
// new partitions' checkpoints carry no identity and epoch 0: the first
// consumer to run each one records the new definition under its lease epoch.
func Repartition(ctx context.Context, state *mongo.Database, name string, partitions int) error {
	if partitions < 1 {
		return fmt.Errorf("group: Repartition: the partition count must be at least 1, got %d", partitions)
	}
	ls, err := lease.New(state)
	if err != nil {
		return err
	}
	members, err := ls.Members(ctx, name)
	if err != nil {
		return err
	}
	if len(members) > 0 {
		return fmt.Errorf("%w: %d live member(s) in %q; stop them, then repartition", ErrGroupRunning, len(members), name)
	}
	store, err := mongostore.New(state)
	if err != nil {
		return err
	}
	old, err := store.List(ctx, name)
	if err != nil {
		return err
	}
	var oldest *checkpoint.Checkpoint
	for i := range old {
		cp := &old[i]
		if cp.State != checkpoint.StateRunning && cp.State != "" {
			return fmt.Errorf("group: Repartition: partition %d is %s (%s); resolve it first", cp.Partition, cp.State, cp.Note)
		}
		if cp.Token == nil {
			continue
		}
		if oldest == nil || cp.ClusterTime.Before(oldest.ClusterTime) {
			oldest = cp
		}
	}
	for _, cp := range old {
		if err := store.Delete(ctx, name, cp.Partition, cp.Version); err != nil {
			return fmt.Errorf("group: Repartition: remove partition %d's checkpoint: %w", cp.Partition, err)
		}
	}
	if _, err := ls.LeasesCollection().DeleteMany(ctx, bson.D{{Key: "group", Value: name}, {Key: "partition", Value: bson.D{{Key: "$gte", Value: partitions}}}}); err != nil {
		return fmt.Errorf("group: Repartition: remove surplus leases: %w", err)
	}
	if oldest == nil {
		return nil // nothing consumed yet: the new partitions start as configured
	}
	for p := 0; p < partitions; p++ {
		cp := checkpoint.Checkpoint{Stream: name, Partition: p, Token: oldest.Token, ClusterTime: oldest.ClusterTime,
			Epoch: 0, Note: fmt.Sprintf("repartitioned from %d to %d partitions", len(old), partitions)}
		if _, err := store.Save(ctx, cp); err != nil {
			return fmt.Errorf("group: Repartition: write partition %d's checkpoint: %w", p, err)
		}
	}
	return nil
}
