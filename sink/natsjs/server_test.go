package natsjs_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/sinktest"
)

const streamName = "FERRY"

// broker is an in-process nats-server with JetStream on and a stream bound
// to "ferry.>" with a duplicate window of a few minutes.
type broker struct {
	srv    *server.Server
	url    string
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
}

func startBroker(t testing.TB) *broker {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	b := &broker{srv: srv, url: srv.ClientURL()}
	b.nc, err = nats.Connect(b.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.nc.Close)
	b.js, err = jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	b.stream, err = b.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name:       streamName,
		Subjects:   []string{"ferry.>"},
		Duplicates: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored returns the stream's messages in sequence order.
func (b *broker) stored(t testing.TB) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	info, err := b.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := b.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// receiver sees the destination side: every message that reached the broker
// on "ferry.>" (a core subscription, so the publishes JetStream dropped as
// duplicates are seen too) and, to check them against, the stream.
type receiver struct {
	t   *testing.T
	b   *broker
	sub *nats.Subscription

	sinktest.Faults

	mu    sync.Mutex
	sinks []*natsjs.Sink
	got   []sinktest.Delivery
}

func newReceiver(t *testing.T, b *broker) *receiver {
	t.Helper()
	sub, err := b.nc.SubscribeSync("ferry.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &receiver{t: t, b: b, sub: sub}
}

func delivery(m *nats.Msg) sinktest.Delivery {
	id := m.Header.Get(jetstream.MsgIDHeader)
	epoch, _ := strconv.ParseInt(m.Header.Get(natsjs.EpochHeader), 10, 64)
	return sinktest.Delivery{EventID: id, IdempotencyKey: id, Epoch: epoch, Body: m.Data}
}

// Received returns every publish that reached the broker, after checking
// that the stream holds each distinct one exactly once.
func (r *receiver) Received() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A round trip on each sink's connection: the server has then routed
	// every message the sinks published; a round trip on ours: whatever the
	// server sent us before is then queued on the subscription. (The ack
	// alone is no barrier: JetStream may ack before the server has handed
	// the message to core subscribers.)
	for _, s := range r.sinks {
		if err := s.Flush(); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.b.nc.Flush(); err != nil {
		r.t.Fatal(err)
	}
	for {
		n, _, err := r.sub.Pending()
		if err != nil {
			r.t.Fatal(err)
		}
		if n == 0 {
			break
		}
		m, err := r.sub.NextMsg(time.Second)
		if err != nil {
			r.t.Fatal(err)
		}
		r.got = append(r.got, delivery(m))
	}
	seen := map[string]bool{}
	for _, d := range r.got {
		seen[d.EventID] = true
	}
	stored := map[string]bool{}
	for _, m := range r.b.stored(r.t) {
		id := m.Header.Get(jetstream.MsgIDHeader)
		if stored[id] {
			r.t.Errorf("the stream holds event %s twice", id)
		}
		stored[id] = true
		if !seen[id] {
			r.t.Errorf("the stream holds event %s, which never reached the broker", id)
		}
	}
	for id := range seen {
		if !stored[id] {
			r.t.Errorf("event %s reached the broker but is not in the stream", id)
		}
	}
	return append([]sinktest.Delivery(nil), r.got...)
}

// fault fails events the way the client library would: a publish whose ack
// did not come in time (retryable) or a message above the server's max
// payload (permanent).
func (r *receiver) fault() func(*ferry.Event) error {
	return r.Hook(context.DeadlineExceeded, nats.ErrMaxPayload)
}

func (r *receiver) NewSink(t *testing.T) sink.Sink {
	s, err := natsjs.New(r.b.url, natsjs.WithFault(r.fault()), natsjs.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	r.mu.Lock()
	r.sinks = append(r.sinks, s)
	r.mu.Unlock()
	return s
}

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		r := newReceiver(t, startBroker(t))
		return r.NewSink(t), r
	})
}
