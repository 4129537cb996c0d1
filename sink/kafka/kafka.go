package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// Header names set on every record.
const (
	// EventIDHeader carries the event id (ferry.Event.ID), the idempotency
	// key receivers de-duplicate on.
	EventIDHeader = "ferry-event-id"
	// EpochHeader carries the lease epoch the event was produced under.
	EpochHeader = "ferry-epoch"
	// TraceParentHeader carries the W3C traceparent of the delivery's span
	// (ferry.DeliveryTraceParent of the event), when tracing is on.
	TraceParentHeader = "traceparent"
)

// DefaultTimeout bounds one produce (until the broker's ack) without
// Timeout.
const DefaultTimeout = 10 * time.Second

// Sink produces change events to a Kafka topic. It is safe for concurrent
// use.
type Sink struct {
	brokers []string
	cfg     config

	mu sync.RWMutex
	cl *kgo.Client
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected sink producing to the cluster reached through
// the seed brokers ("host:port").
func New(brokers []string, opts ...Option) (*Sink, error) {
	cfg := config{timeout: DefaultTimeout}
	var p optcheck.Problems
	if len(brokers) == 0 {
		p.Add("brokers", "no seed brokers: list at least one host:port")
	}
	for i, b := range brokers {
		p.AddErr(fmt.Sprintf("brokers[%d]", i), CheckBroker(b))
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	s := &Sink{brokers: append([]string(nil), brokers...), cfg: cfg}
	return s, nil
}

// Connect creates the client and checks that a broker answers.
func (s *Sink) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return nil
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.brokers...),
		kgo.ClientID("ferry"),
		kgo.DefaultProduceTopic(s.cfg.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// The per-record context enforces Timeout; this is the backstop
		// (kgo allows no less than 1s).
		kgo.RecordDeliveryTimeout(max(s.cfg.timeout, time.Second)),
		// Write waits for its batch: do not hold records back for more.
		kgo.ProducerLinger(0),
	}, s.cfg.clientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: creating the client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return fmt.Errorf("kafka: connecting to %v: %w", s.brokers, err)
	}
	s.cl = cl
	return nil
}

// Close waits (within ctx, or Timeout without a deadline) for records still
// in flight and closes the client; later writes fail with
// sink.ErrNotConnected.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	cl := s.cl
	s.cl = nil
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.timeout)
		defer cancel()
	}
	var err error
	if ferr := cl.Flush(ctx); ferr != nil {
		err = fmt.Errorf("kafka: flushing before close: %w", ferr)
	}
	cl.Close()
	return err
}

func (s *Sink) client() *kgo.Client {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cl
}

// Write produces the batch in order, all records in flight at once, and
// returns when the broker acknowledged or failed each of them (see the
// package doc for failures and their retry classes).
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	cl := s.client()
	if cl == nil {
		return sink.Retryable(sink.ErrNotConnected)
	}
	be := sink.NewBatchError(len(batch))
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex // guards pending and abandoned against the callbacks
		abandoned bool
		pending   = make([]bool, len(batch))
	)
	sink.Submit(ctx, batch, be, func(i int, ev *ferry.Event) error {
		rec, err := s.record(ctx, ev)
		if err != nil {
			return err
		}
		if s.cfg.fault != nil {
			if err := s.cfg.fault(ev); err != nil {
				return classify(ev, s.cfg.topic, err)
			}
		}
		if s.cfg.noProduce {
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
		wg.Add(1)
		mu.Lock()
		pending[i] = true
		mu.Unlock()
		cl.Produce(rctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			defer cancel()
			mu.Lock()
			defer mu.Unlock()
			if abandoned {
				return
			}
			pending[i] = false
			if err != nil {
				be.Set(i, classify(ev, s.cfg.topic, err))
			}
		})
		return nil
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The client fails a record on its context only when that is safe for
	// the idempotent producer (it was never sent); a record sent to a broker
	// that then went away stays in flight. Wait no longer than Timeout
	// (plus a grace for the callbacks) and report such records as
	// unacknowledged: retryable, possibly delivered later (a duplicate the
	// receiver drops by ferry-event-id).
	timer := time.NewTimer(s.cfg.timeout + time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	abandoned = true
	for i, p := range pending {
		if p {
			be.Set(i, sink.Retryable(fmt.Errorf("kafka: event %s to topic %q: no acknowledgement within %s: %w",
				batch[i].ID(), s.cfg.topic, s.cfg.timeout, context.DeadlineExceeded)))
		}
	}
	return be.Err()
}

// record builds the record of an event.
func (s *Sink) record(ctx context.Context, ev *ferry.Event) (*kgo.Record, error) {
	value, err := extjson.Marshal(ev.Raw, s.cfg.canonical)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("kafka: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	key, err := recordKey(ev)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("kafka: event %s: rendering the documentKey: %w", ev.ID(), err))
	}
	rec := &kgo.Record{
		Topic: s.cfg.topic,
		Key:   key,
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: EventIDHeader, Value: []byte(ev.ID())},
			{Key: EpochHeader, Value: []byte(strconv.FormatInt(ev.Epoch, 10))},
		},
	}
	if tp := ferry.DeliveryTraceParent(ctx, ev); tp != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: TraceParentHeader, Value: []byte(tp)})
	}
	return rec, nil
}

// recordKey returns the documentKey as canonical Extended JSON, or the
// namespace for events without one.
func recordKey(ev *ferry.Event) ([]byte, error) {
	if len(ev.DocumentKey) == 0 {
		return []byte(ev.Namespace.String()), nil
	}
	return extjson.Marshal(ev.DocumentKey, true)
}

// permanentErrs are the broker (or client-side) rejections retrying cannot
// fix.
var permanentErrs = []error{
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidRecord,
	kerr.CorruptMessage,
	kerr.TopicAuthorizationFailed,
	kerr.InvalidTopicException,
}

// classify wraps a produce error with its retry class.
func classify(ev *ferry.Event, topic string, err error) error {
	wrapped := fmt.Errorf("kafka: event %s to topic %q: %w", ev.ID(), topic, err)
	for _, p := range permanentErrs {
		if errors.Is(err, p) {
			return sink.Permanent(wrapped)
		}
	}
	// Everything else is retryable: timeouts (context.DeadlineExceeded),
	// a closed client (kgo.ErrClientClosed), connection errors, and what
	// kerr.IsRetriable reports; unrecognised errors too, as every unmarked
	// sink failure.
	// Unrecognised: retryable, as every unmarked sink failure.
	return sink.Retryable(wrapped)
}
