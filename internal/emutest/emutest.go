package emutest

import (
	"context"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// EnvURI names the environment variable that points tests at a real
// replica set instead of the emulator.
const EnvURI = "FERRY_TEST_MONGODB_URI"

// New starts an emulator for a test, whatever $FERRY_TEST_MONGODB_URI
// says, and stops it when the test ends.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := start(tb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// URI returns the MongoDB URI a test should use: $FERRY_TEST_MONGODB_URI
// when it is set (a real replica set), else a fresh emulator started for
// the test with opts and stopped at its end. The second result is the
// emulator, nil against a real server: tests that need emulator-only
// controls (AdvanceClock, fail points) skip when it is nil.
func URI(tb testing.TB, opts ...Option) (string, *Server) {
	tb.Helper()
	if uri := os.Getenv(EnvURI); uri != "" {
		return uri, nil
	}
	s := New(tb, opts...)
	return s.URI(), s
}

// Client returns a client for a test, connected to the server URI(tb,
// opts...) names (a fresh emulator, or $FERRY_TEST_MONGODB_URI), and
// disconnected when the test ends, before the emulator stops. The second
// result is the emulator, nil against a real server, as with URI. A test
// that needs other client options (a command monitor, a shorter server
// selection timeout) calls URI and connects itself.
func Client(tb testing.TB, opts ...Option) (*mongo.Client, *Server) {
	tb.Helper()
	uri, s := URI(tb, opts...)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		tb.Fatalf("emutest: connect to the test server: %v", err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, s
}

// EnvShardedURI names the environment variable that points tests of a
// sharded cluster at a real mongos instead of the emulator.
const EnvShardedURI = "FERRY_TEST_MONGODB_SHARDED_URI"

// ShardedClient is Client for a sharded cluster: a client of the mongos
// $FERRY_TEST_MONGODB_SHARDED_URI names, or of a fresh emulated cluster of
// n shards (Shards(n) with opts). The second result is nil against a real
// cluster.
func ShardedClient(tb testing.TB, n int, opts ...Option) (*mongo.Client, *Server) {
	tb.Helper()
	uri := os.Getenv(EnvShardedURI)
	var s *Server
	if uri == "" {
		s = New(tb, append([]Option{Shards(n)}, opts...)...)
		uri = s.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		tb.Fatalf("emutest: connect to the test cluster: %v", err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, s
}
