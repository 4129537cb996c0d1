// Command chaos reruns Ferry's reliability campaign from a seed: against
// the embedded MongoDB emulator, member processes of one consumer group
// (`ferry run`) deliver a seeded workload while a seeded mix of faults hits
// them, and a checker compares what the writer did with what the sink
// received.
//
//	go run ./cmd/ferry/chaos -seed 1 -runs 3      # three runs, seeds 1, 2, 3
//	go run ./cmd/ferry/chaos -runs 100            # a longer campaign
//	go run ./cmd/ferry/chaos -seed 42 -runs 1 -v  # rerun one run, with every fault listed
//
// Each run starts the emulator (TTL monitor on), a webhook receiver that
// verifies Standard Webhooks signatures and records every delivery, and
// -members `ferry run` processes (4 partitions, lease_ttl 2s, idempotent
// delivery to the receiver; or, for some seeds, the mongodb sink in
// transactional mode; or a tiny oplog with on_history_lost: backfill). A
// writer makes about 100 writes a second — inserts, updates, replaces and
// deletes of a few hundred documents, each giving its document the next
// version in field v — and some documents expire by TTL. Meanwhile the
// faults come one after the other: SIGKILL of a member and a new process
// in its place; SIGSTOP of a member for longer than lease_ttl, then
// SIGCONT (a zombie its successor must fence off); failCommand fail points
// on getMore, findAndModify, update, insert and commitTransaction
// (closeConnection, or errors 91, 10107, 11600, 189) on the members'
// connections; the receiver answering 503, or refusing connections and
// listening again on the same port.
//
// When the writes stop and every change is delivered (or a deadline
// passes), the members are stopped with SIGTERM (each must exit), `ferry
// verify` runs over the run's window (missing must be 0), and the checker
// reports lost changes, duplicate effects (one change applied under two
// event ids), per-document order violations, zombie effects (a first
// delivery from an older lease epoch than an earlier one of the same
// document), the worst delay from a write to its first delivery after each
// fault, and the partition restarts the members logged after each fault.
// When a history-loss run's member gave a partition's history up (its
// stream failed history-lost: the documented end of a backfill whose scan
// outlasts the oplog, for a sink without a sweeper), what it left
// undelivered is counted unrecoverable, not lost: the library said so
// rather than skipping it. It prints one line per run and a summary line
//
//	chaos: seed=S runs=R faults=F lost=0 dup_effects=0 order=0 worst_delay=… restarts=… … history_given_up=G unrecoverable=U failed_runs=0
//
// and exits 1 on any loss, order violation, zombie effect, missing change,
// duplicate effect in transactional mode, or a member that failed (a
// history-lost failure too, with the mongodb sink, whose backfill must
// end) or did not exit (naming the run's seed and keeping its member logs).
//
// With -topology sharded every run is against 2 emulated shards through
// a mongos (chaos.docs sharded on {_id: "hashed"} or a ranged {k: 1}),
// and the faults add chunk migrations (split and moveChunk; the balancer
// in half the runs), an idle shard (no writes for longer than its
// periodic no-op interval) and a shard primary stepping down:
//
//	go run ./cmd/ferry/chaos -topology sharded -runs 20
//
// Its members are `ferry run` processes: this binary run with a `run` or
// `verify` command line (and FERRY_CHAOS_CHILD set) is the ferry command.
// It is a command of its own because it links the emulator, which the
// ferry binary does not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(cli.Main()) // a member (ferry run) or ferry verify
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shardedDuration is -duration's default with -topology sharded.
const shardedDuration = 25 * time.Second

// runMain parses the command line and runs the campaign: 0 clean, 1 a
// run failed, 2 a bad command line.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "the first run's seed; run i uses seed+i")
	runs := fs.Int("runs", 1, "how many runs")
	members := fs.Int("members", 3, "member processes per run")
	duration := fs.Duration("duration", 15*time.Second, "how long each run writes (the faults come meanwhile)")
	drain := fs.Duration("drain", 100*time.Second, "how long a run waits, after the writes, for every change to be delivered "+
		"(more than -txn-lifetime plus ferry's 30 s retry backoff: a member killed inside a transaction holds its documents until the server ends it)")
	txnLifetime := fs.Duration("txn-lifetime", 60*time.Second, "the emulator's transactionLifetimeLimitSeconds (MongoDB's default: 60s)")
	rate := fs.Int("rate", 100, "writes a second")
	verbose := fs.Bool("v", false, "list every run's faults, ferry verify's summary and notes")
	keep := fs.Bool("keep", false, "keep every run's directory (configuration, member logs); failed runs' are always kept")
	topology := fs.String("topology", "replset", "replset (one replica set) or sharded (2 shards through a mongos, adding chunk migrations, "+
		"an idle shard and shard primaries stepping down to the faults; -duration defaults to 25s)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "chaos: "+format+"\n", a...)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *topology == "sharded" && !set["duration"] {
		*duration = shardedDuration // room for an idle window longer than a 10 s no-op interval, and the rest
	}
	switch {
	case *topology != "replset" && *topology != "sharded":
		return bad("-topology must be replset or sharded, got %q", *topology)
	case fs.NArg() > 0:
		return bad("unexpected argument %q (flags only; -h lists them)", fs.Arg(0))
	case *runs < 1:
		return bad("-runs must be at least 1, got %d", *runs)
	case *members < 1 || *members > 16:
		return bad("-members must be between 1 and 16, got %d", *members)
	case *duration < 5*time.Second:
		return bad("-duration must be at least 5s (the faults need room), got %v", *duration)
	case *drain < time.Second:
		return bad("-drain must be at least 1s, got %v", *drain)
	case *txnLifetime < time.Second || *txnLifetime%time.Second != 0:
		return bad("-txn-lifetime must be a whole number of seconds, at least 1s, got %v", *txnLifetime)
	case *rate < 1 || *rate > 1000:
		return bad("-rate must be between 1 and 1000 writes a second, got %d", *rate)
	}
	s := settings{seed: *seed, runs: *runs, members: *members, duration: *duration, drain: *drain, txnLifetime: *txnLifetime, rate: *rate,
		verbose: *verbose, keep: *keep, sharded: *topology == "sharded"}
	if !campaign(ctx, s, stdout) {
		return 1
	}
	return 0
}
