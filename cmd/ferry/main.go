// Command ferry delivers MongoDB change events reliably. For now it has one
// subcommand, demo, which runs the whole data path against the embedded
// MongoDB emulator:
//
//	go run ./cmd/ferry demo
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `ferry — react to MongoDB changes reliably

Usage:
  ferry run -c ferry.yaml       deliver every configured stream to its sink (metrics, /healthz, /readyz)
  ferry validate -c ferry.yaml  check a configuration file without connecting
  ferry status -c ferry.yaml    members, partitions, owners, epochs, checkpoint age and lag
  ferry reset -c ferry.yaml -stream S
                                delete a stopped stream's checkpoints (after a changed definition)
  ferry dlq list|replay -c ferry.yaml [-stream S]
                                dead-lettered events; replay re-delivers each through the stream's sink
                                as the same event (change or backfill) with its original event id
  ferry demo [-n N]             TTL expiries delivered once by a 3-member group to a webhook, one member killed midway
  ferry help                    show this help
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		if err := runDemo(ctx, args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, "ferry demo:", err)
			return 1
		}
		return 0
	case "run":
		if err := runDaemon(ctx, args[1:], stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "ferry run:", err)
			return 1
		}
		return 0
	case "validate":
		return runValidate(args[1:], stdout, stderr)
	case "demo-member": // a member process of ferry demo
		if err := runDemoMember(args[1:]); err != nil {
			fmt.Fprintln(stderr, "ferry demo-member:", err)
			return 1
		}
		return 0
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "reset":
		return runReset(ctx, args[1:], stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ferry: unknown command %q\n\n%s", args[0], usage)
	return 2
}
