package pubsub_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/sinktest"
)

const (
	project = "ferry-test"
	topicID = "ferry-events"
	topic   = "projects/" + project + "/topics/" + topicID
)

// startServer starts pstest, the client library's in-process fake Pub/Sub,
// with the topic created.
func startServer(t testing.TB, opts ...pstest.ServerReactorOption) *pstest.Server {
	t.Helper()
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.GServer.CreateTopic(context.Background(), &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// message is one message read back from the server.
type message struct {
	id          string
	orderingKey string
	attrs       map[string]string
	d           sinktest.Delivery
}

// receiver reads what the fake server stored, in publish order.
type receiver struct {
	sinktest.Faults
	srv *pstest.Server
}

func newReceiver(srv *pstest.Server) *receiver { return &receiver{srv: srv} }

func (r *receiver) messages() []message {
	var out []message
	for _, m := range r.srv.Messages() {
		epoch, _ := strconv.ParseInt(m.Attributes[pubsub.EpochAttribute], 10, 64)
		id := m.Attributes[pubsub.EventIDAttribute]
		out = append(out, message{
			id:          m.ID,
			orderingKey: m.OrderingKey,
			attrs:       m.Attributes,
			d:           sinktest.Delivery{EventID: id, IdempotencyKey: id, Epoch: epoch, Body: m.Data},
		})
	}
	return out
}

func (r *receiver) Received() []sinktest.Delivery {
	var out []sinktest.Delivery
	for _, m := range r.messages() {
		out = append(out, m.d)
	}
	return out
}

// fault fails events the way the client would: Pub/Sub unavailable beyond
// the publish timeout (retryable) or a request it rejects as invalid
// (permanent).
func (r *receiver) fault() func(*ferry.Event) error {
	return r.Hook(status.Error(codes.Unavailable, "injected: service unavailable"),
		status.Error(codes.InvalidArgument, "injected: invalid message"))
}

func (r *receiver) newSink(t testing.TB, opts ...pubsub.Option) *pubsub.Sink {
	opts = append([]pubsub.Option{pubsub.Emulator(r.srv.Addr), pubsub.WithFault(r.fault()), pubsub.Timeout(5 * time.Second)}, opts...)
	s, err := pubsub.New(project, topicID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (r *receiver) NewSink(t *testing.T) sink.Sink { return r.newSink(t) }

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		r := newReceiver(startServer(t))
		return r.NewSink(t), r
	})
}
