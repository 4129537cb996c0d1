package cli

import (
	"context"
	"regexp"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// running is a `ferry run` a test started in-process.
type running struct {
	out, errOut syncBuffer
	cancel      context.CancelFunc
	done        chan error
}

// startRun starts `ferry run -c cfgPath` in-process; the test's cleanup
// cancels it if the test does not stop it.
func startRun(t *testing.T, cfgPath string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- runDaemon(ctx, []string{"-c", cfgPath}, &r.out, &r.errOut) }()
	t.Cleanup(cancel)
	return r
}

// alive fails the test at once if the daemon stopped.
func (r *running) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		t.Fatalf("ferry run stopped: %v\n%s", err, r.errOut.String())
	default:
	}
}

// stop cancels the daemon (as SIGTERM does) and fails the test unless it
// stopped cleanly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("ferry run: %v\n%s", err, r.errOut.String())
	}
}

// waitStarted waits until n partitions recorded their start position in the
// state database: events written afterwards are delivered.
func (r *running) waitStarted(t *testing.T, client *mongo.Client, stateDB string, n int64) {
	t.Helper()
	waitFor(t, func() string {
		r.alive(t)
		c, _ := client.Database(stateDB).Collection("checkpoints").CountDocuments(context.Background(),
			bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if c >= n {
			return "ok"
		}
		return ""
	})
}

// listening is the log line the daemon writes once it serves HTTP.
var listening = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)

// addr waits until the daemon serves HTTP and returns its address.
func (r *running) addr(t *testing.T) string {
	t.Helper()
	return waitFor(t, func() string {
		r.alive(t)
		if m := listening.FindStringSubmatch(r.errOut.String()); m != nil {
			return m[1]
		}
		return ""
	})
}
