// Command ferry delivers MongoDB change events reliably: `ferry run` runs
// every stream of a YAML configuration, and the other subcommands validate
// that file and inspect or repair the state store. `ferry help` lists them;
// `ferry <command> -h` prints one command's usage and flags.
//
//	go run ./cmd/ferry demo
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
)

// commands are ferry's subcommands, in the order the usage lists them. It
// is set by init: the commands' own help refers back to it.
var commands []*command

func init() { commands = commandList() }

func commandList() []*command {
	return []*command{
		{
			name: "run", args: "-c ferry.yaml",
			summary: "deliver every configured stream to its sink (metrics, /healthz, /readyz)",
			doc: `Runs every stream of the configuration: this process joins each stream's
consumer group, takes its share of the partitions and delivers their changes
to the stream's sink, checkpointing as it goes. It serves /metrics, /healthz
and /readyz on listen (or :$PORT when PORT is set). SIGTERM or Ctrl-C drains
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
			name: "status", args: "-c ferry.yaml",
			summary: "members, partitions, owners, epochs, checkpoint age and lag",
			doc: `Prints, for every stream of the configuration, its live members and each
partition's owner, lease epoch, checkpoint age, lag and state, read from the
state store. It can run from any machine that reaches the state store.`,
			run: runStatus,
		},
		{
			name: "reset", args: "-c ferry.yaml -stream S [-yes]",
			summary: "delete a stopped stream's checkpoints: it starts again from source.start_at",
			doc:     resetDoc,
			run:     runReset,
		},
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
			name: "demo", args: "[-n N] [-takeover-runs N]",
			summary: "TTL expiries delivered once by a 3-member group to a webhook, one member killed midway",
			doc: `Runs the whole data path against the embedded MongoDB emulator: a
TTL-indexed collection, a webhook receiver and three member processes
(each is ` + "`ferry run -c`" + ` with one configuration file the demo writes:
ferry run's defaults but lease_ttl 2s), one of them killed with SIGKILL
halfway through the writes. It ends with one line saying how many events
were written, expired, delivered, duplicated and lost, and how long the
takeover took. With -takeover-runs N it measures instead how long the
partitions take to move after a SIGKILL and after a SIGTERM, N times
each, and prints min/median/max.`,
			run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				err := runDemo(ctx, args, stdout)
				switch {
				case err == nil, errors.Is(err, flag.ErrHelp):
					return 0
				case isFlagError(err):
					fmt.Fprintf(stderr, "ferry demo: %v\n", err)
					printHelp(stderr, lookup("demo"))
					return 2
				}
				fmt.Fprintln(stderr, "ferry demo:", err)
				return 1
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
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
