package ferry_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// closedAddr returns the address of a TCP port nothing listens on: dialing
// it is refused, as a receiver that is down refuses.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestStatusLastErrorDuringOutage: while the consumer waits for its sink,
// Consumer.Status().LastError holds the delivery error that keeps it
// waiting; once the sink accepts events again it is empty. Before, it
// stayed empty during the outage: the error reached only HookState.
func TestStatusLastErrorDuringOutage(t *testing.T) {
	e := newEnv(t)
	addr := closedAddr(t)
	var down atomic.Bool
	down.Store(true)
	h := func(ctx context.Context, ev *ferry.Event) error {
		if !down.Load() {
			return nil
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr) // the receiver is down
		if err == nil {
			conn.Close()
			return fmt.Errorf("%s accepted a connection; the test needs a closed port", addr)
		}
		return fmt.Errorf("deliver event %s: %w", ev.ID(), err)
	}
	c, err := ferry.NewConsumer(e.client, h, e.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	poll.Until(t, 20*time.Second, func() error {
		st := c.Status()
		if st.State != ferry.StateWaitingForSink || !strings.Contains(st.LastError, "connection refused") {
			return fmt.Errorf("status %q, LastError %q; want waiting-for-sink and the delivery error", st.State, st.LastError)
		}
		return nil
	})
	down.Store(false)
	poll.Until(t, 20*time.Second, func() error {
		if st := c.Status(); st.State != ferry.StateRunning || st.LastError != "" {
			return fmt.Errorf("status %q, LastError %q; want running and no error once the sink is back", st.State, st.LastError)
		}
		return nil
	})
}
