package ferry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// What a snapshot (snapshot.go) needs to know of the source: the server's
// time, the collections in scope, a collection's shard key; and waiting
// for the events it handed to the lanes.

// serverTime is the server's clock (hello's localTime).
func (r *runner) serverTime(ctx context.Context) (time.Time, error) {
	var hello struct {
		LocalTime time.Time `bson:"localTime"`
	}
	if err := r.c.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return time.Time{}, fmt.Errorf("ferry: backfill: read the server's time: %w", err)
	}
	return hello.LocalTime, nil
}

// scopeNamespaces lists the collections the stream watches.
func (r *runner) scopeNamespaces(ctx context.Context) ([]Namespace, error) {
	scope := r.c.cfg.scope
	if scope.Coll != "" {
		return []Namespace{{DB: scope.DB, Coll: scope.Coll}}, nil
	}
	dbs := []string{scope.DB}
	if scope.DB == "" {
		names, err := r.c.client.ListDatabaseNames(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("ferry: backfill: list databases: %w", err)
		}
		dbs = dbs[:0]
		for _, n := range names {
			switch n {
			case "admin", "local", "config":
				continue
			}
			dbs = append(dbs, n)
		}
	}
	var out []Namespace
	for _, db := range dbs {
		names, err := r.c.client.Database(db).ListCollectionNames(ctx, bson.D{{Key: "type", Value: "collection"}})
		if err != nil {
			return nil, fmt.Errorf("ferry: backfill: list collections of %s: %w", db, err)
		}
		for _, n := range names {
			if len(n) >= 7 && n[:7] == "system." {
				continue
			}
			out = append(out, Namespace{DB: db, Coll: n})
		}
	}
	return out, nil
}

// shardKeyOf is the key pattern of collection ns when it is sharded
// (ShardKeyOf), so that snapshot rows carry the documentKey its changes
// carry; nil on a replica set and for an unsharded collection. When
// config.collections cannot be read, a replica set's rows are keyed {_id}
// as its changes are (a warning), but through a mongos that would key them
// apart from their changes: the snapshot fails, saying which privilege is
// missing.
func (r *runner) shardKeyOf(ctx context.Context, ns Namespace) (bson.Raw, error) {
	key, err := ShardKeyOf(ctx, r.c.client, ns)
	if err == nil || ctx.Err() != nil {
		return key, err
	}
	var hello struct {
		Msg string `bson:"msg"`
	}
	if herr := r.c.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); herr != nil || hello.Msg == "isdbgrid" {
		return nil, fmt.Errorf("%w; through a mongos a snapshot row's documentKey needs the collection's shard key: "+
			"grant the source user find on config.collections (for instance the read role on the config database)", err)
	}
	r.c.log.Warn("snapshot: cannot read config.collections; on this replica set the rows carry documentKey {_id}",
		"ns", ns.String(), "err", err)
	return nil, nil
}

// waitScanned waits until every event the scan handed to the lanes is
// finished or abandoned, or until ctx ends (a stop, or the partition
// failing): the lanes then drain, with their deadline, only after the read
// (and so this scan) has returned; the events still in them let go of wg
// as they finish or are abandoned.
func waitScanned(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
