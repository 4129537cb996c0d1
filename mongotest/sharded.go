package mongotest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ShardedServer is an emulated sharded cluster: a mongos, the endpoint
// clients connect to, in front of N shards and a config server. Each shard
// is an emulated replica set (a Server) with an oplog of its own; the
// config server is one too, holding the cluster's metadata (config.shards,
// config.databases, config.collections, config.chunks). All members share
// one cluster clock, so the oplog times of different shards interleave as
// a real cluster's hybrid logical clock makes them.
//
// The mongos answers hello as a real one does (msg "isdbgrid", no setName,
// no hosts), so drivers see a sharded topology. It routes every command:
// an unsharded collection lives on its database's primary shard; a
// sharded one (shardCollection) is split into chunks placed on shards.
// Change streams opened through it merge one stream per shard and one on
// the config server, as mongos does (see mongos_stream.go).
//
//	sc := mongotest.NewShardedServer(2, mongotest.NoopInterval(200*time.Millisecond))
//	defer sc.Close()
//	client, _ := mongo.Connect(options.Client().ApplyURI(sc.URI()))
//
// The options apply to every shard (ServerVersion, NoopInterval, the oplog
// bounds, Clock, ...); Addr is the mongos' address.
type ShardedServer struct {
	mongos   *Server   // the first mongos
	mongoses []*Server // all of them
	config   *Server
	rt       *router // the first mongos' router
	meta     *clusterMeta
	clock    *clusterClock
	opts     config // the shards' configuration (AddShard starts more)

	closeOnce sync.Once
}

// shardingConfig holds a sharded cluster's settings on each member's
// configuration.
type shardingConfig struct {
	// clock is the cluster clock every member takes its times from
	// (nil: not a member of a sharded cluster).
	clock *clusterClock
	// balancerInterval is how often the balancer runs (0: it does not).
	balancerInterval time.Duration
	// mongoses is how many mongos the cluster has (0: one).
	mongoses int
	// lookup, on a shard, finds a sharded collection's document where it
	// lives now (clusterMeta.lookupDocument; nil elsewhere).
	lookup func(db, coll string, key bson.D) (found any, sharded bool)
}

// clusterClock is a sharded cluster's clock: every member stamps its
// oplog entries from it, so times are unique and increasing across the
// cluster (a simplification of MongoDB's hybrid logical clock, gossiped
// through $clusterTime, which keeps them increasing along causality).
type clusterClock struct {
	mu   sync.Mutex
	last bson.Timestamp
}

// next returns a cluster time strictly greater than every earlier one:
// the wall-clock second of now, with the increment counting times within
// it.
func (k *clusterClock) next(now time.Time) bson.Timestamp {
	k.mu.Lock()
	defer k.mu.Unlock()
	secs := uint32(now.Unix())
	if secs <= k.last.T {
		k.last = bson.Timestamp{T: k.last.T, I: k.last.I + 1}
	} else {
		k.last = bson.Timestamp{T: secs, I: 1}
	}
	return k.last
}

func (k *clusterClock) current() bson.Timestamp {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// BalancerInterval makes a sharded cluster (NewShardedServer) run a
// balancer every d: each round moves one chunk of a sharded collection
// from the shard holding the most of its chunks to the one holding the
// fewest, when they differ by more than one, with the chunk migration's
// fromMigrate writes. 0 (the default) runs no balancer; MoveChunk and the
// moveChunk command move chunks on demand. balancerStop (through a
// mongos) stops the rounds, returning once the round in progress has
// ended, and balancerStart starts them again (every 10 s, a real
// balancer's pace, on a cluster started without one). A replica set
// ignores it.
func BalancerInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sharding.balancerInterval = d })
}

// Mongoses gives a sharded cluster (NewShardedServer) n mongos, each on a
// port of its own (default 1); URI then lists them all. Each mongos has
// its own cursors, transactions and fail points, as on a real cluster, so
// tests that need a second mongos (the drivers' useMultipleMongoses) run.
// A replica set ignores it.
func Mongoses(n int) Option {
	return optionFunc(func(c *config) { c.sharding.mongoses = n })
}

// configNoopInterval is the config server's no-op interval: a real config
// server writes about every second (its own periodic writes), so it is
// 1 s, or the shards' interval when that is shorter; never off, as the
// config server's stream would otherwise hold every change stream back.
func configNoopInterval(shards time.Duration) time.Duration {
	if shards > 0 && shards < time.Second {
		return shards
	}
	return time.Second
}

// StartSharded starts a sharded cluster of n shards behind a mongos that
// listens on the configured address (a random loopback port by default).
func StartSharded(n int, opts ...Option) (*ShardedServer, error) {
	if n < 1 {
		return nil, fmt.Errorf("mongotest: a sharded cluster needs at least 1 shard, got %d", n)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.sharding.mongoses < 0 {
		return nil, fmt.Errorf("mongotest: Mongoses must not be negative, got %d", cfg.sharding.mongoses)
	}
	if cfg.sharding.balancerInterval < 0 {
		return nil, fmt.Errorf("mongotest: BalancerInterval must not be negative, got %v", cfg.sharding.balancerInterval)
	}
	clock := &clusterClock{}
	cfg.sharding.clock = clock
	sc := &ShardedServer{clock: clock}
	member := cfg
	member.addr = "127.0.0.1:0"
	member.testControls = false
	sc.opts = member

	cs := member
	cs.replSetName = "configRepl"
	cs.secondaries = 0
	cs.noopInterval = configNoopInterval(member.noopInterval)
	var err error
	if sc.config, err = start(cs, nil); err != nil {
		return nil, err
	}
	rcfg := cfg
	rcfg.secondaries = 0
	rcfg.noopInterval = 0
	rcfg.replSetName = "mongos" // not reported: a mongos has no replica set
	sc.meta = newClusterMeta(sc)
	var hosts []string
	for i := 0; i < max(cfg.sharding.mongoses, 1); i++ {
		if i > 0 {
			rcfg.addr = "127.0.0.1:0" // Addr is the first mongos'
		}
		rt := newRouter(sc.meta)
		srv, err := start(rcfg, func(s *Server) {
			s.eng.router = rt
			rt.e = s.eng
		})
		if err != nil {
			for _, m := range sc.mongoses {
				m.Close()
			}
			sc.config.Close()
			return nil, err
		}
		if i == 0 {
			sc.mongos, sc.rt = srv, rt
		}
		sc.mongoses = append(sc.mongoses, srv)
		hosts = append(hosts, srv.Addr())
	}
	uri := "mongodb://" + strings.Join(hosts, ",") + "/"
	for _, m := range sc.mongoses {
		m.uri = uri
	}
	for i := 0; i < n; i++ {
		if _, err := sc.AddShard(); err != nil {
			sc.Close()
			return nil, err
		}
	}
	sc.rt.startBalancer(cfg.sharding.balancerInterval)
	return sc, nil
}

// NewShardedServer starts a sharded cluster like StartSharded and panics
// if it cannot, the way httptest.NewServer does.
func NewShardedServer(n int, opts ...Option) *ShardedServer {
	s, err := StartSharded(n, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// URI returns the mongos' connection string, mongodb://127.0.0.1:PORT/
// (with Mongoses(n), every mongos' host:port).
func (s *ShardedServer) URI() string { return s.mongos.URI() }

// Addr returns the address the mongos listens on.
func (s *ShardedServer) Addr() string { return s.mongos.Addr() }

// Mongos returns the (first) mongos as a Server: its fail points
// (FailCommand, FailGetMoreAfterCursorCheckout) act at the mongos, before
// routing, as configureFailPoint sent to a real mongos does.
func (s *ShardedServer) Mongos() *Server { return s.mongos }

// Mongoses returns every mongos (Mongoses option), the first being Mongos.
func (s *ShardedServer) Mongoses() []*Server { return append([]*Server(nil), s.mongoses...) }

// ConfigServer returns the config server (a replica set of its own).
func (s *ShardedServer) ConfigServer() *Server { return s.config }

// Shards returns the shards in the cluster, in the order they were added
// (a removed shard is no longer listed).
func (s *ShardedServer) Shards() []*Server {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	var out []*Server
	for _, sh := range s.rt.shards {
		if !sh.removed {
			out = append(out, sh.srv)
		}
	}
	return out
}

// ShardIDs returns the ids of the shards in the cluster ("shard0", ...),
// in the order Shards lists them.
func (s *ShardedServer) ShardIDs() []string {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	var out []string
	for _, sh := range s.rt.shards {
		if !sh.removed {
			out = append(out, sh.id)
		}
	}
	return out
}

// Close stops the mongos, the shards and the config server. It is safe to
// call more than once.
func (s *ShardedServer) Close() {
	s.closeOnce.Do(func() {
		s.meta.stop()
		for _, m := range s.mongoses {
			m.Close()
		}
		s.rt.mu.Lock()
		shards := append([]*shard(nil), s.rt.shards...)
		s.rt.mu.Unlock()
		for _, sh := range shards {
			sh.srv.Close()
		}
		s.config.Close()
	})
}

// AdvanceClock moves every member's clock forward by d.
func (s *ShardedServer) AdvanceClock(d time.Duration) {
	for _, m := range s.mongoses {
		m.AdvanceClock(d)
	}
	s.config.AdvanceClock(d)
	s.rt.mu.Lock()
	shards := append([]*shard(nil), s.rt.shards...)
	s.rt.mu.Unlock()
	for _, sh := range shards {
		sh.srv.AdvanceClock(d)
	}
}

// Now returns the mongos' wall-clock time.
func (s *ShardedServer) Now() time.Time { return s.mongos.Now() }

// AddShard starts a new shard and adds it to the cluster, as addShard
// does: config.shards gets its document (change streams open through the
// mongos start reading it from then on). It returns the new shard.
func (s *ShardedServer) AddShard() (*Server, error) {
	sh, err := s.rt.addShard(context.Background())
	if err != nil {
		return nil, err
	}
	return sh.srv, nil
}

// EnvShardedURI names the environment variable that points tests of a
// sharded cluster at a real mongos instead of the emulator.
const EnvShardedURI = "FERRY_TEST_MONGODB_SHARDED_URI"

// NewSharded starts a sharded cluster of n shards for a test and stops it
// when the test ends.
func NewSharded(tb testing.TB, n int, opts ...Option) *ShardedServer {
	tb.Helper()
	s, err := StartSharded(n, opts...)
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// ShardedURI returns the mongos URI a test should use:
// $FERRY_TEST_MONGODB_SHARDED_URI when it is set (a real sharded cluster),
// else a fresh emulated cluster of n shards started for the test with opts
// and stopped at its end. The second result is the emulator, nil against
// a real cluster.
func ShardedURI(tb testing.TB, n int, opts ...Option) (string, *ShardedServer) {
	tb.Helper()
	if uri := os.Getenv(EnvShardedURI); uri != "" {
		return uri, nil
	}
	s := NewSharded(tb, n, opts...)
	return s.URI(), s
}

// ShardedClient returns a client connected to the mongos ShardedURI(tb, n,
// opts...) names, disconnected when the test ends, before the emulator
// stops.
func ShardedClient(tb testing.TB, n int, opts ...Option) (*mongo.Client, *ShardedServer) {
	tb.Helper()
	uri, s := ShardedURI(tb, n, opts...)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		tb.Fatalf("mongotest: connect to the test cluster: %v", err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, s
}

// documentKey is the documentKey of a change event about doc: {_id} on a
// replica set; on a shard of a sharded collection, the shard key's fields
// in order, then _id unless it is one of them, as a shard writes it in the
// oplog (change-streams.md: "all the components of the shard key in
// order, followed by the _id if the _id isn't part of the shard key").
// A field the document lacks is left out.
func (c *collection) documentKey(doc bson.D) bson.D {
	if c.shardKey == nil {
		return bson.D{doc[0]}
	}
	out := make(bson.D, 0, len(c.shardKey)+1)
	hasID := false
	for _, f := range c.shardKey {
		v, ok := lookupPath(doc, f)
		if !ok {
			continue
		}
		out = append(out, bson.E{Key: f, Value: v})
		hasID = hasID || f == "_id"
	}
	if !hasID {
		out = append(out, doc[0])
	}
	return out
}
