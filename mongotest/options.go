package mongotest

import (
	"fmt"
	"log/slog"
	"time"
)

// An Option configures a Server. Options are applied in order by NewServer
// and Start.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	addr            string
	replSetName     string
	oplogMaxEntries int
	oplogMaxBytes   int64
	oplogMaxAge     time.Duration
	noopInterval    time.Duration
	ttlInterval     time.Duration
	now             func() time.Time
	logger          *slog.Logger
	maxMessageSize  int
	release         release
	secondaries     int
	testControls    bool
	atlasShared     bool
	standalone      bool
	users           []userSpec
	sharding        shardingConfig // NewShardedServer's settings (sharded.go)
	err             error          // from an option
}

// release is the MongoDB release the server reports.
type release struct{ major, minor, patch int }

func (v release) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

func (v release) atLeast(major, minor int) bool {
	return v.major > major || v.major == major && v.minor >= minor
}

// fcv is the release's featureCompatibilityVersion ("8.0"), which a
// server reports as its own major.minor once set up.
func (v release) fcv() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// wire is the release's maxWireVersion (4.4 → 9, 5.0 → 13, 6.0 → 17,
// 7.0 → 21, 8.0 → 25, 8.1 → 26, 8.2 → 27).
func (v release) wire() int32 {
	switch {
	case v.atLeast(8, 2):
		return 27
	case v.atLeast(8, 1):
		return 26
	case v.atLeast(8, 0):
		return 25
	case v.atLeast(7, 0):
		return 21
	case v.atLeast(6, 0):
		return 17
	case v.atLeast(5, 0):
		return 13
	}
	return 9
}

// hasSplitStage: $changeStreamSplitLargeEvent is new in 7.0 and 6.0.9.
func (v release) hasSplitStage() bool {
	return v.atLeast(7, 0) || v.major == 6 && v.minor == 0 && v.patch >= 9
}

// hasImages: pre- and post-images (changeStreamPreAndPostImages, the
// fullDocument modes whenAvailable and required, fullDocumentBeforeChange)
// and showExpandedEvents are new in 6.0.
func (v release) hasImages() bool { return v.atLeast(6, 0) }

// hasHashedIndexKey: $toHashedIndexKey came with the resharding work of
// 4.9/5.0 (the server's tests of it require FCV 4.9); 4.4 lacks it.
func (v release) hasHashedIndexKey() bool { return v.atLeast(4, 9) }

// hasBulkWrite: the client-level bulkWrite command is new in 8.0.
func (v release) hasBulkWrite() bool { return v.atLeast(8, 0) }

func defaultConfig() config {
	return config{
		addr:            "127.0.0.1:0",
		replSetName:     "rs0",
		oplogMaxEntries: 1_000_000,
		oplogMaxBytes:   1 << 30,
		noopInterval:    10 * time.Second,
		ttlInterval:     60 * time.Second,
		now:             time.Now,
		maxMessageSize:  48_000_000,
		release:         release{8, 0, 4},
	}
}

// ServerVersion sets the MongoDB release the server reports in buildInfo,
// hello (maxWireVersion), getParameter (featureCompatibilityVersion) and
// serverStatus: "8.0.4" (the default), a later 8.x, or an older release
// from 4.4 on, to see what a deployment that has not upgraded does.
// Behaviour new in a release follows it (for example nsType on create
// events from 8.1). An older release refuses, as it does, what it lacks:
//
//   - $changeStreamSplitLargeEvent (7.0, 6.0.9): Unrecognized pipeline
//     stage name (40324);
//   - pre- and post-images (6.0): fullDocument whenAvailable or required
//     (40575), fullDocumentBeforeChange and showExpandedEvents in
//     $changeStream, changeStreamPreAndPostImages in create (40415,
//     unknown field) and collMod (InvalidOptions, 72);
//   - $toHashedIndexKey (5.0): Unrecognized expression (168) in a change
//     stream's pipeline;
//   - the bulkWrite command (8.0): CommandNotFound (59).
//
// Everything else (event shapes, resume tokens) stays 8.0's.
func ServerVersion(v string) Option {
	return optionFunc(func(c *config) {
		var x release
		if n, err := fmt.Sscanf(v, "%d.%d.%d", &x.major, &x.minor, &x.patch); err != nil || n != 3 {
			c.err = fmt.Errorf("mongotest: ServerVersion %q: want MAJOR.MINOR.PATCH, e.g. \"8.2.1\"", v)
			return
		}
		if !x.atLeast(4, 4) || x.major > 8 {
			c.err = fmt.Errorf("mongotest: ServerVersion %q: releases from 4.4 to 8.x are emulated (the Go driver needs 4.4)", v)
			return
		}
		c.release = x
	})
}

// AtlasSharedTier makes the server refuse what an Atlas shared-tier
// cluster (M0 Free, Flex; formerly M2/M5) refuses, with Atlas's error,
// AtlasError (8000), "<what> is not allowed or the syntax is incorrect,
// see the Atlas documentation for more information":
//
//   - $changeStreamSplitLargeEvent in a change stream, at aggregate time
//     (connectors such as Estuary's test for this refusal);
//   - getParameter, except {getParameter: 1, authSchemaVersion: 1} and
//     {getParameter: 1, authenticationMechanisms: 1}, the two forms the
//     tier allows (so featureCompatibilityVersion cannot be read).
//
// The rest is a replica set as NewServer makes it. cmd/mongotest:
// -profile atlas-shared.
func AtlasSharedTier() Option { return optionFunc(func(c *config) { c.atlasShared = true }) }

// Standalone makes the server a standalone mongod (started without
// --replSet): hello names no replica set (no setName, hosts, electionId,
// lastWrite), replies carry no $clusterTime or operationTime, and what
// needs a replica set fails as there: a change stream with 40573 ("The
// $changeStream stage is only supported on replica sets"), a transaction
// with IllegalOperation (20). The URI has no replicaSet option, so drivers
// see a standalone server. Not with Secondaries. cmd/mongotest: -profile
// standalone.
func Standalone() Option { return optionFunc(func(c *config) { c.standalone = true }) }

// Addr sets the TCP address to listen on (default "127.0.0.1:0", a random
// loopback port).
func Addr(addr string) Option { return optionFunc(func(c *config) { c.addr = addr }) }

// ReplicaSetName sets the replica set name reported in hello (default "rs0").
func ReplicaSetName(name string) Option {
	return optionFunc(func(c *config) { c.replSetName = name })
}

// OplogMaxEntries bounds the oplog to the newest n entries (default
// 1,000,000), counted as a real server's oplog holds them: the writes of
// one transaction are one entry (its applyOps), kept and dropped together.
// Resuming a change stream from a point older than the oldest kept entry fails
// with ChangeStreamHistoryLost (286), as on a real server.
func OplogMaxEntries(n int) Option { return optionFunc(func(c *config) { c.oplogMaxEntries = n }) }

// OplogMaxBytes bounds the oplog by the approximate size of its entries
// (default 1 GiB).
func OplogMaxBytes(n int64) Option { return optionFunc(func(c *config) { c.oplogMaxBytes = n }) }

// OplogMaxAge drops oplog entries whose wall time is older than d (default:
// no age limit). The newest entry is always kept.
func OplogMaxAge(d time.Duration) Option { return optionFunc(func(c *config) { c.oplogMaxAge = d }) }

// NoopInterval sets how often the server writes a no-op oplog entry while
// idle, as a real replica set's periodic no-op writer does (default 10s; 0
// disables it). It makes change-stream postBatchResumeTokens advance on a
// quiet server.
func NoopInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.noopInterval = d }) }

// TTLMonitorInterval sets how often the TTL monitor runs (MongoDB's
// ttlMonitorSleepSecs, default 60s). Also settable at run time with
// setParameter: {ttlMonitorSleepSecs: N}.
func TTLMonitorInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.ttlInterval = d })
}

// Clock sets the server's wall clock (default time.Now). Cluster times,
// wallTime, $$NOW, $currentDate and TTL expiry all read it.
func Clock(now func() time.Time) Option { return optionFunc(func(c *config) { c.now = now }) }

// Logger sets a logger for connection-level problems (default: discard).
func Logger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// TestControls enables the test-control commands ({ferryTestAdvanceClock:
// ms} and {ferryTestNow: 1} on the admin database, see the package doc's
// "Test controls"), which let a test that runs the emulator in another
// process do what Server.AdvanceClock and Server.Now do in-process. They
// are off by default: a server started without this option refuses them
// with CommandNotFound (59) and says how to enable them.
func TestControls() Option { return optionFunc(func(c *config) { c.testControls = true }) }
