// Command mongotest runs the in-process MongoDB replica-set emulator as a
// standalone server, so any MongoDB driver or tool can be pointed at it:
//
//	go run ./mongotest/cmd/mongotest -addr 127.0.0.1:27017
//
// It prints its connection string and serves until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/mongotest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:27017", "address to listen on (host:port; port 0 picks a free one)")
	rs := flag.String("replset", "rs0", "replica set name")
	oplog := flag.Int("oplog-entries", 1_000_000, "oplog size in entries; older change-stream resume points fail with ChangeStreamHistoryLost")
	ttl := flag.Duration("ttl-interval", 60*time.Second, "TTL monitor interval (MongoDB's ttlMonitorSleepSecs)")
	secondaries := flag.Int("secondaries", 0, "number of read-only secondaries, each on a port of its own (listed in hello)")
	verbose := flag.Bool("v", false, "log connection-level problems to stderr")
	flag.Parse()

	opts := []mongotest.Option{
		mongotest.Addr(*addr),
		mongotest.ReplicaSetName(*rs),
		mongotest.OplogMaxEntries(*oplog),
		mongotest.TTLMonitorInterval(*ttl),
		mongotest.Secondaries(*secondaries),
	}
	if *verbose {
		opts = append(opts, mongotest.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	srv, err := mongotest.Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URI())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Close()
}
