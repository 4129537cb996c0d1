package mongotest_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/mongotest/internal/specdata"
)

// shardedSuites are the specifications run through an emulated mongos,
// each with the tests the sharded emulation is known to fail.
var shardedSuites = []suite{
	{name: "change-streams", knownFailures: map[string]string{}},
	{name: "transactions", knownFailures: transactionsKnownFailures},
	{name: "transactions-convenient-api", knownFailures: map[string]string{}},
	{name: "retryable-writes", knownFailures: retryableWritesKnownFailures},
	{name: "sessions", knownFailures: map[string]string{}},
	{name: "crud", knownFailures: crudKnownFailures},
}

// TestConformanceSharded runs the suites through a mongos in front of two
// emulated shards (or against FERRY_TEST_MONGODB_SHARDED_URI when it is
// set), so the tests whose runOnRequirements name the sharded topology run,
// and prints a line per suite:
//
//	conformance: sharded change-streams: N passed, M failed, K skipped
//
// The cluster has two mongos (tests whose clients use several need them).
// The shards write their periodic no-op every 200 ms, as test clusters
// lower periodicNoopIntervalSecs, so an idle shard holds a change stream
// back for at most that long.
func TestConformanceSharded(t *testing.T) {
	suiteFiles := make([][]string, len(shardedSuites))
	for si, s := range shardedSuites {
		suiteFiles[si] = specdata.Files(t, s.name)
	}
	var profiles []profile
	slots := 8
	if uri := os.Getenv(mongotest.EnvShardedURI); uri != "" {
		slots = 1
		profiles = []profile{{"server", func() (string, func()) { return uri, func() {} }}}
	} else {
		for _, v := range []string{"8.0.4", "8.2.1"} {
			profiles = append(profiles, profile{v, func() (string, func()) {
				sc := mongotest.NewShardedServer(2, mongotest.ServerVersion(v), mongotest.NoopInterval(200*time.Millisecond), mongotest.Mongoses(2))
				return sc.URI(), sc.Close
			}})
		}
	}
	for _, l := range runConformance(t, shardedSuites, suiteFiles, profiles, slots, "sharded ") {
		fmt.Println(l)
	}
}
