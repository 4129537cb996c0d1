package emutest

import (
	"os"
	"testing"
	"time"
)

// BalancerInterval runs the emulated cluster's balancer this often
// (mongotest's BalancerInterval; sharded clusters only).
func BalancerInterval(d time.Duration) Option { return flagf("balancer-interval", d.String()) }

// NewSharded starts an emulated sharded cluster of n shards (cmd/mongotest
// -shards n) for a test, whatever $FERRY_TEST_MONGODB_SHARDED_URI says, and
// stops it when the test ends. Its URI is the mongos'.
func NewSharded(tb testing.TB, n int, opts ...Option) *Server {
	tb.Helper()
	return New(tb, append([]Option{Shards(n)}, opts...)...)
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
