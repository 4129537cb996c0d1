package mongoerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/ferry-io/ferry/mongoerr"
)

func TestClassify(t *testing.T) {
	cmd := func(code int32, labels ...string) error {
		return mongo.CommandError{Code: code, Message: "x", Labels: labels}
	}
	cases := []struct {
		name string
		err  error
		want mongoerr.Class
	}{
		{"nil", nil, mongoerr.None},
		{"cancelled", context.Canceled, mongoerr.Canceled},
		{"wrapped deadline", fmt.Errorf("op: %w", context.DeadlineExceeded), mongoerr.Canceled},
		{"history lost", cmd(286, "NonResumableChangeStreamError"), mongoerr.HistoryLost},
		{"fatal change stream error", cmd(280, "NonResumableChangeStreamError"), mongoerr.Fatal},
		{"labelled resumable", cmd(11601, "ResumableChangeStreamError"), mongoerr.Resumable},
		{"cursor not found", cmd(43), mongoerr.Resumable},
		{"primary stepped down", cmd(189), mongoerr.Resumable},
		{"not writable primary", cmd(10107), mongoerr.Resumable},
		{"auth failure", cmd(18), mongoerr.Fatal},
		{"bad pipeline", cmd(40324), mongoerr.Fatal},
		{"invalid resume token", cmd(260), mongoerr.Fatal},
		{"election in progress is not resumable", cmd(216), mongoerr.Fatal},
		{"wrapped resumable", fmt.Errorf("read: %w", cmd(91)), mongoerr.Resumable},
		{"plain error", errors.New("boom"), mongoerr.Fatal},
		// A paused pool after another operation's network error: the
		// driver labels it TransientTransactionError and marks it
		// retryable; it says nothing about the stream (fault campaign:
		// 19 partition restarts logged as "consumer stopped").
		{"connection pool cleared", mongo.CommandError{Message: "connection pool for 127.0.0.1:27017 was cleared because another operation failed with: connection reset",
			Labels: []string{"TransientTransactionError"}, Wrapped: poolCleared{}}, mongoerr.Resumable},
	}
	for _, c := range cases {
		if got := mongoerr.Classify(c.err); got != c.want {
			t.Errorf("%s: Classify = %q, want %q", c.name, got, c.want)
		}
	}
	if !mongoerr.IsResumable(cmd(43)) || mongoerr.IsResumable(cmd(18)) {
		t.Error("IsResumable disagrees with Classify")
	}
	if !mongoerr.IsHistoryLost(cmd(286)) {
		t.Error("IsHistoryLost(286) = false")
	}
	if !mongoerr.IsTransientTransactionError(cmd(112)) || !mongoerr.IsTransientTransactionError(cmd(251, "TransientTransactionError")) {
		t.Error("write conflicts and labelled errors are transient transaction errors")
	}
	if mongoerr.IsTransientTransactionError(cmd(11000)) {
		t.Error("a duplicate key is not a transient transaction error")
	}
}

// poolCleared stands for the driver's poolClearedError (unexported): a
// driver.RetryablePoolError.
type poolCleared struct{}

func (poolCleared) Error() string   { return "connection pool was cleared" }
func (poolCleared) Retryable() bool { return true }

func TestIsPoolTimeout(t *testing.T) {
	timeout := topology.WaitQueueTimeoutError{Wrapped: context.DeadlineExceeded}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"pool timeout", timeout, true},
		{"wrapped pool timeout", fmt.Errorf("lease: renew: %w", timeout), true},
		{"pointer", fmt.Errorf("x: %w", &timeout), true},
		{"cancelled checkout", topology.WaitQueueTimeoutError{Wrapped: context.Canceled}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"other", errors.New("timed out while checking out a connection"), false},
	}
	for _, c := range cases {
		if got := mongoerr.IsPoolTimeout(c.err); got != c.want {
			t.Errorf("%s: IsPoolTimeout(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
