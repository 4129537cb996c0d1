// Package emutest gives the library's tests a MongoDB: the replica-set
// emulator (github.com/ferry-io/ferry/mongotest, command cmd/mongotest)
// run as a child process, or the real replica set that
// $FERRY_TEST_MONGODB_URI names.
//
// The emulator is a module of its own, and the library's tests reach it
// only out of process, as franz-go's kgo tests reach kfake or a broker: no
// package of the library's module, tests included, imports it, so `go mod
// tidy` in a module that imports the library neither needs the emulator's
// module nor adds it to the user's graph. This package imports nothing
// but the standard library and the MongoDB driver.
//
//	client, srv := emutest.Client(t) // srv is nil against a real server
//	srv.AdvanceClock(time.Minute)    // emulator only: tests skip when srv is nil
//
// # The emulator's binary
//
// The first emulator a test binary starts builds cmd/mongotest once (go
// build, from the workspace root: the directory above the test's with a
// go.work), into the user's cache directory, where test binaries of the
// same workspace share it. $FERRY_MONGOTEST_BIN names a binary built
// beforehand instead (CI builds one and every package's tests use it).
//
// # Guarantees
//
//   - Every emulator is a process of its own, started for one test and
//     killed and reaped when the test ends (when the test binary dies, the
//     emulator sees its stdin close and exits too): no process or goroutine
//     outlives the test.
//   - An emulator that exits before its test ends (a crash) fails the test,
//     with what it printed on stderr.
//   - The controls (AdvanceClock, Now, fail points) take effect before they
//     return: each is one command the emulator has answered.
package emutest
