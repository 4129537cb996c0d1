// Command mongotest runs the MongoDB replica-set emulator (package
// mongotest) as a standalone server, so any MongoDB driver or tool can be
// pointed at it:
//
//	go run ./mongotest/cmd/mongotest -addr 127.0.0.1:27017
//
// With -shards N it serves a sharded cluster instead: a mongos on -addr in
// front of N emulated shards and a config server (NewShardedServer); the
// connection string it prints is the mongos':
//
//	go run ./mongotest/cmd/mongotest -addr 127.0.0.1:27017 -shards 2 -noop-interval 1s
//
// It prints its connection string, one line on stdout, and serves until
// interrupted (SIGINT, SIGTERM) or, with -exit-on-stdin-eof, until its
// standard input is closed.
//
// # Configuration
//
// The flags set what the package's options set in-process:
//
//	-addr               Addr               (port 0 picks a free one)
//	-replset            ReplicaSetName
//	-server-version     ServerVersion      (a release from 4.4 to 8.x, e.g. 8.2.1 or 5.0.0:
//	                                        what an older one lacks fails as it does)
//	-profile            AtlasSharedTier    (atlas-shared: what an Atlas M0/Flex cluster refuses)
//	                    Standalone         (standalone: a mongod without --replSet)
//	-user               User               (name:password:role@db[,role@db...], repeatable;
//	                                        turns authorization on)
//	-oplog-entries      OplogMaxEntries
//	-oplog-bytes        OplogMaxBytes
//	-oplog-age          OplogMaxAge
//	-noop-interval      NoopInterval
//	-ttl-interval       TTLMonitorInterval
//	-secondaries        Secondaries
//	-shards             NewShardedServer   (N > 0: a sharded cluster of N shards
//	                                        behind a mongos on -addr; the other
//	                                        flags apply to every shard)
//	-balancer-interval  BalancerInterval   (with -shards)
//	-mongoses           Mongoses           (with -shards: that many mongos, the
//	                                        first on -addr; the URI lists all)
//	-frozen-clock       Clock              (a clock that stands still at the given
//	                                        RFC 3339 time; only ferryTestAdvanceClock
//	                                        moves it)
//	-test-controls      TestControls
//	-v                  Logger             (connection-level problems on stderr)
//
// # Test controls
//
// A test that runs the emulator in another process (as Ferry's library
// tests do, through internal/emutest) cannot call Server methods. With
// -test-controls, the server accepts two commands on the admin database
// that do the same over the wire:
//
//	{ferryTestAdvanceClock: <ms>}   Server.AdvanceClock: moves the server's clock
//	                                by a whole number of milliseconds ($$NOW,
//	                                wallTime, cluster times, TTL expiry follow)
//	{ferryTestNow: 1}               Server.Now
//
// Both reply {now: <date>, unixNanos: <long>}, the server's clock. Without
// the flag they fail with CommandNotFound (59), saying that the flag
// enables them. Fail points need no flag: Server.FailCommand,
// FailRetryableWrites and ClearFailPoints are MongoDB's configureFailPoint
// command (failCommand, onPrimaryTransactionalWrite, mode "off").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/mongotest"
)

const usage = `usage: mongotest [flags]

Runs the MongoDB replica-set emulator (with -shards N, a sharded cluster
of N emulated shards behind a mongos); prints its connection string on
stdout and serves until interrupted.

Test controls (admin database, only with -test-controls; refused otherwise):
  {ferryTestAdvanceClock: <ms>}  move the server's clock by <ms> milliseconds
  {ferryTestNow: 1}              read the server's clock
  both reply {now: <date>, unixNanos: <long>}
Fail points are MongoDB's configureFailPoint (failCommand,
failGetMoreAfterCursorCheckout, onPrimaryTransactionalWrite); no flag needed.

Flags:
`

// optionFlags renames, in the options' errors, each option after its flag.
var optionFlags = strings.NewReplacer(
	"ServerVersion", "-server-version",
	"OplogMaxEntries", "-oplog-entries",
	"OplogMaxBytes", "-oplog-bytes",
	"OplogMaxAge", "-oplog-age",
	"Secondaries", "-secondaries",
	"User ", "-user ",
	"ReplicaSetName", "-replset",
	"Standalone", "-profile standalone",
	"BalancerInterval", "-balancer-interval",
	"Mongoses", "-mongoses",
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mongotest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:27017", "address to listen on (host:port; port 0 picks a free one)")
	rs := fs.String("replset", "rs0", "replica set name")
	version := fs.String("server-version", "8.0.4", "MongoDB release to emulate, from 4.4 to 8.x (what an older one lacks fails as it does)")
	profile := fs.String("profile", "", "a deployment to imitate: atlas-shared (an Atlas M0/Flex cluster: refuses $changeStreamSplitLargeEvent and most getParameter), standalone (a mongod without --replSet: no change streams)")
	var users userFlags
	fs.Var(&users, "user", "a user `name:password:role@db[,role@db...]` (built-in roles: read, readWrite, dbAdmin, dbOwner, readAnyDatabase, readWriteAnyDatabase, dbAdminAnyDatabase, clusterMonitor, root); repeatable; any -user turns authorization on")
	oplog := fs.Int("oplog-entries", 1_000_000, "oplog size in entries; older change-stream resume points fail with ChangeStreamHistoryLost")
	oplogBytes := fs.Int64("oplog-bytes", 1<<30, "oplog size in bytes (approximate size of its entries)")
	oplogAge := fs.Duration("oplog-age", 0, "drop oplog entries older than this (0: no age limit)")
	noop := fs.Duration("noop-interval", 10*time.Second, "periodic no-op oplog write while idle (0 disables it)")
	ttl := fs.Duration("ttl-interval", 60*time.Second, "TTL monitor interval (MongoDB's ttlMonitorSleepSecs)")
	secondaries := fs.Int("secondaries", 0, "number of read-only secondaries, each on a port of its own (listed in hello)")
	shards := fs.Int("shards", 0, "serve a sharded cluster of this many shards behind a mongos on -addr (0: a replica set)")
	balancer := fs.Duration("balancer-interval", 0, "with -shards: run the balancer this often (0: no balancer; moveChunk still works)")
	mongoses := fs.Int("mongoses", 1, "with -shards: the number of mongos, the first on -addr, the others on ports of their own (the printed URI lists them all)")
	frozen := fs.String("frozen-clock", "", "RFC 3339 time at which the server's clock stands still (moved only by ferryTestAdvanceClock); empty: the real clock")
	controls := fs.Bool("test-controls", false, "accept the test-control commands ferryTestAdvanceClock and ferryTestNow (see the usage above)")
	stdinEOF := fs.Bool("exit-on-stdin-eof", false, "also exit when standard input is closed (for a parent process: the server ends with it)")
	verbose := fs.Bool("v", false, "log connection-level problems to stderr")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mongotest: unexpected arguments %q (every setting is a flag; -h lists them)\n", fs.Args())
		return 2
	}

	opts := []mongotest.Option{
		mongotest.Addr(*addr),
		mongotest.ReplicaSetName(*rs),
		mongotest.ServerVersion(*version),
		mongotest.OplogMaxEntries(*oplog),
		mongotest.OplogMaxBytes(*oplogBytes),
		mongotest.OplogMaxAge(*oplogAge),
		mongotest.NoopInterval(*noop),
		mongotest.TTLMonitorInterval(*ttl),
		mongotest.Secondaries(*secondaries),
	}
	switch *profile {
	case "":
	case "atlas-shared":
		opts = append(opts, mongotest.AtlasSharedTier())
	case "standalone":
		opts = append(opts, mongotest.Standalone())
	default:
		fmt.Fprintf(stderr, "mongotest: -profile %q: known profiles: atlas-shared, standalone\n", *profile)
		return 2
	}
	opts = append(opts, users...)
	if *shards < 0 {
		fmt.Fprintf(stderr, "mongotest: -shards must not be negative, got %d\n", *shards)
		return 2
	}
	if *balancer != 0 && *shards == 0 {
		fmt.Fprintln(stderr, "mongotest: -balancer-interval needs -shards N (a replica set has no balancer)")
		return 2
	}
	if *mongoses != 1 && *shards == 0 {
		fmt.Fprintln(stderr, "mongotest: -mongoses needs -shards N (a replica set has no mongos)")
		return 2
	}
	if *mongoses < 1 {
		fmt.Fprintf(stderr, "mongotest: -mongoses must be at least 1, got %d\n", *mongoses)
		return 2
	}
	if *shards > 0 {
		opts = append(opts, mongotest.BalancerInterval(*balancer), mongotest.Mongoses(*mongoses))
	}
	if *frozen != "" {
		at, err := time.Parse(time.RFC3339Nano, *frozen)
		if err != nil {
			fmt.Fprintf(stderr, "mongotest: -frozen-clock %q: want an RFC 3339 time such as 2026-03-01T09:00:00Z\n", *frozen)
			return 2
		}
		opts = append(opts, mongotest.Clock(func() time.Time { return at }))
	}
	if *controls {
		opts = append(opts, mongotest.TestControls())
	}
	if *verbose {
		opts = append(opts, mongotest.Logger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	// Signals are caught before the connection string is printed: a parent
	// that reads it and stops the server at once gets a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var uri string
	if *shards > 0 {
		sc, err := mongotest.StartSharded(*shards, opts...)
		if err != nil {
			fmt.Fprintln(stderr, optionFlags.Replace(err.Error()))
			return 1
		}
		defer sc.Close()
		uri = sc.URI()
	} else {
		srv, err := mongotest.Start(opts...)
		if err != nil {
			// The options' errors name the options; name the flags instead.
			fmt.Fprintln(stderr, optionFlags.Replace(err.Error()))
			return 1
		}
		defer srv.Close()
		uri = srv.URI()
	}
	fmt.Fprintln(stdout, uri)
	if *stdinEOF {
		// The read ends when the parent closes the pipe or dies (the kernel
		// closes its end); whatever it sends is ignored.
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			stop()
		}()
	}
	<-ctx.Done()
	return 0
}

// userFlags collects -user flags, each a User option.
type userFlags []mongotest.Option

func (u *userFlags) String() string { return "" }

// Set parses name:password:role@db[,role@db...]; the password may not
// contain ':'.
func (u *userFlags) Set(v string) error {
	name, rest, ok1 := strings.Cut(v, ":")
	password, roleList, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || name == "" || roleList == "" {
		return fmt.Errorf("want name:password:role@db[,role@db...], e.g. reader:pw:read@shop")
	}
	var roles []mongotest.Role
	for _, r := range strings.Split(roleList, ",") {
		role, db, ok := strings.Cut(r, "@")
		if !ok || role == "" || db == "" {
			return fmt.Errorf("role %q: want role@db, e.g. read@shop or root@admin", r)
		}
		roles = append(roles, mongotest.Role{Role: role, DB: db})
	}
	*u = append(*u, mongotest.User(name, password, roles...))
	return nil
}
