package group

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
)

// seedOrigin gives every partition that has no checkpoint yet the group's
// common origin: a checkpoint with no token and the source's current
// cluster time, from which the partition's first consumer opens its stream
// (startAtOperationTime). Without it, each partition of a new group would
// start at whatever "now" was when it first opened, and events written
// between the group's start and a partition's late first open (a member
// slow to start, a hand-off before the first owner opened the stream)
// would belong to no partition.
//
// Every member seeds before it runs any partition, and a seed is written
// only where nothing is stored (compare-and-set on version 0), so each
// partition's origin is no later than the moment any member of the group
// first ran a partition. It is used only when the consumer options start
// at StartNow (the default).
//
// With ferry.StartAtCheckpointsOf, the origin is the other stream's oldest
// position instead (ferry.StartPosition.Time): the lossless start of a new
// definition. A start position that cannot be resolved is a failure
// (ferry.ErrStartPosition).
func (g *Group) seedOrigin(ctx context.Context, start ferry.StartPosition) error {
	cfg := &g.cfg
	stored, err := g.cps.List(ctx, cfg.name)
	if err != nil {
		return fmt.Errorf("group: read the checkpoints of %s: %w", cfg.name, err)
	}
	have := make(map[int]bool, len(stored))
	for _, cp := range stored {
		have[cp.Partition] = true
	}
	var missing []int
	for p := range cfg.partitions {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var t bson.Timestamp
	note := "group origin: starts at clusterTime %d.%d"
	if from := start.FromStream(); from != "" {
		if t, err = start.Time(ctx); err != nil {
			return err // a failure when it matches ferry.ErrStartPosition
		}
		note = "group origin: starts where stream " + strconv.Quote(from) + "'s checkpoints are, clusterTime %d.%d"
	} else if t, err = g.operationTime(ctx); err != nil {
		return err
	}
	for _, p := range missing {
		_, err := g.cps.Save(ctx, checkpoint.Checkpoint{Stream: cfg.name, Partition: p, ClusterTime: t,
			State: checkpoint.StateRunning, Note: fmt.Sprintf(note, t.T, t.I)})
		if err != nil && !errors.Is(err, checkpoint.ErrFenced) { // fenced: another member seeded it first
			return fmt.Errorf("group: seed partition %d of %s: %w", p, cfg.name, err)
		}
	}
	g.log.Info("group origin", "partitions", len(missing), "clusterTime", fmt.Sprintf("%d.%d", t.T, t.I))
	return nil
}

// operationTime returns the source's current cluster time, from the
// operationTime every replica-set reply carries.
func (g *Group) operationTime(ctx context.Context) (bson.Timestamp, error) {
	raw, err := g.client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("group: read the source's cluster time: %w", err)
	}
	t, i, ok := raw.Lookup("operationTime").TimestampOK()
	if !ok {
		return bson.Timestamp{}, errors.New("group: the source's reply carries no operationTime: a change stream needs a replica set or sharded cluster")
	}
	return bson.Timestamp{T: t, I: i}, nil
}
