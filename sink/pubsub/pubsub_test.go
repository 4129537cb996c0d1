package pubsub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/sinktest"
)

func TestNewValidation(t *testing.T) {
	cases := []struct {
		name, project, topic string
		opts                 []pubsub.Option
		want                 string
	}{
		{"no project", "", "events", nil, "project: empty project id"},
		{"slash project", "a/b", "events", nil, "project: must be a project id such as my-project, without '/'"},
		{"short topic", "p", "ab", nil, "topic: a topic id has 3 to 255 characters, got 2"},
		{"long topic", "p", strings.Repeat("x", 256), nil, "topic: a topic id has 3 to 255 characters, got 256"},
		{"digit first", "p", "1events", nil, "topic: a topic id starts with a letter"},
		{"goog topic", "p", "google-events", nil, `topic: a topic id cannot start with "goog"`},
		{"bad character", "p", "ev ents", nil, "topic: character ' ' is not allowed in a topic id"},
		{"other project", "p", "projects/q/topics/events", nil, `topic: names project "q" but project is "p"`},
		{"not a topic name", "p", "projects/p/subscriptions/events", nil, "topic: must be a topic id such as ferry-events or projects/<project>/topics/<id>"},
		{"bad timeout", "p", "events", []pubsub.Option{pubsub.Timeout(-time.Second)}, "Timeout: must be positive"},
		{"bad emulator", "p", "events", []pubsub.Option{pubsub.Emulator("http://localhost:8085")}, "Emulator: want host:port"},
		{"nil option", "p", "events", []pubsub.Option{nil}, "nil option"},
		{"nil client option", "p", "events", []pubsub.Option{pubsub.ClientOptions(nil)}, "ClientOptions: option 0 is nil"},
		// Validated once, every problem named; a later option overrides
		// an earlier one.
		{"every problem", "", "1x", []pubsub.Option{pubsub.Timeout(0), pubsub.Timeout(time.Second), pubsub.Emulator("")},
			`pubsub: invalid option: project: empty project id: name the Google Cloud project of the topic, such as my-project; ` +
				`topic: a topic id has 3 to 255 characters, got 2 ("1x"); Emulator: want host:port, such as localhost:8085, got ""`},
	}
	for _, c := range cases {
		_, err := pubsub.New(c.project, c.topic, c.opts...)
		if !errors.Is(err, pubsub.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want ErrInvalidOption containing %q", c.name, err, c.want)
		}
	}
	for _, topic := range []string{"events", "ferry.events-1_x~+%", "projects/p/topics/events"} {
		s, err := pubsub.New("p", topic)
		if err != nil {
			t.Errorf("New(p, %q): %v", topic, err)
		} else if s.Topic() != "projects/p/topics/events" && topic != "ferry.events-1_x~+%" {
			t.Errorf("Topic() = %q", s.Topic())
		}
	}
}

func TestConnectChecksTopic(t *testing.T) {
	srv := startServer(t)
	s, err := pubsub.New(project, "missing-topic", pubsub.Emulator(srv.Addr), pubsub.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Connect to a missing topic = %v, want a 'does not exist' error", err)
	}
	if err := s.Write(context.Background(), []*ferry.Event{sinktest.NewEvent(1, "a", 1)}); !errors.Is(err, sink.ErrNotConnected) {
		t.Errorf("Write after a failed Connect = %v, want ErrNotConnected", err)
	}
}

// TestMessageShape checks data format, attributes and ordering keys, and
// that the attributes serve a subscription filter.
func TestMessageShape(t *testing.T) {
	srv := startServer(t)
	r := newReceiver(srv)
	ctx := context.Background()
	if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:   "projects/" + project + "/subscriptions/epoch-2",
		Topic:  topic,
		Filter: `attributes.ferry-epoch = "2" AND attributes.ferry-operation = "update"`,
	}); err != nil {
		t.Fatal(err)
	}
	for _, canonical := range []bool{false, true} {
		var opts []pubsub.Option
		if canonical {
			opts = append(opts, pubsub.Canonical(), pubsub.Stream("orders"))
		}
		s := r.newSink(t, opts...)
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		var evs []*ferry.Event
		for i := range 12 {
			evs = append(evs, sinktest.NewEvent(i, fmt.Sprintf("doc%d", i%3), int64(1+i%2)))
		}
		if err := s.Write(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		msgs := r.messages()
		byID := map[string]message{}
		for _, m := range msgs[len(msgs)-len(evs):] {
			byID[m.d.EventID] = m
		}
		for _, ev := range evs {
			m, ok := byID[ev.ID()]
			if !ok {
				t.Fatalf("canonical=%v: event %s missing", canonical, ev.ID())
			}
			want, _ := bson.MarshalExtJSON(ev.DocumentKey, true, false)
			if m.orderingKey != string(want) {
				t.Errorf("ordering key %q, want %q", m.orderingKey, want)
			}
			if has := bytes.Contains(m.d.Body, []byte(`"$numberInt"`)); has != canonical {
				t.Errorf("canonical=%v: data %s", canonical, m.d.Body)
			}
			if m.d.Epoch != ev.Epoch || m.attrs[pubsub.OperationAttribute] != "update" || m.attrs[pubsub.NamespaceAttribute] != "shop.orders" {
				t.Errorf("attributes %v for an update of shop.orders under epoch %d", m.attrs, ev.Epoch)
			}
			// With Stream (set with canonical here) the stream's name is an
			// attribute; without, there is none.
			if st, ok := m.attrs[pubsub.StreamAttribute]; canonical && st != "orders" || !canonical && ok {
				t.Errorf("canonical=%v: ferry-stream attribute %q (present %v)", canonical, st, ok)
			}
		}
	}
	// The filtered subscription got exactly the epoch-2 events (half).
	resp, err := srv.GServer.Pull(ctx, &pubsubpb.PullRequest{Subscription: "projects/" + project + "/subscriptions/epoch-2", MaxMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ReceivedMessages) != 12 {
		t.Errorf("filtered subscription pulled %d messages, want 12 (the epoch-2 half of 24)", len(resp.ReceivedMessages))
	}
	for _, m := range resp.ReceivedMessages {
		if m.Message.Attributes[pubsub.EpochAttribute] != "2" {
			t.Errorf("filtered subscription got epoch %q", m.Message.Attributes[pubsub.EpochAttribute])
		}
	}
}

func TestOrderingKey(t *testing.T) {
	ev := sinktest.NewEvent(1, "a", 1)
	if k, err := pubsub.OrderingKey(ev); err != nil || k != `{"_id":"a"}` {
		t.Errorf("OrderingKey = %q, %v", k, err)
	}
	noKey := sinktest.NewEvent(1, "a", 1)
	noKey.DocumentKey = nil
	if k, _ := pubsub.OrderingKey(noKey); k != "shop.orders" {
		t.Errorf("OrderingKey without a documentKey = %q, want the namespace", k)
	}
	long := sinktest.NewEvent(2, strings.Repeat("k", 2000), 1)
	k1, _ := pubsub.OrderingKey(long)
	k2, _ := pubsub.OrderingKey(sinktest.NewEvent(3, strings.Repeat("k", 2000), 1))
	other, _ := pubsub.OrderingKey(sinktest.NewEvent(3, strings.Repeat("k", 1999), 1))
	if !strings.HasPrefix(k1, "sha256:") || len(k1) > pubsub.MaxOrderingKeyBytes || k1 != k2 || k1 == other {
		t.Errorf("long keys: %q, %q, %q; want one stable sha256 key per document", k1, k2, other)
	}
}

func TestClassify(t *testing.T) {
	ev := sinktest.NewEvent(1, "a", 1)
	for _, err := range []error{
		status.Error(codes.InvalidArgument, "bad"),
		status.Error(codes.PermissionDenied, "no"),
		gps.ErrOversizedMessage,
		fmt.Errorf("wrapped: %w", status.Error(codes.PermissionDenied, "no")),
	} {
		if got := pubsub.Classify(ev, topic, err); sink.IsRetryable(got) || !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v, want permanent wrapping it", err, got)
		}
	}
	for _, err := range []error{
		status.Error(codes.Unavailable, "down"),
		status.Error(codes.DeadlineExceeded, "slow"),
		status.Error(codes.ResourceExhausted, "quota"),
		status.Error(codes.NotFound, "topic"),
		status.Error(codes.Unauthenticated, "token"),
		context.DeadlineExceeded,
		errors.New("something odd"),
	} {
		if got := pubsub.Classify(ev, topic, err); !sink.IsRetryable(got) || !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v, want retryable wrapping it", err, got)
		}
	}
	if got := pubsub.Classify(ev, topic, gps.ErrPublisherStopped); !sink.IsRetryable(got) || !errors.Is(got, sink.ErrNotConnected) {
		t.Errorf("classify(ErrPublisherStopped) = %v, want retryable ErrNotConnected", got)
	}
	if got := pubsub.Classify(ev, topic, gps.ErrPublishingPaused{OrderingKey: "k"}); !sink.IsRetryable(got) || !errors.Is(got, sink.ErrSkipped) {
		t.Errorf("classify(ErrPublishingPaused) = %v, want retryable ErrSkipped", got)
	}
}

// TestOversizedIsPermanent publishes a message above Pub/Sub's 10 MB request
// limit: the client fails it with ErrOversizedMessage, a permanent failure,
// and the other events are delivered.
func TestOversizedIsPermanent(t *testing.T) {
	r := newReceiver(startServer(t))
	ctx := context.Background()
	s := r.newSink(t)
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	sinktest.CheckTooLarge(t, s, r, 11<<20, gps.ErrOversizedMessage)
}

// TestServerErrors has the server fail every publish: PermissionDenied is
// permanent; Unavailable is retried inside the client until Timeout and
// then reported retryable.
func TestServerErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		code      codes.Code
		retryable bool
	}{{codes.PermissionDenied, false}, {codes.Unavailable, true}} {
		srv := startServer(t, pstest.WithErrorInjection("Publish", c.code, "injected"))
		r := newReceiver(srv)
		s := r.newSink(t, pubsub.Timeout(300*time.Millisecond))
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		evs := []*ferry.Event{sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1)}
		for i, err := range sink.Errors(s.Write(ctx, evs), len(evs)) {
			if err == nil || sink.IsRetryable(err) != c.retryable || !c.retryable && status.Code(err) != c.code {
				t.Errorf("%s: event %d: %v, want retryable=%v", c.code, i, err, c.retryable)
			}
		}
		if n := len(r.Received()); n != 0 {
			t.Errorf("%s: the topic holds %d messages", c.code, n)
		}
	}
}

// TestFailedKeyIsResumed fails the first publish request carrying one
// event: the client pauses that document's ordering key, so the document's
// later event in the batch fails too, while other documents go through.
// Write resumes the key, so writing the failed events again delivers them,
// in order.
func TestFailedKeyIsResumed(t *testing.T) {
	srv := startServer(t)
	r := newReceiver(srv)
	ctx := context.Background()
	evs := []*ferry.Event{sinktest.NewEvent(1, "x", 1), sinktest.NewEvent(2, "k", 1), sinktest.NewEvent(3, "k", 1), sinktest.NewEvent(4, "y", 1)}
	var failed atomic.Bool
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if pr, ok := req.(*pubsubpb.PublishRequest); ok && !failed.Load() {
			for _, m := range pr.Messages {
				if m.Attributes[pubsub.EventIDAttribute] == evs[1].ID() {
					failed.Store(true)
					return status.Error(codes.InvalidArgument, "injected: request rejected")
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	s := r.newSink(t, pubsub.ClientOptions(option.WithGRPCDialOption(grpc.WithUnaryInterceptor(intercept))))
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	if errs[0] != nil || errs[3] != nil {
		t.Errorf("other documents failed: %v, %v", errs[0], errs[3])
	}
	if errs[1] == nil || sink.IsRetryable(errs[1]) {
		t.Errorf("rejected event: %v, want permanent", errs[1])
	}
	// The later event of the same document was either in the rejected
	// request or refused because the key was paused.
	if errs[2] == nil {
		t.Errorf("the document's later event was published after its earlier one failed")
	}
	if err := s.Write(ctx, evs[1:3]); err != nil {
		t.Fatalf("writing the failed events again: %v", err)
	}
	var keyOrder []string
	for _, d := range r.Received() {
		if d.EventID == evs[1].ID() || d.EventID == evs[2].ID() {
			keyOrder = append(keyOrder, d.EventID)
		}
	}
	if !slices.Equal(keyOrder, []string{evs[1].ID(), evs[2].ID()}) {
		t.Errorf("document k's events arrived as %v, want [%s %s]", keyOrder, evs[1].ID()[:8], evs[2].ID()[:8])
	}
}

// TestForcedReplay writes events, "crashes" after Pub/Sub acknowledged them
// but before the checkpoint, and replays them from an earlier checkpoint
// with new sink instances. Pub/Sub has no publish-side de-duplication, so
// the topic holds the replays: the test counts and prints them, checks that
// each document's messages are in publish order, and runs the receiver the
// package doc describes (an exactly-once, ordered subscription plus
// de-duplication on ferry-event-id), which applies each event once and each
// document's events in order.
func TestForcedReplay(t *testing.T) {
	srv := startServer(t)
	r := newReceiver(srv)
	ctx := context.Background()
	const subName = "projects/" + project + "/subscriptions/effects"
	if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: subName, Topic: topic, AckDeadlineSeconds: 10,
		EnableMessageOrdering: true, EnableExactlyOnceDelivery: true,
	}); err != nil {
		t.Fatal(err)
	}
	replay := sinktest.ForcedReplay(t, func() sink.Sink { return r.newSink(t) })
	evs := replay.Events
	wantByKey := replay.ByKey(func(ev *ferry.Event) string { // ordering key -> event ids in publish order
		k, _ := pubsub.OrderingKey(ev)
		return k
	})
	msgs := r.messages()
	count := map[string]int{}
	gotByKey := map[string][]string{}
	for _, m := range msgs {
		count[m.d.EventID]++
		gotByKey[m.orderingKey] = append(gotByKey[m.orderingKey], m.d.EventID)
	}
	for _, ev := range evs {
		if count[ev.ID()] == 0 {
			t.Errorf("event %s lost", ev.ID()[:12])
		}
	}
	const published = sinktest.ReplayWrites
	dups := len(msgs) - len(count)
	fmt.Printf("pubsub forced replay: %d events written in 4 publisher sessions; topic holds %d messages, %d distinct events, %d duplicates (allowed: no publish-side de-duplication)\n",
		len(evs), len(msgs), len(count), dups)
	if len(msgs) != published {
		t.Errorf("the topic holds %d messages, want %d (every acknowledged publish, once)", len(msgs), published)
	}
	if len(count) != len(evs) {
		t.Errorf("the topic holds %d distinct events, want %d", len(count), len(evs))
	}
	for key, want := range wantByKey {
		if !slices.Equal(gotByKey[key], want) {
			t.Errorf("document %s: stored order differs from publish order:\n got %v\nwant %v", key, gotByKey[key], want)
		}
	}

	// The receiver: apply each ferry-event-id once, ack with result.
	cl, err := gps.NewClient(ctx, project, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		seen     = map[string]bool{}
		applied  = map[string][]int{} // document -> seq of applied events, in order
		received int
	)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = cl.Subscriber(subName).Receive(rctx, func(_ context.Context, m *gps.Message) {
		id := m.Attributes[pubsub.EventIDAttribute]
		var body struct {
			Doc struct {
				ID  string `bson:"_id"`
				Seq int    `bson:"seq"`
			} `bson:"fullDocument"`
		}
		if err := bson.UnmarshalExtJSON(m.Data, false, &body); err != nil {
			t.Errorf("message %s: %v", m.ID, err)
		}
		mu.Lock()
		if !seen[id] {
			seen[id] = true
			applied[body.Doc.ID] = append(applied[body.Doc.ID], body.Doc.Seq)
		}
		received++
		done := received == published
		mu.Unlock()
		if _, err := m.AckWithResult().Get(rctx); err != nil {
			t.Errorf("ack of %s: %v", m.ID, err)
		}
		if done {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	effects := 0
	for doc, seqs := range applied {
		effects += len(seqs)
		if !slices.IsSorted(seqs) {
			t.Errorf("document %s: effects applied in order %v", doc, seqs)
		}
	}
	fmt.Printf("pubsub receiver: %d messages received, %d effects applied (de-duplicated on %s)\n", received, effects, pubsub.EventIDAttribute)
	if received != published || effects != len(evs) {
		t.Errorf("receiver: %d messages, %d effects; want %d and %d", received, effects, published, len(evs))
	}
}

// BenchmarkWrite publishes batches of 100 events to pstest next to the
// no-op baseline (sinktest.Benchmark).
func BenchmarkWrite(b *testing.B) {
	srv := startServer(b)
	sinktest.Benchmark(b, "pubsub", "pstest", func(b *testing.B, baseline bool) sink.Sink {
		opts := []pubsub.Option{pubsub.Emulator(srv.Addr)}
		if baseline {
			opts = append(opts, pubsub.WithoutPublish())
		}
		s, err := pubsub.New(project, topicID, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.ClearMessages)
		return s
	})
}
