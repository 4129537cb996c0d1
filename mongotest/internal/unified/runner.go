package unified

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Status is the outcome of one test.
type Status int

// The outcomes of a test.
const (
	Passed Status = iota
	Failed
	Skipped
)

func (s Status) String() string {
	switch s {
	case Passed:
		return "passed"
	case Failed:
		return "failed"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is the outcome of one test of one file. Test is empty when the
// file as a whole could not be run (it did not parse, or the server could
// not be reached).
type Result struct {
	File   string // base name of the file
	Test   string // the test's description
	Status Status
	Reason string // why it failed or was skipped; empty when it passed
	// Expected is true for a failure listed by ExpectFailures: it was
	// logged, not reported as a Go test failure.
	Expected bool
}

// Option configures RunFile.
type Option func(*config)

type config struct {
	expected     map[string]string
	iterTimeout  time.Duration
	opTimeout    time.Duration
	testTimeout  time.Duration
	setupTimeout time.Duration
}

func newConfig(opts []Option) *config {
	c := &config{
		expected:     map[string]string{},
		iterTimeout:  5 * time.Second,
		opTimeout:    30 * time.Second,
		testTimeout:  2 * time.Minute,
		setupTimeout: 30 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ExpectFailures lists tests that are known to fail, each with the reason
// it is known to fail. A key is a test description, or "file.json/test
// description" to name the test of one file only (descriptions repeat
// across files). A listed test that fails is logged with t.Log and does not
// fail the Go test; a listed test that passes does fail it, so the list
// stays honest. A listed test that is skipped is neither.
func ExpectFailures(m map[string]string) Option {
	return func(c *config) {
		for k, v := range m {
			c.expected[k] = v
		}
	}
}

// WithIterationTimeout bounds each iterateUntilDocumentOrError and
// iterateOnce operation (default 5s): a change event that does not arrive
// in time fails the test instead of hanging it.
func WithIterationTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.iterTimeout = d
		}
	}
}

// WithOperationTimeout bounds every other operation, and each setup step
// (default 30s).
func WithOperationTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.opTimeout = d
			c.setupTimeout = d
		}
	}
}

// RunFile runs every test of the spec file at path as a t.Run subtest
// against the deployment at uri, and returns one Result per test.
//
// A test whose runOnRequirements are not met is skipped with a reason that
// names the requirement ("requires topology single; server is replicaset").
// A failing test's reason says what differed: the path in the document and
// the expected and actual values, shortened.
func RunFile(t *testing.T, path, uri string, opts ...Option) []Result {
	t.Helper()
	cfg := newConfig(opts)
	base := filepath.Base(path)
	f, err := ParseFile(path)
	if err != nil {
		t.Errorf("%s: %v", base, err)
		return []Result{{File: base, Status: Failed, Reason: err.Error()}}
	}
	ctx, cancel := withTimer(context.Background(), cfg.setupTimeout)
	defer cancel()
	internal, info, err := connectInternal(ctx, uri)
	if err != nil {
		t.Errorf("%s: %v", base, err)
		return []Result{{File: base, Status: Failed, Reason: err.Error()}}
	}
	defer func() {
		dctx, dcancel := withTimer(context.Background(), cfg.setupTimeout)
		defer dcancel()
		_ = internal.Disconnect(dctx)
	}()
	fileUnmet := info.unmet(ctx, f.RunOnRequirements)

	var results []Result
	for i := range f.Tests {
		test := &f.Tests[i]
		name := test.Description
		if name == "" {
			name = fmt.Sprintf("test%d", i)
		}
		res := Result{File: base, Test: test.Description}
		t.Run(name, func(t *testing.T) {
			switch {
			case test.Problem != nil:
				res.Status, res.Reason = Failed, test.Problem.Error()
			case fileUnmet != "":
				res.Status, res.Reason = Skipped, fileUnmet
			case test.SkipReason != "":
				res.Status, res.Reason = Skipped, "skipReason: "+test.SkipReason
			case driverSkip(base, test.Description) != "":
				res.Status, res.Reason = Skipped, driverSkip(base, test.Description)
			default:
				tr := &testRun{cfg: cfg, file: f, test: test, uri: uri, info: info, internal: internal}
				res.Status, res.Reason = tr.run()
			}
			report(t, cfg, &res)
		})
		results = append(results, res)
	}
	return results
}

// report turns a result into the subtest's outcome.
func report(t *testing.T, cfg *config, res *Result) {
	why, listed := cfg.expected[res.File+"/"+res.Test]
	if !listed {
		why, listed = cfg.expected[res.Test]
	}
	switch res.Status {
	case Skipped:
		t.Skip(res.Reason)
	case Failed:
		if listed {
			res.Expected = true
			t.Logf("expected failure (%s): %s", why, res.Reason)
			return
		}
		t.Error(res.Reason)
	case Passed:
		if listed {
			t.Errorf("listed as an expected failure (%s) but passed: remove it from the list", why)
		}
	}
}

// connectInternal opens the internal client used for setup and checks.
// Its server selection timeout (which also bounds a connection checkout) is
// the driver's default, 30 s: a cluster just started on a loaded machine
// (eight emulated clusters side by side under the race detector, beside the
// rest of the suite) may take more than 10 s to complete a handshake.
func connectInternal(ctx context.Context, uri string) (*mongo.Client, *serverInfo, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("unified runner: connecting to %s: %w", uri, err)
	}
	info, err := probeServer(ctx, client, uri)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, nil, fmt.Errorf("unified runner: probing the server: %w", err)
	}
	return client, info, nil
}

// errTimer is the cause of a context cancelled by withTimer.
var errTimer = errors.New("unified runner: time limit reached")

// withTimer returns a context cancelled after d. Unlike a deadline, a timer
// does not make the driver add maxTimeMS to the commands it sends, so the
// commands the server and the event assertions see are the plain ones.
func withTimer(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	timer := time.AfterFunc(d, func() { cancel(errTimer) })
	return ctx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}

// timedOut reports whether ctx ended because its timer fired.
func timedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errTimer)
}
