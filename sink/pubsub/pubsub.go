package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gps "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// DefaultTimeout bounds one publish (until Pub/Sub's ack, the client's
// internal retries included) without Timeout.
const DefaultTimeout = 10 * time.Second

// Sink publishes change events to a Pub/Sub topic. It is safe for
// concurrent use.
type Sink struct {
	project string
	topic   string // full name: projects/<project>/topics/<id>
	cfg     config

	mu  sync.RWMutex
	cl  *gps.Client
	pub *gps.Publisher
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected sink publishing to topic (a topic id, or a
// full name "projects/<project>/topics/<id>" in project; see CheckTopic).
func New(project, topic string, opts ...Option) (*Sink, error) {
	cfg := config{timeout: DefaultTimeout}
	var p optcheck.Problems
	p.AddErr("project", CheckProject(project))
	p.AddErr("topic", CheckTopic(project, topic))
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	id := topic[strings.LastIndexByte(topic, '/')+1:]
	return &Sink{project: project, topic: "projects/" + project + "/topics/" + id, cfg: cfg}, nil
}

// Topic returns the topic's full name.
func (s *Sink) Topic() string { return s.topic }

// Connect creates the client and publisher and checks that the topic
// exists. A caller allowed to publish but not to read the topic's metadata
// (roles/pubsub.publisher alone) passes the check: the first publish then
// reports a missing topic.
func (s *Sink) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return nil
	}
	var opts []option.ClientOption
	if s.cfg.emulator != "" {
		opts = append(opts,
			option.WithEndpoint(s.cfg.emulator),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		)
	}
	opts = append(opts, s.cfg.clientOpts...)
	cl, err := gps.NewClient(ctx, s.project, opts...)
	if err != nil {
		return fmt.Errorf("pubsub: creating the client: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	_, err = cl.TopicAdminClient.GetTopic(cctx, &pubsubpb.GetTopicRequest{Topic: s.topic})
	switch status.Code(err) {
	case codes.OK, codes.PermissionDenied:
	case codes.NotFound:
		_ = cl.Close()
		return fmt.Errorf("pubsub: topic %s does not exist: create it (gcloud pubsub topics create) or fix the topic name", s.topic)
	default:
		_ = cl.Close()
		return fmt.Errorf("pubsub: checking topic %s: %w", s.topic, err)
	}
	pub := cl.Publisher(s.topic)
	pub.EnableMessageOrdering = true
	pub.PublishSettings.Timeout = s.cfg.timeout
	// Write waits for its batch: do not hold messages back for more.
	pub.PublishSettings.DelayThreshold = 100 * time.Microsecond
	s.cl, s.pub = cl, pub
	return nil
}

// Close publishes what is still queued (within ctx, or Timeout without a
// deadline), stops the publisher and closes the client; later writes fail
// with sink.ErrNotConnected.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	cl, pub := s.cl, s.pub
	s.cl, s.pub = nil, nil
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.timeout)
		defer cancel()
	}
	stopped := make(chan struct{})
	go func() { pub.Stop(); close(stopped) }()
	var err error
	select {
	case <-stopped:
	case <-ctx.Done():
		err = fmt.Errorf("pubsub: publishing queued messages before close: %w", ctx.Err())
	}
	if cerr := cl.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("pubsub: closing the client: %w", cerr)
	}
	return err
}

func (s *Sink) publisher() *gps.Publisher {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pub
}

// Write publishes the batch in order, all messages in flight at once, and
// returns when Pub/Sub acknowledged or failed each of them (see the package
// doc for failures and their retry classes).
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	pub := s.publisher()
	if pub == nil {
		return sink.Retryable(sink.ErrNotConnected)
	}
	be := sink.NewBatchError(len(batch))
	results := make([]*gps.PublishResult, len(batch))
	orderingKeys := make([]string, len(batch))
	sink.Submit(ctx, batch, be, func(i int, ev *ferry.Event) error {
		msg, err := s.message(ctx, ev)
		if err != nil {
			return err
		}
		if s.cfg.fault != nil {
			if err := s.cfg.fault(ev); err != nil {
				return classify(ev, s.topic, err)
			}
		}
		if !s.cfg.noPublish {
			orderingKeys[i] = msg.OrderingKey
			results[i] = pub.Publish(ctx, msg)
		}
		return nil
	})
	// The client gives up on a publish after PublishSettings.Timeout; wait
	// a grace longer for its verdict, then report what is still pending
	// as unacknowledged (retryable, possibly delivered later: a duplicate
	// the receiver drops by ferry-event-id).
	wctx, cancel := context.WithTimeout(ctx, s.cfg.timeout+time.Second)
	defer cancel()
	paused := map[string]bool{}
	for i, r := range results {
		if r == nil {
			continue
		}
		if _, err := r.Get(wctx); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("no acknowledgement within %s: %w", s.cfg.timeout, context.DeadlineExceeded)
			}
			be.Set(i, classify(batch[i], s.topic, err))
			paused[orderingKeys[i]] = true
		}
	}
	// A failed publish pauses its ordering key in the client; ferry retries
	// these events, so accept the key again. Ferry's lanes give each key
	// one writer at a time, so no other Write is publishing it now.
	for k := range paused {
		pub.ResumePublish(k)
	}
	return be.Err()
}

// classify wraps a publish error with its retry class.
func classify(ev *ferry.Event, topic string, err error) error {
	wrapped := fmt.Errorf("pubsub: event %s to topic %s: %w", ev.ID(), topic, err)
	var paused gps.ErrPublishingPaused
	switch {
	case errors.As(err, &paused):
		// An earlier message of the same document failed: this one was
		// never sent.
		return sink.Retryable(fmt.Errorf("pubsub: event %s to topic %s: %w (%v)", ev.ID(), topic, sink.ErrSkipped, err))
	case errors.Is(err, gps.ErrOversizedMessage):
		return sink.Permanent(wrapped)
	case errors.Is(err, gps.ErrPublisherStopped):
		return sink.Retryable(fmt.Errorf("%w: %w", wrapped, sink.ErrNotConnected))
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.InvalidArgument, codes.PermissionDenied:
			return sink.Permanent(wrapped)
		}
	}
	// Everything else is retryable: the codes the client retries itself
	// until Timeout (Unavailable, DeadlineExceeded, ResourceExhausted,
	// Internal, Aborted, Unknown, Canceled), NotFound (a topic being
	// created or restored), Unauthenticated (a token refresh), context
	// errors, and anything unrecognised, as every unmarked sink failure.
	return sink.Retryable(wrapped)
}
