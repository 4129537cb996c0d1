package emutest

import (
	"strconv"
	"time"
)

// An Option configures an emulator: each is a flag of cmd/mongotest,
// named after the mongotest option it sets.
type Option interface{ args() []string }

type flagOption []string

func (f flagOption) args() []string { return f }

func flagf(name, value string) Option { return flagOption{"-" + name + "=" + value} }

// OplogMaxEntries bounds the oplog to the newest n entries (mongotest's
// OplogMaxEntries): resuming from an older point fails with
// ChangeStreamHistoryLost.
func OplogMaxEntries(n int) Option { return flagf("oplog-entries", strconv.Itoa(n)) }

// OplogMaxBytes bounds the oplog by the approximate size of its entries.
func OplogMaxBytes(n int64) Option { return flagf("oplog-bytes", strconv.FormatInt(n, 10)) }

// TTLMonitorInterval sets how often the TTL monitor runs.
func TTLMonitorInterval(d time.Duration) Option { return flagf("ttl-interval", d.String()) }

// FrozenClock makes the server's clock stand still at at: only
// Server.AdvanceClock moves it, so real time spent in a test never expires
// a lease or a TTL.
func FrozenClock(at time.Time) Option { return flagf("frozen-clock", at.Format(time.RFC3339Nano)) }

// Secondaries adds n read-only secondaries.
func Secondaries(n int) Option { return flagf("secondaries", strconv.Itoa(n)) }

// ServerVersion sets the MongoDB release (8.x) the server reports.
func ServerVersion(v string) Option { return flagf("server-version", v) }

// NoopInterval sets the periodic no-op an idle primary writes (each
// shard's, with Shards): MongoDB's periodicNoopIntervalSecs, 10 s by
// default.
func NoopInterval(d time.Duration) Option { return flagf("noop-interval", d.String()) }

// Shards makes the emulator a sharded cluster of n shards behind a mongos
// (cmd/mongotest -shards): the URI is the mongos', and the other options
// apply to every shard.
func Shards(n int) Option { return flagf("shards", strconv.Itoa(n)) }
