package group_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/lease"
)

// TestSinkOutagePublished: while every delivery fails (the sink is down),
// the member publishes its waiting partitions, with the delivery error
// (resume tokens shortened), in its member document, where any reader of
// the state store sees them (group.WaitingPartitions); once the sink is
// back it clears them, and once it leaves nothing is reported.
func TestSinkOutagePublished(t *testing.T) {
	c := newCluster(t)
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	var down atomic.Bool
	down.Store(true)
	handler := func(context.Context, *ferry.Event) error {
		if down.Load() {
			// The receiver's failure, marked as package sink marks it.
			return ferry.Transient(errors.New(`503 Service Unavailable (resume token {_data: "8263ABCDEF0123456789ABCDEF0123456789"})`))
		}
		return nil
	}
	g, err := group.New(client, handler,
		group.Name("orders"), group.Partitions(2), group.MemberID("a"), group.StateDatabase(c.state),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.LeaseOptions(lease.MemberTimeout(2*time.Second), lease.HeartbeatInterval(200*time.Millisecond)),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond),
			ferry.CommitEvery(10, 20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ls, err := lease.New(c.state)
	if err != nil {
		t.Fatal(err)
	}
	reported := func() (map[int]string, int, error) {
		ms, err := ls.Members(context.Background(), "orders")
		if err != nil {
			return nil, 0, err
		}
		for _, m := range ms {
			if m.ID == "a" {
				return group.WaitingPartitions(m), len(ms), nil
			}
		}
		return nil, len(ms), nil
	}
	poll.Until(t, 20*time.Second, func() error {
		if len(g.Owned()) != 2 {
			return fmt.Errorf("a owns %v, want both partitions", g.Owned())
		}
		return nil
	})
	// Documents on both partitions.
	for i := range 16 {
		if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var waits map[int]string
	poll.Until(t, 30*time.Second, func() error {
		w, _, err := reported()
		if err != nil {
			return err
		}
		if waits = w; len(w) != 2 {
			return fmt.Errorf("a reports %v waiting for the sink, want partitions 0 and 1 (its own view: %+v)", w, g.Status())
		}
		return nil
	})
	for p, msg := range waits {
		if !strings.Contains(msg, "503 Service Unavailable") || strings.Contains(msg, "0123456789ABCDEF0123456789") {
			t.Errorf("partition %d's published error %q: want the delivery error, its resume token shortened", p, msg)
		}
	}
	if st := g.Status(); st.State != group.WaitingForSink || len(st.SinkErrors) != 2 || st.SinkErrors[0] != waits[0] {
		t.Errorf("Status during the outage: state %q, sink errors %v", st.State, st.SinkErrors)
	}
	down.Store(false)
	poll.Until(t, 30*time.Second, func() error {
		w, _, err := reported()
		if err != nil {
			return err
		}
		if len(w) != 0 || g.Status().State != group.Running {
			return fmt.Errorf("after the outage a reports %v waiting and is %q; want none, running", w, g.Status().State)
		}
		return nil
	})
	if st := g.Status(); len(st.SinkErrors) != 0 {
		t.Errorf("Status after the outage: sink errors %v, want none", st.SinkErrors)
	}
	// Down again, then the member leaves while waiting: nothing lingers.
	down.Store(true)
	if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: "again"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if w, _, err := reported(); err != nil || len(w) == 0 {
			return fmt.Errorf("a reports %v waiting (%v), want a partition", w, err)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	if w, n, err := reported(); err != nil || n != 0 || w != nil {
		t.Fatalf("after a left: %d members, %v waiting (%v); want none", n, w, err)
	}
}

func TestSinkProblem(t *testing.T) {
	if got := group.SinkProblem(nil); got != "" {
		t.Errorf("SinkProblem(nil) = %q", got)
	}
	long := errors.New(strings.Repeat("é", 400))
	got := group.SinkProblem(long)
	if len(got) > 300+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("SinkProblem of 800 bytes = %d bytes %q…, want at most 300 and an ellipsis", len(got), got[:10])
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("SinkProblem cut a rune: %q", got)
	}
	// Event ids (64 hex digits, the sinks name the event they failed on)
	// are shortened to 16, as ferry dlq list shows them; other hex stays.
	id := strings.Repeat("c6a5d689", 8)
	got = group.SinkProblem(errors.New("webhook: event " + id + ": POST http://r/hook: receiver answered 503; body deadbeef"))
	if want := "webhook: event " + id[:16] + "…: POST http://r/hook: receiver answered 503; body deadbeef"; got != want {
		t.Errorf("SinkProblem = %q, want %q", got, want)
	}
	if got := group.SinkProblem(errors.New(id + "0")); got != id+"0" {
		t.Errorf("SinkProblem shortened 65 hex digits: %q", got)
	}
}
