// Command lasthop is our first users' story as a test: every TTL expiry of
// a MongoDB document causes its side effect exactly once, to the last hop,
// while the service is crashed, redeployed and partly down.
//
// The service is what they run on Cloud Run: three instances, each a Node
// receiver (examples/node-receiver/server.js on @ferry-io/receiver, whose
// effect and idempotency record commit in one MongoDB transaction) and a
// `ferry run` sidecar posting to its own instance's receiver on localhost.
// Documents with a TTL expire on an emulator (package mongotest, its TTL
// monitor on) while one fault lands with deliveries in flight:
//
//	lasthop -fault kill            # SIGKILL the sidecar of a partition owner
//	lasthop -fault redeploy        # SIGTERM every sidecar and receiver, start new ones
//	lasthop -fault receiver-down   # SIGKILL a partition owner's receiver, restart it 20 s later
//	lasthop -dedupe memory         # the pattern the library replaces: shows duplicates
//
// Each run counts the effects (the receivers' effects collection) against
// the ground truth (an independent change stream on the source, opened
// before the writes) and prints
//
//	run 1 fault=kill effects=300 deletes=300 duplicates=0 lost=0 absorbed=16 landed=yes …
//
// The exit status is 0 when every run landed its fault while effects were
// in flight and, with -dedupe library (the default), showed no duplicate
// and no lost effect; with -dedupe memory, when no effect was lost and at
// least one run showed duplicates (so the check can fail). It is 1
// otherwise, 2 for a bad command line.
//
// The sidecars are this binary re-executed as `ferry run` (package cli):
// it is a command of its own because it links the emulator, which the
// ferry binary does not. The receivers need node (20+) and the example's
// node_modules (npm ci in examples/node-receiver).
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

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

// childEnv marks a sidecar the command started: this binary run as
// `lasthop run -c <file>` is `ferry run`; under go test the binary is the
// test binary, whose TestMain runs the ferry command line it is given when
// the mark is set.
const childEnv = "FERRY_LASTHOP_CHILD"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		os.Exit(cli.Main()) // a sidecar: ferry run
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := lasthop(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "lasthop:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "lasthop:", err)
	os.Exit(1)
}

// usageError is a bad command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// lasthop parses args, runs the runs and judges them.
func lasthop(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	node, err := findNode(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "lasthop: %d run(s), fault=%s, dedupe=%s, %d TTL deletes each over %s, effect %s, lease_ttl %s, transaction lifetime %s, receiver %s (node %s)\n",
		o.runs, o.fault, o.dedupe, o.n, o.expireOver, o.effectDelay, o.leaseTTL, o.txnLifetime, o.server, node.version)
	var results []*result
	for k := 1; k <= o.runs; k++ {
		r, err := runOnce(ctx, o, node, k, out)
		if r != nil {
			fmt.Fprintln(out, r.line())
		}
		if err != nil {
			return fmt.Errorf("run %d: %w", k, err)
		}
		results = append(results, r)
	}
	return judge(o, results, out)
}

// judge prints the summary line and returns an error unless the runs
// showed what the mode promises.
func judge(o *settings, rs []*result, out io.Writer) error {
	var dups, lost, missed int
	for _, r := range rs {
		dups += r.duplicates
		lost += r.lost + r.unknown + r.otherCause
		if !r.landed() {
			missed++
		}
	}
	verdict := "ok"
	var err error
	switch {
	case missed > 0:
		err = fmt.Errorf("%d run(s) missed the fault window (no effect in flight when the fault landed): they prove nothing", missed)
	case lost > 0:
		err = fmt.Errorf("%d effect(s) lost or wrong over %d run(s)", lost, len(rs))
	case o.dedupe == dedupeLibrary && dups > 0:
		err = fmt.Errorf("%d duplicate effect(s) over %d run(s) with the library", dups, len(rs))
	case o.dedupe == dedupeMemory && dups == 0:
		err = fmt.Errorf("in-memory dedupe showed no duplicate over %d run(s): the scenario did not exercise a replay to another instance", len(rs))
	}
	if err != nil {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "lasthop: runs=%d fault=%s dedupe=%s duplicates=%d lost=%d %s\n", len(rs), o.fault, o.dedupe, dups, lost, verdict)
	return err
}
