package emutest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// EnvShardedURI names the environment variable that points tests of a
// sharded cluster at a real mongos instead of the emulator (mongotest's
// EnvShardedURI).
const EnvShardedURI = "FERRY_TEST_MONGODB_SHARDED_URI"

// NoopInterval sets how often each shard writes its periodic no-op while
// idle (mongotest's NoopInterval, a real server's periodicNoopIntervalSecs;
// 0 turns it off): an idle shard holds a change stream through the mongos
// back for up to that long.
func NoopInterval(d time.Duration) Option { return flagf("noop-interval", d.String()) }

// BalancerInterval runs the emulated cluster's balancer this often
// (mongotest's BalancerInterval; sharded clusters only).
func BalancerInterval(d time.Duration) Option { return flagf("balancer-interval", d.String()) }

// NewSharded starts an emulated sharded cluster of n shards (cmd/mongotest
// -shards n) for a test, whatever $FERRY_TEST_MONGODB_SHARDED_URI says, and
// stops it when the test ends. Its URI is the mongos'.
func NewSharded(tb testing.TB, n int, opts ...Option) *Server {
	tb.Helper()
	return New(tb, append([]Option{flagf("shards", strconv.Itoa(n))}, opts...)...)
}

// ShardedURI returns the mongos URI a test of a sharded cluster should
// use: $FERRY_TEST_MONGODB_SHARDED_URI when it is set (a real cluster),
// else a fresh emulated cluster of n shards started for the test with opts
// (NewSharded). The second result is the emulator, nil against a real
// cluster.
func ShardedURI(tb testing.TB, n int, opts ...Option) (string, *Server) {
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
func ShardedClient(tb testing.TB, n int, opts ...Option) (*mongo.Client, *Server) {
	tb.Helper()
	uri, s := ShardedURI(tb, n, opts...)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		tb.Fatalf("emutest: connect to the test cluster: %v", err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, s
}
