package group

import (
	"errors"
	"testing"

	"github.com/ferry-io/ferry"
)

// TestStatusFollowsAChangingOutageError: a partition's second
// waiting-for-sink report, with another error (the consumer reports an
// outage again when its error changes), replaces the error in Status and
// signals the session to publish it; a repeat of the same error does not.
func TestStatusFollowsAChangingOutageError(t *testing.T) {
	st := &status{waits: make(chan struct{}, 1)}
	signalled := func() bool {
		select {
		case <-st.waits:
			return true
		default:
			return false
		}
	}
	st.set(Running)
	st.partition(0, ferry.StateRunning, nil)
	st.partition(0, ferry.StateWaitingForSink, errors.New("connection refused"))
	if !signalled() || st.get().SinkErrors[0] != "connection refused" {
		t.Fatalf("after the outage began: signalled? sink errors %v", st.get().SinkErrors)
	}
	st.partition(0, ferry.StateWaitingForSink, errors.New("connection refused"))
	if signalled() {
		t.Fatal("the same error again signalled a publish")
	}
	st.partition(0, ferry.StateWaitingForSink, errors.New("503 Service Unavailable"))
	if !signalled() || st.get().SinkErrors[0] != "503 Service Unavailable" || st.get().State != WaitingForSink {
		t.Fatalf("after the error changed: state %q, sink errors %v", st.get().State, st.get().SinkErrors)
	}
}
