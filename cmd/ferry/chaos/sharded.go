package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongotest"
)

// A sharded run (-topology sharded) runs against 2 emulated shards
// through a mongos: the members, the writer, the checker and ferry verify
// all connect to the mongos, as on a real cluster. The source, the
// projection and ferry's state live in databases whose primary shard is
// shard0; chaos.docs is sharded (on {_id: "hashed"} or {k: 1}), so its
// chunks are on both shards and shard1 holds nothing else: the shard the
// idle fault leaves without writes.

const sourceNS = "chaos.docs"

// shardedCluster is a sharded run's emulator as the campaign drives it:
// the failpoint faults act at the mongos (on the members' connections).
type shardedCluster struct{ *mongotest.ShardedServer }

func (c shardedCluster) FailCommand(fp mongotest.FailPoint) { c.Mongos().FailCommand(fp) }

func (c shardedCluster) ClearFailPoints() {
	for _, m := range c.Mongoses() {
		m.ClearFailPoints()
	}
	for _, s := range c.Shards() {
		s.ClearFailPoints()
	}
}

// setTxnLifetime sets transactionLifetimeLimitSeconds where transactions
// live: on the replica set, or on each shard (a mongod's parameter; a
// mongos has none).
func (e *env) setTxnLifetime(ctx context.Context, d time.Duration) error {
	cmd := bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: int32(d / time.Second)}}
	if e.sc == nil {
		return e.client.Database("admin").RunCommand(ctx, cmd).Err()
	}
	for _, sh := range e.sc.Shards() {
		c, err := mongo.Connect(options.Client().ApplyURI(sh.URI()).SetAppName("ferry-chaos"))
		if err != nil {
			return err
		}
		err = c.Database("admin").RunCommand(ctx, cmd).Err()
		_ = c.Disconnect(ctx)
		if err != nil {
			return fmt.Errorf("on shard %s: %w", sh.Addr(), err)
		}
	}
	return nil
}

// placeDatabases makes shard0 the primary shard of every database the
// run writes (enableSharding with primaryShard), so that shard1 holds
// chunks of chaos.docs and nothing else.
func (e *env) placeDatabases(ctx context.Context) error {
	for _, db := range []string{"chaos", "chaos_proj", "ferry"} {
		if err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "enableSharding", Value: db},
			{Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
			return fmt.Errorf("enableSharding %s: %w", db, err)
		}
	}
	return nil
}

// shardSource shards chaos.docs: on {_id: "hashed"} (its chunks spread
// over both shards at once), or on {k: 1}, split at k 500 with the upper
// half moved to shard1.
func (e *env) shardSource(ctx context.Context) error {
	admin := e.client.Database("admin")
	key := bson.D{{Key: "_id", Value: "hashed"}}
	if e.plan.shardKey == "ranged" {
		key = bson.D{{Key: "k", Value: 1}}
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: sourceNS}, {Key: "key", Value: key}}).Err(); err != nil {
		return fmt.Errorf("shardCollection %s: %w", sourceNS, err)
	}
	if e.plan.shardKey != "ranged" {
		return nil
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: sourceNS}, {Key: "middle", Value: bson.D{{Key: "k", Value: 500}}}}).Err(); err != nil {
		return fmt.Errorf("split %s: %w", sourceNS, err)
	}
	return admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: sourceNS}, {Key: "find", Value: bson.D{{Key: "k", Value: 500}}},
		{Key: "to", Value: "shard1"}}).Err()
}

// A chunkRange is one chunk of chaos.docs, from config.chunks: its bounds
// as config.chunks has them (moveChunk's bounds must be these), as
// numbers (MinKey and MaxKey as the lowest and highest int64), and its
// shard.
type chunkRange struct {
	minDoc, maxDoc bson.Raw
	min, max       int64 // [min, max); max is math.MaxInt64 for MaxKey
	maxKey         bool
	shard          string
}

// String shows the chunk's range: [-4543345050765240361, MaxKey).
func (c chunkRange) String() string {
	lo, hi := fmt.Sprint(c.min), fmt.Sprint(c.max)
	if c.min == math.MinInt64 {
		lo = "MinKey"
	}
	if c.maxKey {
		hi = "MaxKey"
	}
	return "[" + lo + ", " + hi + ")"
}

func (c chunkRange) holds(key int64) bool {
	return key >= c.min && (key < c.max || c.maxKey)
}

// routing is chaos.docs' routing table, in key order.
type routing []chunkRange

// shardOf is the shard that owns key ("" when no chunk holds it).
func (rt routing) shardOf(key int64) string {
	for _, c := range rt {
		if c.holds(key) {
			return c.shard
		}
	}
	return ""
}

// docKey is a document's shard key value as a number: the hash of its
// _id (hashed), or k (ranged).
func (p plan) docKey(id string, k int) int64 {
	if p.shardKey == "ranged" {
		return int64(k)
	}
	h, _ := hashkey.Hash(id) // a string always hashes
	return h
}

// routing reads chaos.docs' chunks from config.chunks through the mongos.
func (e *env) routing(ctx context.Context) (routing, error) {
	field := "_id"
	if e.plan.shardKey == "ranged" {
		field = "k"
	}
	cfg := e.client.Database("config")
	var coll struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := cfg.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: sourceNS}}).Decode(&coll); err != nil {
		return nil, fmt.Errorf("config.collections %s: %w", sourceNS, err)
	}
	// The emulator rewrites a collection's chunks (delete, then insert)
	// after each split or migration: an empty list is read again.
	for range 50 {
		cur, err := cfg.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: coll.UUID}})
		if err != nil {
			return nil, err
		}
		var docs []struct {
			Min   bson.Raw `bson:"min"`
			Max   bson.Raw `bson:"max"`
			Shard string   `bson:"shard"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return nil, err
		}
		if len(docs) == 0 {
			pause(ctx, 20*time.Millisecond)
			continue
		}
		var out routing
		for _, d := range docs {
			lo, _, err := boundOf(d.Min.Lookup(field))
			if err != nil {
				return nil, err
			}
			hi, maxKey, err := boundOf(d.Max.Lookup(field))
			if err != nil {
				return nil, err
			}
			out = append(out, chunkRange{minDoc: d.Min, maxDoc: d.Max, min: lo, max: hi, maxKey: maxKey, shard: d.Shard})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].min < out[j].min })
		return out, nil
	}
	return nil, errors.New("config.chunks lists no chunk of " + sourceNS)
}

// boundOf reads a chunk bound: MinKey, a number, or MaxKey.
func boundOf(v bson.RawValue) (n int64, maxKey bool, err error) {
	switch v.Type {
	case bson.TypeMinKey:
		return math.MinInt64, false, nil
	case bson.TypeMaxKey:
		return math.MaxInt64, true, nil
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		n, ok := v.AsInt64OK()
		if !ok {
			return 0, false, fmt.Errorf("chunk bound %v is not a whole number", v)
		}
		return n, false, nil
	}
	return 0, false, fmt.Errorf("chunk bound %v: not a number, MinKey or MaxKey", v)
}

// otherShard is the shard that is not s.
func otherShard(s string) string {
	if s == "shard0" {
		return "shard1"
	}
	return "shard0"
}

// migrateChunk splits the chunk f.pick names at its middle and moves one
// half to the other shard, with the split and moveChunk commands through
// the mongos, as an operator (or the balancer) does. A migration refused
// because the donor has transactions open (117; the balancer's may also
// race it) is tried again for up to 5 s; one still refused is said so in
// the description, and fails nothing.
func (e *env) migrateChunk(ctx context.Context, f faultSpec) (string, error) {
	rt, err := e.routing(ctx)
	if err != nil {
		return "", err
	}
	c := rt[f.pick%len(rt)]
	lo, hi := c.min, c.max
	if e.plan.shardKey == "ranged" { // k is in [0, 1000)
		lo, hi = max(lo, 0), min(hi, 1000)
	}
	mid := lo/2 + hi/2
	field, val := "_id", any(mid)
	if e.plan.shardKey == "ranged" {
		field, val = "k", int32(mid)
	}
	admin := e.client.Database("admin")
	if mid > c.min && mid < c.max {
		if err := admin.RunCommand(ctx, bson.D{{Key: "split", Value: sourceNS}, {Key: "middle", Value: bson.D{{Key: field, Value: val}}}}).Err(); err != nil {
			return "", fmt.Errorf("split %s at %s %d: %w", sourceNS, field, mid, err)
		}
		if rt, err = e.routing(ctx); err != nil {
			return "", err
		}
	}
	key := mid
	if f.pick%2 == 0 && mid > c.min {
		key = mid - 1 // the lower half
	}
	var target chunkRange
	for _, x := range rt {
		if x.holds(key) {
			target = x
		}
	}
	to := otherShard(target.shard)
	desc := fmt.Sprintf("migrate %s chunk %s %s → %s", sourceNS, target, target.shard, to)
	cmd := bson.D{{Key: "moveChunk", Value: sourceNS}, {Key: "bounds", Value: bson.A{target.minDoc, target.maxDoc}}, {Key: "to", Value: to}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		err := admin.RunCommand(ctx, cmd).Err()
		var se mongo.ServerError
		switch {
		case err == nil:
			return desc + fmt.Sprintf(" (%v)", time.Since(start).Round(time.Millisecond)), nil
		case errors.As(err, &se) && (se.HasErrorCode(117) || se.HasErrorCode(2)) && time.Now().Before(deadline):
			pause(ctx, 100*time.Millisecond)
			if rt, rerr := e.routing(ctx); rerr == nil { // the balancer may have moved or split it meanwhile
				for _, x := range rt {
					if x.holds(key) && x.shard != to {
						target = x
					}
				}
				cmd[1].Value = bson.A{target.minDoc, target.maxDoc}
			}
		case errors.As(err, &se) && (se.HasErrorCode(117) || se.HasErrorCode(2)):
			return desc + fmt.Sprintf(": refused for 5 s (%v)", err), nil
		default:
			return "", fmt.Errorf("%s: %w", desc, err)
		}
	}
}

// stepdownCommands are the commands a shard without a primary fails.
var stepdownCommands = []string{"insert", "update", "delete", "findAndModify", "find", "aggregate", "getMore", "count", "distinct",
	"commitTransaction", "abortTransaction", "bulkWrite", "create", "createIndexes", "listIndexes", "listCollections"}

// stepDown plays a shard's primary stepping down until another is
// elected: for f.length every command the shard gets (through the mongos,
// an internal client, hence failInternalCommands; from every client:
// members, the campaign's writer and projection watcher, which retry) fails with a state-change error, or its
// connection closes, as they do on a real shard while it has no primary;
// and the transactions open on it are aborted, as a stepdown aborts them
// (killAllSessions on the shard: without it a member's transaction whose
// commit failed would keep its documents for transactionLifetimeLimitSeconds,
// which a real new primary never inherits).
func (e *env) stepDown(ctx context.Context, f faultSpec) error {
	sh := e.sc.Shards()[f.shard]
	sh.FailCommand(mongotest.FailPoint{Commands: stepdownCommands, ErrorCode: f.code, CloseConnection: f.code == 0, FailInternalCommands: true})
	defer sh.ClearFailPoints()
	c, err := mongo.Connect(options.Client().ApplyURI(sh.URI()).SetAppName("ferry-chaos"))
	if err != nil {
		return err
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "killAllSessions", Value: bson.A{}}}).Err(); err != nil {
		return fmt.Errorf("stepdown shard%d: abort its transactions: %w", f.shard, err)
	}
	pause(ctx, f.length)
	return nil
}

// balancer runs balancerStop or balancerStart through the mongos.
func (e *env) balancer(ctx context.Context, on bool) error {
	cmd := "balancerStop"
	if on {
		cmd = "balancerStart"
	}
	if err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: cmd, Value: 1}}).Err(); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// idle leaves the idle shard without writes for f.length: the writer
// stays off the documents it owns (by the routing table read as the fault
// starts, the balancer stopped meanwhile, as no migration may write
// there), so only its periodic no-op moves its oplog, and the merged
// stream waits for it. Documents there that expire by TTL are still
// deleted (in the first few seconds).
func (e *env) idle(ctx context.Context, w *writer, f faultSpec) (string, error) {
	if e.plan.balancer > 0 {
		if err := e.balancer(ctx, false); err != nil {
			return "", err
		}
		defer func() { _ = e.balancer(ctx, true) }()
	}
	rt, err := e.routing(ctx)
	if err != nil {
		return "", err
	}
	owned := 0
	for _, c := range rt {
		if c.shard == idleShard {
			owned++
		}
	}
	w.setAvoid(func(id string, k int) bool { return rt.shardOf(e.plan.docKey(id, k)) == idleShard })
	pause(ctx, f.length)
	w.setAvoid(nil)
	return fmt.Sprintf("idle %s (%d of %d chunks) for %v, no-op every %v", idleShard, owned, len(rt), f.length.Round(time.Millisecond), e.plan.noop), nil
}
