package ferry_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// queueWatch records the queue depths a consumer reports (HookQueue).
type queueWatch struct {
	mu         sync.Mutex
	reports    int
	maxEvents  int
	maxBytes   int64
	last       ferry.QueueInfo
	fullAt     int // reports when the queue was first seen full (0: not yet)
	fullEvents int
	fullBytes  int64
}

func (q *queueWatch) OnQueue(i ferry.QueueInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reports++
	q.last = i
	q.maxEvents = max(q.maxEvents, i.Events)
	q.maxBytes = max(q.maxBytes, i.Bytes)
	if q.fullAt == 0 && (i.Events >= q.fullEvents || i.Bytes >= q.fullBytes) {
		q.fullAt = q.reports
	}
}

// TestSlowHandlerBoundsTheQueue: while the handler is stuck, the consumer
// holds at most QueueLimit's events and bytes — the events read ahead of
// the lanes included — however long the backlog behind them, and reading
// stays paused; once the handler is let go every event is applied once.
func TestSlowHandlerBoundsTheQueue(t *testing.T) {
	const backlog = 1000
	payload := strings.Repeat("p", 1000)
	for _, tc := range []struct {
		name   string
		events int
		bytes  int64
	}{
		{"events", 50, 64 << 20},
		{"bytes", 10_000, 40 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			at := clusterTime(t, e.client)
			docs := make([]any, backlog)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "payload", Value: payload}}
			}
			if _, err := e.db.Collection("c").InsertMany(context.Background(), docs); err != nil {
				t.Fatal(err)
			}
			// Full: no room for one more event of about 1.1 KB.
			q := &queueWatch{fullEvents: tc.events, fullBytes: tc.bytes - 1200}
			release := make(chan struct{})
			var mu sync.Mutex
			applied := map[int32]int{}
			h := func(ctx context.Context, ev *ferry.Event) error {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				mu.Lock()
				applied[ev.DocumentKey.Lookup("_id").Int32()]++
				mu.Unlock()
				return nil
			}
			start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.QueueLimit(tc.events, tc.bytes),
				ferry.WithHooks(q), ferry.HandlerTimeout(time.Minute))...)
			// The queue fills, then stays within its bound for 25 more
			// commit intervals (20 ms each) while the handler is stuck:
			// a reader that kept reading would have read the whole
			// backlog by then.
			poll.Until(t, 20*time.Second, func() error {
				q.mu.Lock()
				defer q.mu.Unlock()
				if !(q.fullAt > 0 && q.reports >= q.fullAt+25) {
					return fmt.Errorf("%d reports, last %d events %d bytes, full at report %d", q.reports, q.last.Events, q.last.Bytes, q.fullAt)
				}
				return nil
			})
			q.mu.Lock()
			maxEvents, maxBytes, last := q.maxEvents, q.maxBytes, q.last
			q.mu.Unlock()
			if maxEvents > tc.events || maxBytes > tc.bytes {
				t.Fatalf("the queue held up to %d events and %d bytes, over its limit of %d events and %d bytes", maxEvents, maxBytes, tc.events, tc.bytes)
			}
			if last.Events == 0 || last.Events >= backlog {
				t.Fatalf("the queue holds %d events with the handler stuck, want some and fewer than the backlog of %d", last.Events, backlog)
			}
			close(release)
			poll.Until(t, 30*time.Second, func() error {
				mu.Lock()
				defer mu.Unlock()
				if !(len(applied) == backlog) {
					return fmt.Errorf("%d of %d events applied", len(applied), backlog)
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			for id, n := range applied {
				if n != 1 {
					t.Fatalf("event %d applied %d times", id, n)
				}
			}
		})
	}
}
