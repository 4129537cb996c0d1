package mongotest

import (
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// The test-control commands do over the wire what a test in the same
// process does with Server methods, for tests that run the emulator as a
// child process (cmd/mongotest -test-controls). They are not MongoDB
// commands: a server started without the TestControls option refuses them.
const (
	// {ferryTestAdvanceClock: <ms>} moves the server's clock by a whole
	// number of milliseconds, as Server.AdvanceClock does; it replies
	// {now: <date>, unixNanos: <long>}, the clock after the move.
	cmdNameAdvanceClock = "ferryTestAdvanceClock"
	// {ferryTestNow: 1} replies {now: <date>, unixNanos: <long>}, the
	// server's clock, as Server.Now returns it (unixNanos to the
	// nanosecond, now to the millisecond as every BSON date).
	cmdNameNow = "ferryTestNow"
)

func errTestControlsOff(name string) *cmdError {
	return errorf(mongoerr.CodeCommandNotFound,
		"no such command: '%s': it is a mongotest test control, off unless the server is started with -test-controls (cmd/mongotest) or the TestControls option", name)
}

func cmdTestAdvanceClock(e *engine, r *request) (bson.D, error) {
	ms, ok := asInt64(r.cmd[0].Value)
	if !ok || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return nil, errorf(mongoerr.CodeTypeMismatch, "%s takes a whole number of milliseconds, got %v", cmdNameAdvanceClock, r.cmd[0].Value)
	}
	e.advanceClock(time.Duration(ms) * time.Millisecond)
	return clockReply(e.now()), nil
}

func cmdTestNow(e *engine, _ *request) (bson.D, error) { return clockReply(e.now()), nil }

func clockReply(now time.Time) bson.D {
	return bson.D{
		{Key: "now", Value: bson.NewDateTimeFromTime(now)},
		{Key: "unixNanos", Value: now.UnixNano()},
	}
}
