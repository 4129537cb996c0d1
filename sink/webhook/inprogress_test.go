package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/webhook"
)

// A receiver answering "503, Ferry-Retry: in-progress" for one event (its
// receiver library does so while another delivery of the same event is
// being applied, e.g. the old owner's request after a takeover) has that
// event retried, without counting attempts, until it is answered 200,
// while the other events go on: it is never dead-lettered however many
// times it is answered so. Before the in-progress answer was recognised,
// the event was dead-lettered after Retry's 2 attempts, since the receiver
// accepted other events around it.
func TestInProgressIsRetriedWithoutCounting(t *testing.T) {
	client, _ := emutest.Client(t)
	ctx := context.Background()
	db := client.Database("ferry_sink_webhook_inprogress")
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	dlq := deadletter.NewMongo(client.Database("ferry_sink_webhook_inprogress_state"), "dlq")

	// The held event is answered in-progress 30 times while 200 other
	// events are written and accepted: successes happen between its
	// answers, which would count its attempts.
	const holds, others = 30, 200
	var mu sync.Mutex
	held, accepted := 0, map[string]bool{}
	streams := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		streams[r.Header.Get("Ferry-Stream")+"/"+r.Header.Get("Ferry-Operation")+"/"+r.Header.Get("Ferry-Namespace")] = true
		if bytes.Contains(body, []byte(`"held"`)) && held < holds {
			held++
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Ferry-Retry", "in-progress")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accepted[string(body)] = true
	}))
	t.Cleanup(srv.Close)
	s, err := webhook.New(srv.URL, webhook.Secret(testSecret), webhook.Stream("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}

	raw, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	t0, i0, _ := raw.Lookup("operationTime").TimestampOK()
	c, err := ferry.NewConsumer(client, sink.Handler(s),
		ferry.Stream("orders"),
		ferry.WatchCollection(db.Name(), "orders"),
		ferry.Checkpoints(store),
		ferry.DeadLetters(dlq),
		ferry.StartAt(ferry.StartAtTime(bson.Timestamp{T: t0, I: i0})),
		ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.Retry(2, time.Millisecond, 5*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()

	coll := db.Collection("orders")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "held"}}); err != nil {
		t.Fatal(err)
	}
	for i := range others {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("o%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(accepted) != others+1 {
			return fmt.Errorf("%d of %d events accepted (the held one answered in-progress %d times)", len(accepted), others+1, held)
		}
		return nil
	})
	mu.Lock()
	if held != holds {
		t.Errorf("the held event was answered in-progress %d times, want %d", held, holds)
	}
	if !streams["orders/insert/"+db.Name()+".orders"] || len(streams) != 1 {
		t.Errorf("Ferry-Stream/Ferry-Operation/Ferry-Namespace seen: %v", streams)
	}
	mu.Unlock()
	if entries, err := dlq.List(ctx, "orders", 10); err != nil || len(entries) != 0 {
		t.Errorf("dead letters = %v (%v), want none: an in-progress answer is not a failed attempt", entries, err)
	}
}
