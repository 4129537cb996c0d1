package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// snapSettings is the command line of `bench snapshot`.
type snapSettings struct {
	docs         int           // documents in the collection (reads, filter, kill, writes)
	docSize      int           // bytes per document, about
	partitions   int           // the stream's partitions
	members      int           // member processes
	chunk        int           // SnapshotChunkSize
	scenarios    []string      // in snapScenarios' order
	writesPerS   float64       // the writes scenario's writers
	oplogEntries int           // the oplog scenario's oplog
	oplogDocs    int           // the oplog scenario's collection
	oplogWrites  float64       // the oplog scenario's writers
	leaseTTL     time.Duration // group.lease_ttl
	rate         float64       // SnapshotMaxRate per partition in kill and writes (0: none)
	poll         time.Duration // SnapshotPollInterval
	timeout      time.Duration // bound on one scenario
	json         bool
	logLevel     string // the members' log level
	logDir       string // where to keep the members' logs ("" nowhere)
	profile      string // where to write CPU profiles of the reads scenario's hashed snapshot ("" none)
}

// snapScenarios are the scenarios, in the order they run.
var snapScenarios = []string{"reads", "filter", "kill", "writes", "oplog"}

func parseSnapOptions(args []string, stderr io.Writer) (*snapSettings, error) {
	fs := flag.NewFlagSet("bench snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &snapSettings{members: 2}
	fs.IntVar(&o.docs, "docs", 1_000_000, "documents in the collection of the reads, filter, kill and writes scenarios")
	fs.IntVar(&o.docSize, "doc-size", 1024, "bytes per document (its BSON size, about), at least 64")
	fs.IntVar(&o.partitions, "partitions", 4, "the stream's partitions, run by 2 member processes")
	fs.IntVar(&o.chunk, "chunk", 1000, "documents per snapshot chunk (SnapshotChunkSize)")
	list := fs.String("scenarios", strings.Join(snapScenarios, ","), "the scenarios to run, comma-separated ("+strings.Join(snapScenarios, ", ")+")")
	fs.Float64Var(&o.writesPerS, "writes", 200, "writes per second during the writes scenario's snapshot (inserts, updates, deletes)")
	fs.IntVar(&o.oplogEntries, "oplog-entries", 300, "the oplog scenario's oplog, in entries")
	fs.IntVar(&o.oplogDocs, "oplog-docs", 100_000, "documents in the oplog scenario's collection")
	fs.Float64Var(&o.oplogWrites, "oplog-writes", 100, "writes per second during the oplog scenario's snapshot")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 10*time.Second, "group.lease_ttl: a killed member's partitions move after about this")
	fs.Float64Var(&o.rate, "snapshot-rate", 0, "SnapshotMaxRate, documents per second per partition, in the kill and writes scenarios (0: no cap)")
	fs.DurationVar(&o.poll, "poll", 200*time.Millisecond, "SnapshotPollInterval: how often members look for a request (its skew between partitions is in the snapshot's time)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on one scenario")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.logLevel, "log", "info", "the members' log level (their log is printed when a scenario fails)")
	fs.StringVar(&o.profile, "cpuprofile", "", "write CPU profiles of the emulator and the members during the reads scenario's hashed snapshot to this directory: snapshot-emulator.pprof, snapshot-member-<n>.pprof")
	fs.StringVar(&o.logDir, "member-logs", "", "write each member's whole log, and the emulators' stderr, to this directory: <scenario>-member-<n>.log, <scenario>-source.log, <scenario>-target.log")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./cmd/ferry/bench snapshot [flags]\n\n"+
			"Measures snapshots of a collection in a MongoDB emulator child, read by a consumer group of member\n"+
			"processes, against a raw driver find loop, and judges each figure against its target.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, &usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, &usageError{fmt.Errorf("unexpected argument %q: every setting is a flag (-h lists them)", fs.Arg(0))}
	}
	bad := func(format string, args ...any) (*snapSettings, error) {
		return nil, &usageError{fmt.Errorf(format, args...)}
	}
	switch {
	case o.docs < 1:
		return bad("-docs must be at least 1, got %d", o.docs)
	case o.docSize < 64:
		return bad("-doc-size must be at least 64 bytes, got %d", o.docSize)
	case o.partitions < 2:
		return bad("-partitions must be at least 2 (the partitions are shared by 2 members), got %d", o.partitions)
	case o.chunk < 1 || o.chunk > 1_000_000:
		return bad("-chunk must be 1 to 1000000 documents, got %d", o.chunk)
	case o.writesPerS <= 0 || o.oplogWrites <= 0:
		return bad("-writes and -oplog-writes must be positive rates, got %v and %v", o.writesPerS, o.oplogWrites)
	case o.oplogEntries < 10:
		return bad("-oplog-entries must be at least 10, got %d", o.oplogEntries)
	case o.oplogDocs < 1:
		return bad("-oplog-docs must be at least 1, got %d", o.oplogDocs)
	case o.leaseTTL < 100*time.Millisecond:
		return bad("-lease-ttl must be at least 100ms (group.lease_ttl), got %s", o.leaseTTL)
	case o.rate < 0:
		return bad("-snapshot-rate must be 0 (no cap) or positive, got %v", o.rate)
	case o.poll <= 0 || o.timeout <= 0:
		return bad("-poll and -timeout must be positive")
	}
	for _, dir := range []struct{ flag, path string }{{"-member-logs", o.logDir}, {"-cpuprofile", o.profile}} {
		if dir.path == "" {
			continue
		}
		if err := os.MkdirAll(dir.path, 0o755); err != nil {
			return bad("%s: %v", dir.flag, err)
		}
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("-log must be debug, info, warn or error, got %q", o.logLevel)
	}
	for _, s := range strings.Split(*list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(snapScenarios, s) {
			return bad("-scenarios: unknown scenario %q; the scenarios are %s", s, strings.Join(snapScenarios, ", "))
		}
		if !slices.Contains(o.scenarios, s) {
			o.scenarios = append(o.scenarios, s)
		}
	}
	if len(o.scenarios) == 0 {
		return bad("-scenarios names none; the scenarios are %s", strings.Join(snapScenarios, ", "))
	}
	slices.SortFunc(o.scenarios, func(a, b string) int { return slices.Index(snapScenarios, a) - slices.Index(snapScenarios, b) })
	return o, nil
}

func (o *snapSettings) runs(s string) bool { return slices.Contains(o.scenarios, s) }
