// Package cli is the ferry command: its subcommands (run, validate,
// check, status, dlq, reset, snapshot, version, help) and the daemon `ferry run`
// runs. The binaries are thin mains around Run: cmd/ferry, cmd/ferry/demo, which
// also embeds the MongoDB emulator (the ferry binary does not link it),
// and cmd/ferry/bench (a module of its own), which runs the daemon through
// Run against the emulator and fake brokers to measure it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands are ferry's subcommands, in the order the usage lists them. It
// is set by init: the commands' own help refers back to it.
var commands []*command

func init() { commands = commandList() }

func commandList() []*command {
	return []*command{
		{
			name: "run", args: "-c ferry.yaml",
			summary: "deliver every configured stream to its sink (metrics, /healthz, /readyz, /status, status page)",
			doc: `Runs every stream of the configuration: this process joins each stream's
consumer group, takes its share of the partitions and delivers their changes
to the stream's sink, checkpointing as it goes. It serves /metrics, /healthz,
/readyz, /status (the JSON of docs/status.md) and a read-only status page at
/ on listen (or :$PORT when PORT is set). SIGTERM or Ctrl-C drains
the events in flight, saves the checkpoints and releases the leases, so
another member takes over at once.`,
			run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				err := runDaemon(ctx, args, stdout, stderr)
				switch {
				case err == nil:
					return 0
				case errors.Is(err, flag.ErrHelp):
					return 0
				case isFlagError(err):
					return 2 // the flag package printed the error and the usage on stderr
				}
				fmt.Fprintln(stderr, "ferry run:", err)
				return 1
			},
		},
		{
			name: "validate", args: "-c ferry.yaml",
			summary: "check a configuration file without connecting",
			doc: `Checks a configuration file without connecting to anything and reports
every problem with its path (streams[0].sink.webhook.url: ...). Exits 0 if
the file is valid, 1 if not.`,
			run: func(_ context.Context, args []string, stdout, stderr io.Writer) int {
				return runValidate(args, stdout, stderr)
			},
		},
		{
			name: "check", args: "-c ferry.yaml [-downtime 2h] [-json]",
			summary: "preflight against the real deployment: topology, version, change streams, features, privileges, oplog window, clocks",
			doc:     checkDoc,
			run:     runCheck,
		},
		{
			name: "status", args: "-c ferry.yaml [-json]",
			summary: "members, partitions, owners, epochs, checkpoint age and lag",
			doc: `Prints, for every stream of the configuration, its live members and each
partition's owner, lease epoch, checkpoint age, lag and state, read from the
state store. It can run from any machine that reaches the state store.
With -json it prints the document every member serves at /status instead
(its schema: docs/status.md).`,
			run: runStatus,
		},
		{
			name: "reset", args: "-c ferry.yaml -stream S [-yes]",
			summary: "delete a stopped stream's checkpoints: it starts again from source.start_at",
			doc:     resetDoc,
			run:     runReset,
		},
		{
			name: "verify", args: "-c ferry.yaml -stream S [-since 1h | -from TIME] [-to TIME] [-n 100]",
			summary: "reconcile: every event of a window applied, dead-lettered or pending; the missing ones listed",
			doc:     verifyDoc,
			run:     runVerify,
		},
		positionCommand(),
		snapshotCommand(),
		{
			name: "dlq", args: "list|replay -c ferry.yaml [flags]",
			summary: "dead-lettered events",
			doc: `Dead-lettered events are the events a stream gave up on (on_poison:
dead-letter), kept in the state store's dlq collection. "ferry dlq list"
shows them; "ferry dlq replay" re-delivers them.`,
			sub: []*command{
				{
					name: "dlq list", args: "-c ferry.yaml [-stream S] [-n 50] [-json]",
					summary: "list dead-lettered events: documentKey, attempts, the whole last error",
					doc:     dlqListDoc,
					run:     runDLQList,
				},
				{
					name: "dlq replay", args: "-c ferry.yaml [-stream S]",
					summary: "re-deliver dead-lettered events through their stream's sink, as the same events",
					doc:     dlqReplayDoc,
					run:     runDLQReplay,
				},
			},
		},
		{
			name: "demo", noFlags: true,
			summary: "the walk-through on an embedded MongoDB emulator: its own command, go run ./cmd/ferry/demo",
			doc: `The demo embeds the MongoDB emulator, which the ferry binary does not
link, so it is its own command. From a checkout of the source:

  go run ./cmd/ferry/demo [-n N] [-takeover-runs N [-partitions P] [-members M] [-lease-ttl D]]

It runs TTL expiries delivered once by a group of three ` + "`ferry run`" + `
members to a webhook receiver, one member killed with SIGKILL midway.
With -takeover-runs it measures instead how long partitions take to move
after SIGKILL and SIGTERM, and to spread again after a join.`,
			run: func(_ context.Context, _ []string, _, stderr io.Writer) int {
				fmt.Fprintln(stderr, "ferry demo: the demo embeds the MongoDB emulator, which this binary does not link; from a source checkout run: go run ./cmd/ferry/demo")
				return 2
			},
		},
		{
			name: "bench", noFlags: true,
			summary: "throughput and CPU per event of each sink and delivery mode: its own command, go run ./cmd/ferry/bench",
			doc: `The bench embeds the MongoDB emulator, kfake, nats-server and pstest, which
the ferry binary does not link, so it is its own command (and module).
From a checkout of the source:

  go run ./cmd/ferry/bench [-n 20000] [-only stdout,webhook,...] [-runs k] [-json]
  go run ./cmd/ferry/bench -rss-sweep        # peak RSS over 25k to 250k events
  go run ./cmd/ferry/bench -uri mongodb://…  # a real cluster instead of the emulator

It loads a backlog of 1 KiB inserts, runs ` + "`ferry run`" + ` with start_at before it
for each configuration (stdout, webhook at-least-once with 1 and 4
partitions, webhook idempotent, Kafka, NATS JetStream, Pub/Sub, the MongoDB
projection transactional) until the receiver has every event, and the Go
library alone with a no-op handler; it prints events/s, the ratio to a raw
driver loop, the CPU per event of Ferry, the emulator and the receiver
(each in its own process), and peak RSS.`,
			run: func(_ context.Context, _ []string, _, stderr io.Writer) int {
				fmt.Fprintln(stderr, "ferry bench: the bench embeds the MongoDB emulator and fake brokers, which this binary does not link; from a source checkout run: go run ./cmd/ferry/bench")
				return 2
			},
		},
		{
			name: "version", noFlags: true,
			summary: "module version, VCS revision and Go version of this binary",
			doc: `Prints the module version, the VCS revision, its commit time and whether
the work tree was modified, and the Go version the binary was built with.
Also: ferry -version.`,
			run: func(_ context.Context, _ []string, stdout, _ io.Writer) int {
				fmt.Fprintln(stdout, versionLine())
				return 0
			},
		},
		{
			name: "help", args: "[command]", noFlags: true,
			summary: "this list, or a command's help (also: ferry <command> -h)",
			doc:     `Prints the list of commands, or the usage and flags of one command.`,
			run: func(_ context.Context, args []string, stdout, stderr io.Writer) int {
				return runHelp(args, stdout, stderr)
			},
		},
	}
}

// Main runs the ferry command with the process's arguments, with SIGTERM
// and interrupts cancelling its context, and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// Run runs a ferry command line (args without the program name) and
// returns the exit code: 0 on success (and for help), 1 when the command
// failed, 2 for a bad command line.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr)
}

// run runs the command line args and returns the exit code: 0 on success
// (and for help), 1 when the command failed, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return runHelp(args[1:], stdout, stderr)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, rest, code := resolve(args, stderr)
	if cmd == nil {
		return code
	}
	if !cmd.hidden && cmd.name != "help" && wantsHelp(rest) {
		printHelp(stdout, cmd)
		return 0
	}
	return cmd.run(ctx, rest, stdout, stderr)
}
