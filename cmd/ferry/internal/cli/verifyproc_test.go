package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// The tests of ferry verify and ferry dlq replay in verify*_test.go and
// dlqreplay_test.go run them as an operator does: the source and the
// state store are emulator processes (cmd/mongotest, through
// internal/emutest), ferry run members and the ferry commands are
// processes of their own (this test binary re-executed as ferry).

// procBound bounds a ferry command a test runs: one that has not exited
// by then (a re-read polling a closed cursor did not, at 100% CPU) is
// killed and fails the test with what it printed. It is a bound, not a
// measure: nothing waits for it.
const procBound = 2 * time.Minute

// ferryProc runs a ferry command line as a process of its own and returns
// its exit code and output.
func ferryProc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ferry %s did not finish within %v (killed):\n%s%s", strings.Join(args, " "), procBound, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("ferry %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errOut.String()
}

// rawClusterTime matches a cluster time printed raw (seconds.increment).
var rawClusterTime = regexp.MustCompile(`\b1\d{9}\.\d+\b`)

// opsEnv is a source emulator and a state-store emulator, each a process
// of its own: the source's oplog holds the test's writes only.
type opsEnv struct {
	t          *testing.T
	src, state *emutest.Server
	srcClient  *mongo.Client
	stateDB    *mongo.Database // database ferry of the state store
	orders     *mongo.Collection
}

func newOpsEnv(t *testing.T, srcOpts ...emutest.Option) *opsEnv {
	t.Helper()
	e := &opsEnv{t: t, src: emutest.New(t, srcOpts...), state: emutest.New(t)}
	connect := func(uri string) *mongo.Client {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		return c
	}
	e.srcClient = connect(e.src.URI())
	e.stateDB = connect(e.state.URI()).Database("ferry")
	e.orders = e.srcClient.Database("shop").Collection("orders")
	return e
}

// streamSpec is one stream of an opsEnv configuration over shop.orders
// (two partitions): its name, delivery mode, extra YAML lines (indented
// for the stream) and sink (a flow mapping).
type streamSpec struct{ name, mode, extra, sink string }

// config writes the configuration of the streams.
func (e *opsEnv) config(streams ...streamSpec) string {
	e.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nlog: {level: info}\nstate: {uri: %q}\nstreams:\n", e.state.URI())
	for _, s := range streams {
		fmt.Fprintf(&b, `  - name: %s
    source: {uri: %q, scope: {collection: shop.orders}}
    group: {partitions: 2, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: %s}
%s
    sink: %s
`, s.name, e.src.URI(), s.mode, s.extra, s.sink)
	}
	return writeFile(e.t, b.String())
}

// waitStarted waits until n partitions recorded a position: changes
// written afterwards are delivered.
func (e *opsEnv) waitStarted(m *member, n int64) {
	e.t.Helper()
	poll.Until(e.t, 30*time.Second, func() error {
		m.running()
		c, err := e.stateDB.Collection("checkpoints").CountDocuments(context.Background(), bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if err != nil || c < n {
			return fmt.Errorf("%d of %d partitions recorded a position (%v)", c, n, err)
		}
		return nil
	})
}

// waitApplied waits until stream has n ledger entries.
func (e *opsEnv) waitApplied(m *member, stream string, n int64) {
	e.t.Helper()
	poll.Until(e.t, 60*time.Second, func() error {
		m.running()
		c, err := e.stateDB.Collection("ledger").CountDocuments(context.Background(), bson.D{{Key: "stream", Value: stream}})
		if err != nil || c != n {
			return fmt.Errorf("stream %s has %d ledger entries, want %d (%v)", stream, c, n, err)
		}
		return nil
	})
}

// insert inserts {_id: prefix-i} into coll for i in [from, to), one write
// each, and returns the cluster time of the first.
func (e *opsEnv) insert(coll *mongo.Collection, prefix string, from, to int) bson.Timestamp {
	e.t.Helper()
	var first bson.Timestamp
	for i := from; i < to; i++ {
		ts := e.write(func(ctx context.Context) error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("%s-%d", prefix, i)}})
			return err
		})
		if i == from {
			first = ts
		}
	}
	return first
}

// write runs one write to the source in a session and returns its
// cluster time (the session's operationTime).
func (e *opsEnv) write(f func(ctx context.Context) error) bson.Timestamp {
	e.t.Helper()
	sess, err := e.srcClient.StartSession()
	if err != nil {
		e.t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := f(mongo.NewSessionContext(context.Background(), sess)); err != nil {
		e.t.Fatal(err)
	}
	ts := sess.OperationTime()
	if ts == nil {
		e.t.Fatal("the write's session has no operationTime")
	}
	return *ts
}

// running fails the test at once if the member exited.
func (m *member) running() {
	m.t.Helper()
	select {
	case <-m.done:
		m.t.Fatalf("%s exited: %v\n%s", m.name, m.err, tail(m.errOut.String(), 8000))
	default:
	}
}

// timeText is a cluster time as ferry prints it (verify.FormatTime,
// position show): RFC 3339 in UTC, then the increment.
func timeText(ts bson.Timestamp) string {
	s := time.Unix(int64(ts.T), 0).UTC().Format(time.RFC3339)
	if ts.I > 0 {
		s += fmt.Sprintf(" (#%d)", ts.I)
	}
	return s
}

// fmtSscanSummary reads events and applied from verify's summary line.
func fmtSscanSummary(out string, events, applied *int) (int, error) {
	i := strings.Index(out, "verify: events=")
	if i < 0 {
		return 0, fmt.Errorf("no summary line")
	}
	return fmt.Sscanf(out[i:], "verify: events=%d applied=%d", events, applied)
}
