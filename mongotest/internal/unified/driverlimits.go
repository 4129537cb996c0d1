package unified

import (
	"errors"
	"fmt"
)

// Tests the official Go driver v2 cannot run against any server, because
// they rely on an option the driver does not have or on behaviour it does
// not follow. The runner skips them, naming the limitation, instead of
// reporting a failure that no server could fix. The same tests are
// skipped by the driver's own spec runner (its internal/spectest/skip.go
// and the option checks of internal/integration/unified).

// driverLimit is the error of a test that needs what the Go driver lacks.
type driverLimit struct{ reason string }

func (e *driverLimit) Error() string { return "the Go driver v2 " + e.reason }

// unsupportedByDriver records that the field being read needs what the Go
// driver v2 lacks; the test is then skipped with that reason.
func (f *fields) unsupportedByDriver(format string, args ...any) {
	if f.err == nil {
		f.err = &driverLimit{reason: fmt.Sprintf(format, args...)}
	}
}

// asDriverLimit reports the driver limitation behind err, if any.
func asDriverLimit(err error) (*driverLimit, bool) {
	var dl *driverLimit
	if errors.As(err, &dl) {
		return dl, true
	}
	return nil, false
}

// driverSkips are tests whose expectations the Go driver v2 does not meet
// whatever the server does, by "file/description", with why. Each is in
// the driver's own skip list.
var driverSkips = map[string]string{
	"transaction-options.json/transaction options inherited from client":      wtimeoutAfterCommit,
	"transaction-options.json/readConcern local in defaultTransactionOptions": wtimeoutAfterCommit,
}

// wtimeoutAfterCommit: session.Client.CommitTransaction sets
// CurrentWTimeout to 10 s after every commit, for a retry, and nothing
// clears it, so the next transaction's abort sends wtimeout: 10000.
const wtimeoutAfterCommit = "sets wtimeout: 10000 after every commit and never clears it, so the commands of the " +
	"session's next transaction carry it (its spec runner skips this test: \"Deprecated transactions CSOT Options\", GODRIVER-2348)"

// driverSkip returns why the Go driver v2 cannot run a test, or "".
func driverSkip(file, test string) string {
	if why, ok := driverSkips[file+"/"+test]; ok {
		return "the Go driver v2 " + why
	}
	return ""
}
