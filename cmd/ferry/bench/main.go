// Command bench measures Ferry's whole delivery path, the code `ferry run`
// runs, on a backlog of change events, per sink and delivery mode, against
// a raw driver `for stream.Next()` loop over the same backlog:
//
//	go run ./cmd/ferry/bench                       # every configuration, 20,000 1 KiB inserts
//	go run ./cmd/ferry/bench -only stdout,webhook  # a subset
//	go run ./cmd/ferry/bench -runs 3 -json         # medians of three runs, as JSON
//	go run ./cmd/ferry/bench -rss-sweep            # peak RSS over backlogs of 25k to 250k
//	go run ./cmd/ferry/bench -uri mongodb://…      # against a real cluster
//	go run ./cmd/ferry/bench snapshot              # snapshots: 1M documents, 4 partitions on 2 members
//	go run ./cmd/ferry/bench snapshot -docs 5000 -scenarios kill,writes
//
// For each configuration it starts a MongoDB emulator in a child process,
// loads a backlog of -n inserts into a new collection, reads it once with
// a raw loop (untimed, so the emulator's per-event encodings are built as
// they are for the warm raw figure), starts a receiver for the sink in a
// second child process, and then runs the daemon in this process through
// cli.Run with a generated configuration whose start_at lies before the
// backlog. It measures from the first event the receiver counts to the
// last, and prints events per second, the ratio to the warm raw loop, the
// CPU time per event of this process (Ferry: nothing else runs in it while
// it is measured), of the emulator and of the receiver (each child's own
// getrusage), and the peak RSS of this process. A last row, library, runs
// the Go library alone (a ferry.Consumer with a no-op handler) the same way,
// the fastest of as many passes as the raw loop's warm reads counting, as
// the fastest warm read does for the raw loop.
//
// `bench snapshot` measures snapshots instead (snapshot.go): a raw find
// loop and snapshots of the same collection read by member processes,
// with and without a hashed index, a member killed halfway, writes and a
// small oplog during a snapshot, and a filtered request; each figure is
// printed with its target and PASS or FAIL.
//
// It is a command of its own, and a module of its own, because it links the
// emulator, kfake, nats-server and pstest, which the ferry binary and its
// module's requirements must not. It builds on Unix systems (getrusage);
// the peak RSS per configuration is Linux's VmHWM, reset between
// configurations (elsewhere: the process's lifetime peak).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runChild(role))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runBench(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// usageError is a bad command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
