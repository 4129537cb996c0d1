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
	// OperationHeader carries the event's operationType ("backfill" for a
	// snapshot row, whose value is the bare document).
	OperationHeader = "ferry-operation"
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
// package doc for failures and their retry classes). Timeout bounds the
// batch's produces from the first one.
//
// The batch's records, their headers, keys and values are laid out in a
// few allocations shared by the batch (see recordArena) rather than
// several per event.
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
	// One deadline for the batch: every record is produced within
	// microseconds of the first, so this is Timeout per produce, without a
	// context (and its timer) per record. It is cancelled once every
	// record is acknowledged or abandoned.
	rctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	a := newRecordArena(batch)
	sink.Submit(ctx, batch, be, func(i int, ev *ferry.Event) error {
		rec := &a.recs[i]
		if err := s.record(ctx, ev, rec, a); err != nil {
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
		wg.Add(1)
		mu.Lock()
		pending[i] = true
		mu.Unlock()
		cl.Produce(rctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
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

// A recordArena holds a batch's records and the bytes of their keys,
// values and headers. Each record's slices are capped sub-slices of buf
// and hdrs: when an append outgrows the backing array the earlier records
// keep the old one, whose bytes nothing writes again, so every record's
// bytes stay as rendered for as long as the client holds it. Nothing is
// reused after Write returns: a record abandoned after Timeout may still
// be in the client's hands.
type recordArena struct {
	recs []kgo.Record
	hdrs []kgo.RecordHeader
	buf  []byte
}

// Per-record room the arena reserves beyond the event's raw sizes: the
// event id (64 hex digits), the epoch and some Extended JSON growth.
const arenaSlack = 256

func newRecordArena(batch []*ferry.Event) *recordArena {
	size := 0
	for _, ev := range batch {
		size += len(ev.Raw) + 2*len(ev.DocumentKey) + arenaSlack
	}
	return &recordArena{
		recs: make([]kgo.Record, len(batch)),
		hdrs: make([]kgo.RecordHeader, 0, 3*len(batch)),
		buf:  make([]byte, 0, size),
	}
}

// cut returns buf[from:] as a slice of its own capacity.
func (a *recordArena) cut(from int) []byte { return a.buf[from:len(a.buf):len(a.buf)] }

// header appends a header whose value is buf[from:].
func (a *recordArena) header(key string, from int) {
	a.hdrs = append(a.hdrs, kgo.RecordHeader{Key: key, Value: a.cut(from)})
}

// record builds the record of an event in rec, its bytes in a.
func (s *Sink) record(ctx context.Context, ev *ferry.Event, rec *kgo.Record, a *recordArena) error {
	start := len(a.buf)
	var err error
	if a.buf, err = extjson.Append(a.buf, ev.Raw, s.cfg.canonical); err != nil {
		return sink.Permanent(fmt.Errorf("kafka: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	value := a.cut(start)
	start = len(a.buf)
	if a.buf, err = appendRecordKey(a.buf, ev); err != nil {
		return sink.Permanent(fmt.Errorf("kafka: event %s: rendering the documentKey: %w", ev.ID(), err))
	}
	key := a.cut(start)
	h := len(a.hdrs)
	start = len(a.buf)
	a.buf = append(a.buf, ev.ID()...)
	a.header(EventIDHeader, start)
	start = len(a.buf)
	a.buf = strconv.AppendInt(a.buf, ev.Epoch, 10)
	a.header(EpochHeader, start)
	if ev.OperationType != "" {
		start = len(a.buf)
		a.buf = append(a.buf, ev.OperationType...)
		a.header(OperationHeader, start)
	}
	if tp := ferry.DeliveryTraceParent(ctx, ev); tp != "" {
		start = len(a.buf)
		a.buf = append(a.buf, tp...)
		a.header(TraceParentHeader, start)
	}
	*rec = kgo.Record{
		Topic:   s.cfg.topic,
		Key:     key,
		Value:   value,
		Headers: a.hdrs[h:len(a.hdrs):len(a.hdrs)],
	}
	return nil
}

// appendRecordKey appends the documentKey as canonical Extended JSON, or
// the namespace for events without one.
func appendRecordKey(dst []byte, ev *ferry.Event) ([]byte, error) {
	if len(ev.DocumentKey) == 0 {
		return append(dst, ev.Namespace.String()...), nil
	}
	return extjson.Append(dst, ev.DocumentKey, true)
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
