package group

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/backoff"
)

// watchOwnership kicks the session's rebalance whenever a lease changes
// owner or a member joins or leaves, by a change stream on the state
// database: a partition released by a member that stops gracefully is
// claimed at once, not at the next rebalance tick. Renewals and heartbeats
// (which only move expiry times) are filtered out on the server. A
// crashed member changes nothing, so its partitions still wait for the
// lease TTL and the tick. If the state store cannot open change streams,
// the ticks alone keep the group going; the watch is retried with backoff.
func (g *Group) watchOwnership(ctx context.Context, kick chan<- struct{}) {
	b := backoff.New(time.Second, time.Minute)
	pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{
		{Key: "ns.coll", Value: bson.D{{Key: "$in", Value: bson.A{g.leases.LeasesCollection().Name(), g.leases.MembersCollection().Name()}}}},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "delete", "replace"}}}}},
			bson.D{{Key: "updateDescription.updatedFields.owner", Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{{Key: "updateDescription.updatedFields.incarnation", Value: bson.D{{Key: "$exists", Value: true}}}},
		}},
	}}}}
	for ctx.Err() == nil {
		cs, err := g.cfg.state.Watch(ctx, pipeline, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			g.log.Debug("cannot watch the group's leases; rebalancing on the interval only", "err", err)
			backoff.Sleep(ctx, b.Next())
			continue
		}
		b.Reset()
		for cs.Next(ctx) {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
		if err := cs.Err(); err != nil && ctx.Err() == nil {
			g.log.Debug("the watch of the group's leases ended; reopening", "err", err)
			backoff.Sleep(ctx, b.Next())
		}
		_ = cs.Close(context.WithoutCancel(ctx))
	}
}
