package main

import (
	"os"
	"strconv"

	"github.com/ferry-io/ferry/mongotest"
)

// oplogBytesEnv sizes the emulator's oplog for the backlog, so that
// nothing the bench reads falls off it.
const oplogBytesEnv = "FERRY_BENCH_OPLOG_BYTES"

// oplogEntriesEnv caps the emulator's oplog at a number of entries (the
// snapshot bench's oplog scenario).
const oplogEntriesEnv = "FERRY_BENCH_OPLOG_ENTRIES"

// runEmulator is the emulator child: a mongotest server on a free port
// until stdin closes. Its CPU and memory are its own, reported on request.
func runEmulator(out *childOut) error {
	entries := 1 << 30
	if n, err := strconv.Atoi(os.Getenv(oplogEntriesEnv)); err == nil && n > 0 {
		entries = n
	}
	opts := []mongotest.Option{mongotest.Addr("127.0.0.1:0"), mongotest.OplogMaxEntries(entries)}
	if n, err := strconv.ParseInt(os.Getenv(oplogBytesEnv), 10, 64); err == nil && n > 0 {
		opts = append(opts, mongotest.OplogMaxBytes(n))
	}
	srv, err := mongotest.Start(opts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	out.send(message{Kind: "ready", Ready: &ready{URI: srv.URI()}})
	out.serve(os.Stdin, nil)
	return nil
}

// startEmulator starts an emulator child whose oplog holds a backlog of n
// events several times over (the daemon's own writes go there too).
func startEmulator(n int) (*child, error) {
	bytes := max(int64(n)*8<<10, 1<<30)
	return startChild("emulator", []string{oplogBytesEnv + "=" + strconv.FormatInt(bytes, 10)})
}
