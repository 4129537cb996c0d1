package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/internal/poll"
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

// converged is a poll.Until condition: the projection equals the source,
// document for document, and the daemon still runs.
func (r *running) converged(t *testing.T, src, proj *mongo.Collection) func() error {
	return func() error {
		r.alive(t)
		if diff := projectionDiff(t, src, proj); diff != "" {
			return fmt.Errorf("the projection differs from the source:\n%s", diff)
		}
		return nil
	}
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
	poll.Until(t, 30*time.Second, func() error {
		r.alive(t)
		c, _ := client.Database(stateDB).Collection("checkpoints").CountDocuments(context.Background(),
			bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if c < n {
			return fmt.Errorf("%d of %d partitions recorded a position", c, n)
		}
		return nil
	})
}

// listening is the log line the daemon writes once it serves HTTP.
var listening = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)

// addr waits until the daemon serves HTTP and returns its address.
func (r *running) addr(t *testing.T) string {
	t.Helper()
	var addr string
	poll.Until(t, 30*time.Second, func() error {
		r.alive(t)
		m := listening.FindStringSubmatch(r.errOut.String())
		if m == nil {
			return errors.New("ferry run does not log that it listens")
		}
		addr = m[1]
		return nil
	})
	return addr
}
