package natsjs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// Header names set on every message besides jetstream.MsgIDHeader.
const (
	// EpochHeader carries the lease epoch the event was published under.
	EpochHeader = "Ferry-Epoch"
	// TraceParentHeader carries the W3C traceparent of the delivery's span
	// (ferry.DeliveryTraceParent of the event), when tracing is on.
	TraceParentHeader = "traceparent"
)

// DefaultSubject is the subject template used without Subject.
const DefaultSubject = "ferry.{db}.{coll}.{op}"

// DefaultTimeout bounds one publish (until its ack) without Timeout.
const DefaultTimeout = 10 * time.Second

// Sink publishes change events to JetStream. It is safe for concurrent use.
type Sink struct {
	url     string
	where   string   // the server URLs without user info, for errors
	secrets []string // passwords and tokens in url, never put in errors
	cfg     config

	mu sync.RWMutex
	nc *nats.Conn
	js jetstream.JetStream
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected sink publishing to the NATS server at url: a
// URL such as nats://host:4222, or a comma-separated list of them, as
// nats.Connect takes. Credentials in the URLs (nats://user:password@host,
// nats://token@host) never appear in errors.
func New(url string, opts ...Option) (*Sink, error) {
	def, err := parseTemplate(DefaultSubject)
	if err != nil {
		return nil, err
	}
	cfg := config{subject: def, timeout: DefaultTimeout}
	var p optcheck.Problems
	var where string
	var secrets []string
	if url == "" {
		p.Add("url", "empty server URL: write one such as nats://127.0.0.1:4222")
	} else if where, secrets, err = serverURLs(url); err != nil {
		p.AddErr("url", err)
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	s := &Sink{url: url, where: where, secrets: secrets, cfg: cfg}
	return s, nil
}

// Connect connects to the server and opens the JetStream context. It does
// not check that a stream is bound to the subjects: a publish to a subject
// no stream listens on fails permanently.
func (s *Sink) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		return nil
	}
	opts := append([]nats.Option{nats.Name("ferry"), nats.MaxReconnects(-1)}, s.cfg.natsOpts...)
	nc, err := nats.Connect(s.url, opts...)
	if err != nil {
		return fmt.Errorf("natsjs: connecting to %s: %w", s.where, s.scrub(err))
	}
	// Acks that do not come within Timeout fail (the default waits for
	// ever, keeping their futures).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(s.cfg.timeout))
	if err != nil {
		nc.Close()
		return fmt.Errorf("natsjs: opening JetStream: %w", err)
	}
	s.nc, s.js = nc, js
	return nil
}

// serverURLs parses the comma-separated server URLs as nats.Connect does
// (a URL without a scheme is nats://). It returns them without user info,
// for errors, and the credentials they hold. Its errors never contain the
// URLs: a URL that does not parse may hold a password.
func serverURLs(raw string) (where string, secrets []string, err error) {
	var hosts []string
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, perr := url.Parse(p)
		if perr != nil {
			which := "the server URL"
			if len(parts) > 1 {
				which = fmt.Sprintf("server URL %d of %d", i+1, len(parts))
			}
			return "", nil, fmt.Errorf("%s does not parse as a URL (percent-encode reserved characters such as '@', ':', '/' in the user name and password)", which)
		}
		if u.User != nil {
			// user:password, or a token alone (nats://token@host): the
			// secret decoded, and as written.
			secret := u.User.Username()
			if pw, ok := u.User.Password(); ok {
				secret = pw
			}
			authority := p[strings.Index(p, "://")+3:]
			if j := strings.IndexAny(authority, "/?#"); j >= 0 {
				authority = authority[:j]
			}
			info := authority[:max(strings.LastIndexByte(authority, '@'), 0)]
			if _, pw, ok := strings.Cut(info, ":"); ok {
				info = pw
			}
			for _, x := range []string{secret, info} {
				if x != "" && !slices.Contains(secrets, x) {
					secrets = append(secrets, x)
				}
			}
		}
		hosts = append(hosts, (&url.URL{Scheme: u.Scheme, Host: u.Host}).String())
	}
	// Longest first, so that no part of a longer one survives.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return strings.Join(hosts, ","), secrets, nil
}

// scrub keeps the credentials of the server URLs out of a connection
// error. The NATS client does not put them in its errors today; this holds
// if that changes.
func (s *Sink) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) { // its message holds the whole URL
		return errors.New("a server URL does not parse as a URL")
	}
	msg := err.Error()
	clean := msg
	for _, secret := range s.secrets {
		clean = strings.ReplaceAll(clean, secret, "REDACTED")
	}
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

// scrubbedError is an error whose text had credentials removed. It matches
// the original's sentinels (errors.Is) but does not unwrap to it, since the
// original's text holds the credentials.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string        { return e.msg }
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// Close flushes what was published and closes the connection; later writes
// fail with sink.ErrNotConnected. Publishes still waiting for their ack fail
// retryably.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	nc := s.nc
	s.nc, s.js = nil, nil
	s.mu.Unlock()
	if nc == nil {
		return nil
	}
	var err error
	if !nc.IsClosed() {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.timeout)
			defer cancel()
		}
		if ferr := nc.FlushWithContext(ctx); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
			err = fmt.Errorf("natsjs: flushing before close: %w", ferr)
		}
	}
	nc.Close()
	return err
}

// Write publishes the batch in waves: every event whose document has no
// earlier event in the batch still waiting is published at once (async),
// then Write awaits their acks; the next event of each document whose
// event was acknowledged goes in the next wave. A batch of distinct
// documents costs one round trip, and a stream still holds a document's
// events in change order: none is published before the ack of the one
// before it (see the package doc for failures and their retry classes).
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.RLock()
	js := s.js
	s.mu.RUnlock()
	if js == nil {
		return sink.Retryable(sink.ErrNotConnected)
	}
	be := sink.NewBatchError(len(batch))
	keys := make([]string, len(batch))
	pending := make([]int, len(batch))
	for i, ev := range batch {
		keys[i], pending[i] = sink.KeyOf(ev), i
	}
	failed := map[string]bool{} // documents with a failed event: the rest are not attempted
	for len(pending) > 0 {
		var wave []inFlight
		var next []int
		inWave := map[string]bool{}
		for _, i := range pending {
			switch k := keys[i]; {
			case ctx.Err() != nil:
				be.Set(i, sink.Retryable(ctx.Err()))
			case failed[k]:
				be.Set(i, sink.Retryable(sink.ErrSkipped))
			case inWave[k]:
				next = append(next, i) // after the ack of its document's event before it
			default:
				inWave[k] = true
				ack, err := s.publishAsync(ctx, js, batch[i])
				if err != nil {
					be.Set(i, err)
					failed[k] = true
				} else if ack != nil {
					wave = append(wave, inFlight{i: i, ack: ack})
				}
			}
		}
		for _, f := range s.await(ctx, js, batch, wave) {
			if f.err != nil {
				be.Set(f.i, f.err)
				failed[keys[f.i]] = true
			}
		}
		pending = next
	}
	return be.Err()
}

// inFlight is a published event of a wave: its index in the batch, its
// ack, and the error await found.
type inFlight struct {
	i   int
	ack jetstream.PubAckFuture
	err error
}

// await waits for the acks of a wave and sets each one's err. The client
// fails an ack that does not come within Timeout
// (jetstream.WithPublishAsyncTimeout); the timer is a backstop: once it
// fired, the acks already in are still taken, and the others fail as late.
func (s *Sink) await(ctx context.Context, js jetstream.JetStream, batch []*ferry.Event, wave []inFlight) []inFlight {
	timer := time.NewTimer(s.cfg.timeout + time.Second)
	defer timer.Stop()
	late := false
	for k := range wave {
		f := &wave[k]
		ev := batch[f.i]
		var done <-chan time.Time = timer.C
		if late {
			done = closedTime
		}
		select {
		case <-f.ack.Ok():
			// Stored (a Duplicate ack too: the stream holds it already).
		case err := <-f.ack.Err():
			f.err = s.classify(ctx, js, ev, f.ack.Msg().Subject, err)
		case <-ctx.Done():
			f.err = sink.Retryable(fmt.Errorf("natsjs: event %s: %w", ev.ID(), ctx.Err()))
		case <-done:
			// A ready ack wins over the timer.
			select {
			case <-f.ack.Ok():
				continue
			case err := <-f.ack.Err():
				f.err = s.classify(ctx, js, ev, f.ack.Msg().Subject, err)
				continue
			default:
			}
			late = true
			f.err = sink.Retryable(fmt.Errorf("natsjs: event %s: no ack within %s: %w", ev.ID(), s.cfg.timeout, context.DeadlineExceeded))
		}
	}
	return wave
}

// closedTime is a channel that is always ready: the timer of a wave that
// is already late.
var closedTime = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// publishAsync publishes one event without waiting for its ack. A nil
// future with a nil error means there is nothing to wait for.
func (s *Sink) publishAsync(ctx context.Context, js jetstream.JetStream, ev *ferry.Event) (jetstream.PubAckFuture, error) {
	subject := s.cfg.subject.render(ev)
	data, err := extjson.Marshal(ev.Raw, s.cfg.canonical)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("natsjs: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
	msg.Header.Set(EpochHeader, strconv.FormatInt(ev.Epoch, 10))
	if tp := ferry.DeliveryTraceParent(ctx, ev); tp != "" {
		msg.Header.Set(TraceParentHeader, tp)
	}
	if s.cfg.fault != nil {
		if err := s.cfg.fault(ev); err != nil {
			return nil, s.classify(ctx, js, ev, subject, err)
		}
	}
	if s.cfg.noPublish {
		return nil, nil
	}
	ack, err := js.PublishMsgAsync(msg)
	if err != nil {
		return nil, s.classify(ctx, js, ev, subject, err)
	}
	return ack, nil
}

// classify wraps a publish error with its retry class.
func (s *Sink) classify(ctx context.Context, js jetstream.JetStream, ev *ferry.Event, subject string, err error) error {
	wrapped := fmt.Errorf("natsjs: event %s to %q: %w", ev.ID(), subject, err)
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrInvalidSubject), errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, nats.ErrMaxPayload):
		return sink.Permanent(wrapped)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return sink.Permanent(wrapped)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		// Nobody answered: either no stream is bound to the subject (a
		// configuration error) or the stream is unavailable for now (leader
		// election, restart). Ask JetStream which.
		if ctx.Err() == nil && js != nil && s.noStreamFor(ctx, js, subject) {
			return sink.Permanent(fmt.Errorf("natsjs: event %s: no stream is bound to subject %q: %w", ev.ID(), subject, err))
		}
		return sink.Retryable(wrapped)
	case errors.As(err, &apiErr) && apiErr.Code == 400:
		return sink.Permanent(wrapped) // the stream rejected the message itself
	}
	return sink.Retryable(wrapped)
}

// noStreamFor reports whether JetStream answered that no stream listens on
// subject.
func (s *Sink) noStreamFor(ctx context.Context, js jetstream.JetStream, subject string) bool {
	lctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	_, err := js.StreamNameBySubject(lctx, subject)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}
