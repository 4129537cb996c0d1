package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/mongotest"
)

// The campaign's stream: every member runs it from one generated file.
const (
	streamName = "chaos"
	memberApp  = "ferry-chaos-member" // the members' appName: fail points target it
	partitions = 4
	leaseTTL   = 2 * time.Second
)

// memberConfig is the configuration every member runs: `ferry run`'s
// defaults but for lease_ttl, the emulator as source and state store (its
// connections named memberApp, so fail points hit the members and not the
// campaign's own writer and readers), and the run's sink.
const memberConfig = `# Written by ferry chaos; every member runs: ferry run -c <this file>
listen: "127.0.0.1:0"
log: {level: info}
state:
  uri: %q
  database: ferry
streams:
  - name: %s
    source:
      uri: %q
      scope: {collection: chaos.docs}%s
    group:
      partitions: %d
      lease_ttl: %s
      member_id: ${FERRY_MEMBER_ID}
    delivery: {mode: %s}
    on_history_lost: %s
    sink:
%s
`

// cluster is the run's emulator: a replica set (*mongotest.Server) or a
// sharded cluster (shardedCluster), through whose mongos everything goes.
type cluster interface {
	URI() string
	Now() time.Time
	AdvanceClock(d time.Duration)
	// FailCommand sets a fail point where the members connect (the
	// replica set, or the mongos).
	FailCommand(fp mongotest.FailPoint)
	// ClearFailPoints clears every fail point (a sharded cluster's
	// shards' too).
	ClearFailPoints()
	Close()
}

// env is one run's emulator, receiver, collections and configuration.
type env struct {
	plan   plan
	srv    cluster
	sc     *mongotest.ShardedServer // a sharded run's cluster (srv wraps it)
	client *mongo.Client            // the campaign's own (no fail points)
	source *mongo.Collection
	target *mongo.Collection // the projection (mongodb sink)
	rcv    *receiver
	secret string
	dir    string
	config string
	leases *lease.Store
	closer []func()
}

func (e *env) close() {
	for i := len(e.closer) - 1; i >= 0; i-- {
		e.closer[i]()
	}
}

// newEnv starts the emulator (with its TTL monitor, the run's oplog bound
// and transactionLifetimeLimitSeconds), creates the source collection (TTL index, pre- and post-images)
// and the projection, starts the receiver and writes the configuration.
func newEnv(ctx context.Context, p plan, txnLifetime time.Duration, dir string) (_ *env, err error) {
	e := &env{plan: p, dir: dir}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	opts := []mongotest.Option{mongotest.TTLMonitorInterval(100 * time.Millisecond)}
	if p.oplog > 0 {
		opts = append(opts, mongotest.OplogMaxEntries(p.oplog))
	}
	if p.sharded {
		opts = append(opts, mongotest.NoopInterval(p.noop))
		if p.balancer > 0 {
			opts = append(opts, mongotest.BalancerInterval(p.balancer))
		}
		if e.sc, err = mongotest.StartSharded(2, opts...); err != nil {
			return nil, err
		}
		e.srv = shardedCluster{e.sc}
	} else {
		srv, err := mongotest.Start(opts...)
		if err != nil {
			return nil, err
		}
		e.srv = srv
	}
	e.closer = append(e.closer, e.srv.Close)
	if e.client, err = mongo.Connect(options.Client().ApplyURI(e.srv.URI()).SetAppName("ferry-chaos")); err != nil {
		return nil, err
	}
	e.closer = append(e.closer, func() { _ = e.client.Disconnect(context.Background()) })
	if err := e.setTxnLifetime(ctx, txnLifetime); err != nil {
		return nil, fmt.Errorf("set transactionLifetimeLimitSeconds: %w", err)
	}
	if p.sharded {
		if err := e.placeDatabases(ctx); err != nil {
			return nil, err
		}
	}
	images := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	for _, c := range []struct{ db, coll string }{{"chaos", "docs"}, {"chaos_proj", "docs"}} {
		cmd := append(bson.D{{Key: "create", Value: c.coll}}, images...)
		if err := e.client.Database(c.db).RunCommand(ctx, cmd).Err(); err != nil {
			return nil, fmt.Errorf("create %s.%s: %w", c.db, c.coll, err)
		}
	}
	e.source = e.client.Database("chaos").Collection("docs")
	e.target = e.client.Database("chaos_proj").Collection("docs")
	if p.sharded {
		if err := e.shardSource(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := e.source.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	e.secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	if e.rcv, err = newReceiver(key); err != nil {
		return nil, err
	}
	e.closer = append(e.closer, e.rcv.close)
	if e.leases, err = lease.New(e.client.Database("ferry")); err != nil {
		return nil, err
	}
	uri := withAppName(e.srv.URI(), memberApp)
	fullDoc, sinkYAML := "", fmt.Sprintf("      webhook: {url: %q, secret: \"${FERRY_CHAOS_SECRET}\"}", e.rcv.url())
	if p.sink == "mongodb" {
		// Post-images: each projection write carries the version of its
		// own change (updateLookup would read a later one).
		fullDoc = "\n      full_document: required"
		sinkYAML = "      mongodb: {database: chaos_proj, collection: docs}"
	}
	onLost := "fail"
	if p.historyLoss {
		onLost = "backfill"
	}
	e.config = filepath.Join(dir, "ferry.yaml")
	body := fmt.Sprintf(memberConfig, uri, streamName, uri, fullDoc, partitions, leaseTTL, p.mode, onLost, sinkYAML)
	if err := os.WriteFile(e.config, []byte(body), 0o600); err != nil {
		return nil, err
	}
	return e, nil
}

// owners returns partition → live lease owner.
func (e *env) owners(ctx context.Context) map[int]string {
	list, _ := e.leases.List(ctx, streamName)
	return lease.Owners(list)
}

// epochs returns partition → lease epoch.
func (e *env) epochs(ctx context.Context) map[int]int64 {
	list, _ := e.leases.List(ctx, streamName)
	m := map[int]int64{}
	for _, l := range list {
		m[l.Partition] = l.Epoch
	}
	return m
}

// started reports whether every partition recorded a position.
func (e *env) started(ctx context.Context) bool {
	n, _ := e.client.Database("ferry").Collection("checkpoints").CountDocuments(ctx,
		bson.D{{Key: "stream", Value: streamName}, {Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
	return n >= partitions
}

// describeOwners renders partition owners compactly: "m0-1[0 2] m1-1[1 3]".
func describeOwners(own map[int]string) string {
	per := map[string][]string{}
	var names []string
	for p := 0; p < partitions; p++ {
		o, ok := own[p]
		if !ok {
			continue
		}
		if per[o] == nil {
			names = append(names, o)
		}
		per[o] = append(per[o], fmt.Sprint(p))
	}
	var parts []string
	for _, o := range names {
		parts = append(parts, o+"["+strings.Join(per[o], " ")+"]")
	}
	return strings.Join(parts, " ")
}

// withAppName adds appName to a connection string.
func withAppName(uri, app string) string {
	if strings.Contains(uri, "?") {
		return uri + "&appName=" + app
	}
	return uri + "?appName=" + app
}
