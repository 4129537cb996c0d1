// Package webhook is a sink that POSTs each change event to an HTTP
// endpoint, signed the Standard Webhooks way (https://www.standardwebhooks.com).
//
// # The request
//
//	POST <url>
//	Content-Type: application/json
//	webhook-id: <event id>              (ferry.Event.ID: for a change event the hex sha256 of its resume token)
//	webhook-timestamp: <unix seconds>   (time of this attempt)
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//	Idempotency-Key: <event id>
//	Ferry-Epoch: <lease epoch>
//	Ferry-Stream: <stream name>         (only with Stream; the daemon sets it)
//	Ferry-Operation: <operationType>    (insert, update, delete, ...; "backfill" for a snapshot row)
//	Ferry-Namespace: <db.coll>
//	traceparent: <W3C traceparent>      (only when tracing is on: the delivery's span, ferry.DeliveryTraceParent)
//	User-Agent: ferry-webhook/1         (unless set with Header)
//
//	<the change event (for a backfill event, the scanned document) as relaxed (default) or canonical Extended JSON>
//
// The key is the base64-decoded part of the "whsec_..." secret: "whsec_"
// followed by the standard base64 (with padding) of 24 to 64 random bytes
// (DecodeSecret). Receivers verify the signature over the raw body, reject
// timestamps too far from their clock, and deduplicate on the event id
// (examples/node-receiver).
//
// Only the id, the timestamp and the body are signed (Standard Webhooks);
// the Ferry-* headers tell a receiver how to handle a verified body (which
// stream's records key it, whether the body is a change event or a
// snapshot row's document).
//
// Header adds headers to every request. It refuses, in any case, the ones
// the sink sets itself: Content-Type, Content-Length, Host, webhook-id,
// webhook-timestamp, webhook-signature, Idempotency-Key and the Ferry-*
// headers above.
// A User-Agent set with Header replaces the default: a gateway may route or
// allow-list on it.
//
// # What done means, and retry classes
//
// An event is delivered when the receiver answers 2xx; the response body is
// ignored. Failures are classified for ferry (see package sink):
//
//   - retryable: connection errors, a connection dropped before the
//     response (the receiver may have applied the event: the retry carries
//     the same Idempotency-Key), request timeouts (Timeout), 408, 429 and
//     5xx. On 429 and 503 a Retry-After header (seconds or an HTTP date,
//     capped by MaxRetryAfter) is attached to the error (sink.RetryDelay),
//     and sink.Handler (sink.BatchHandler) waits that long before ferry's
//     next attempt. Write itself never sleeps.
//   - in progress: a 503 with the header "Ferry-Retry: in-progress" says
//     that another delivery of the same event is being applied right now
//     (a takeover while the old owner's request still runs; the receiver
//     library of receivers/node answers so). The event is retried after
//     Retry-After without counting the attempt (ErrInProgress matches
//     sink.ErrNotAttempted), and the rest of the batch goes on: the
//     receiver is up.
//   - permanent (dead-lettered without retry): every other status,
//     including other 4xx and 3xx (redirects are not followed: a POST must
//     not silently turn into a GET; configure the final URL), and events
//     that cannot be rendered as Extended JSON.
//
// # Batches
//
// Write posts a batch's events one at a time, in order: one request per
// event is the contract (one id, one signature, one Idempotency-Key), and
// a lane posting its batch in order keeps each document's events in change
// order. What a batch saves is ferry's work around the requests (the
// ledger of idempotent delivery is read and written once per batch). On a
// connection-level failure (error, timeout, 429, 503) the rest of the
// batch is not attempted and fails with an error that wraps the same one
// and matches sink.ErrNotAttempted: the receiver is unreachable or
// overloaded, and hammering it helps no one. Nor does Write start a
// request after the first when its context's deadline (ferry's
// HandlerTimeout, which bounds the whole batch) leaves less than Timeout
// for it: the events left fail with ErrNoTimeLeft (not attempted,
// retryable), and ferry tries them next, alone.
//
// # Connections and secrets
//
// One http.Client with keep-alive connections serves every Write; response
// bodies are always drained (up to 64 KiB) and closed so connections are
// reused. It keeps up to MaxIdleConns idle connections to the receiver
// (DefaultMaxIdleConns, 64): keep it at least the number of ferry lanes
// posting through the sink in one process (partitions owned ×
// ferry.Concurrency, 8 by default), or the connections of lanes that pause
// together are closed and dialled again. Close closes idle connections.
// The secret, header values set with Header, the URL's user info and query
// string, and request bodies never appear in errors; a failed response's
// first bytes (up to 200) do, for debugging the receiver.
//
// # Options
//
// New validates the URL and every option once (see package sink,
// "Options"); its error matches ErrInvalidOption and lists every problem,
// never the secret or a header value. The checks are exported for
// configuration files: CheckURL, CheckHeader and DecodeSecret.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// Defaults.
const (
	DefaultUserAgent     = "ferry-webhook/1" // unless Header sets User-Agent
	DefaultTimeout       = 10 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultMaxIdleConns  = 64
)

// Sink posts events to one URL. It is safe for concurrent use.
type Sink struct {
	cfg       config
	where     string // URL without user info and query, for errors
	client    *http.Client
	transport *http.Transport
	connected atomic.Bool
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected webhook sink posting to rawURL. Secret is
// required. Errors wrap ErrInvalidOption and name the option.
func New(rawURL string, opts ...Option) (*Sink, error) {
	cfg := defaultConfig()
	var p optcheck.Problems
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p, rawURL)
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	u := cfg.url
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = cfg.maxIdle
	tr.MaxIdleConnsPerHost = cfg.maxIdle
	where := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return &Sink{
		cfg:       cfg,
		where:     where.String(),
		transport: tr,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Connect makes the sink ready. It does not contact the receiver: the first
// Write does, and its failures are classified like any other.
func (s *Sink) Connect(context.Context) error {
	s.connected.Store(true)
	return nil
}

// Close stops the sink and closes idle connections. Later writes fail with
// sink.ErrNotConnected.
func (s *Sink) Close(context.Context) error {
	s.connected.Store(false)
	s.transport.CloseIdleConnections()
	return nil
}

// ErrNoTimeLeft is the failure of an event of a batch that Write did not
// post because the context's deadline left less than Timeout for its
// request. It matches sink.ErrNotAttempted: ferry retries the event
// without counting the attempt.
var ErrNoTimeLeft error = &noTimeLeft{}

type noTimeLeft struct{}

func (*noTimeLeft) Error() string {
	return "webhook: not attempted: the batch's deadline leaves less than Timeout for the request"
}
func (*noTimeLeft) Is(target error) bool { return target == sink.ErrNotAttempted }

// Write posts the batch's events one at a time, in order (see the package
// doc, "Batches").
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	if !s.connected.Load() {
		return sink.Retryable(sink.ErrNotConnected)
	}
	posted := false
	return sink.EachInOrder(ctx, batch, func(ctx context.Context, ev *ferry.Event) error {
		if posted {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < s.cfg.timeout {
				return ErrNoTimeLeft
			}
		}
		posted = true
		return s.post(ctx, ev)
	}, stopsBatch)
}

// StatusError is a non-2xx answer from the receiver; Write's per-event
// errors wrap it.
type StatusError struct {
	StatusCode int
	// Snippet is the start of the response body (at most 200 bytes).
	Snippet string
}

func (e *StatusError) Error() string {
	if e.Snippet == "" {
		return fmt.Sprintf("receiver answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("receiver answered %d %s: %q", e.StatusCode, http.StatusText(e.StatusCode), e.Snippet)
}

// connError is a failure to get any answer (connection, timeout).
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// ErrInProgress is matched (errors.Is) by the failure of an event the
// receiver answered 503 with "Ferry-Retry: in-progress": another delivery
// of the same event is being applied. It matches sink.ErrNotAttempted, so
// ferry retries the event without counting the attempt and does not judge
// the receiver down by it.
var ErrInProgress = errors.New("webhook: another delivery of the event is in progress at the receiver")

type inProgress struct{ err error }

func (e *inProgress) Error() string { return e.err.Error() + " (in progress)" }
func (e *inProgress) Unwrap() error { return e.err }
func (e *inProgress) Is(target error) bool {
	return target == ErrInProgress || target == sink.ErrNotAttempted
}

// stopsBatch reports whether a failure concerns the receiver rather than
// the event.
func stopsBatch(err error) bool {
	if err == ErrNoTimeLeft {
		return true
	}
	if errors.Is(err, ErrInProgress) {
		return false // the receiver is up; only this event waits
	}
	var ce *connError
	if errors.As(err, &ce) {
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && (se.StatusCode == http.StatusTooManyRequests || se.StatusCode == http.StatusServiceUnavailable)
}

// post delivers one event.
func (s *Sink) post(ctx context.Context, ev *ferry.Event) error {
	body, err := extjson.Marshal(ev.Raw, s.cfg.canonical)
	if err != nil {
		return sink.Permanent(fmt.Errorf("webhook: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	id := ev.ID()
	ts := s.cfg.now().Unix()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.cfg.url.String(), bytes.NewReader(body))
	if err != nil {
		return sink.Permanent(fmt.Errorf("webhook: event %s: building request for %s: %w", id, s.where, err))
	}
	for k, vs := range s.cfg.headers {
		req.Header[k] = vs
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	if _, set := s.cfg.headers["User-Agent"]; !set {
		h.Set("User-Agent", DefaultUserAgent)
	}
	if tp := ferry.DeliveryTraceParent(ctx, ev); tp != "" {
		h.Set("Traceparent", tp) // W3C Trace Context: the delivery's span, when tracing is on
	}
	h.Set("Webhook-Id", id)
	h.Set("Webhook-Timestamp", strconv.FormatInt(ts, 10))
	h.Set("Webhook-Signature", Sign(s.cfg.key, id, ts, body))
	h.Set("Idempotency-Key", id)
	h.Set("Ferry-Epoch", strconv.FormatInt(ev.Epoch, 10))
	if s.cfg.stream != "" {
		h.Set("Ferry-Stream", s.cfg.stream)
	}
	if op := ev.OperationType; op != "" && validHeaderValue(op) {
		h.Set("Ferry-Operation", op)
	}
	if ns := ev.Namespace.String(); ns != "" && validHeaderValue(ns) {
		h.Set("Ferry-Namespace", ns)
	}

	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the full URL
		}
		if ctx.Err() == nil && rctx.Err() != nil {
			err = fmt.Errorf("timed out after %s: %w", s.cfg.timeout, err)
		}
		return sink.Retryable(&connError{fmt.Errorf("webhook: event %s: POST %s: %w", id, s.where, err)})
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	snippet := make([]byte, 200)
	n, _ := io.ReadFull(resp.Body, snippet)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	se := &StatusError{StatusCode: resp.StatusCode, Snippet: printable(snippet[:n])}
	err = fmt.Errorf("webhook: event %s: POST %s: %w", id, s.where, se)
	switch code := resp.StatusCode; {
	case code == http.StatusServiceUnavailable && strings.EqualFold(resp.Header.Get("Ferry-Retry"), "in-progress"):
		err = &inProgress{err}
		if d, ok := s.retryAfter(resp.Header.Get("Retry-After")); ok {
			return sink.RetryAfter(err, d)
		}
		return sink.RetryAfter(err, time.Second)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := s.retryAfter(resp.Header.Get("Retry-After")); ok {
			return sink.RetryAfter(err, d)
		}
		return sink.Retryable(err)
	case code == http.StatusRequestTimeout || code >= 500:
		return sink.Retryable(err)
	default:
		return sink.Permanent(err)
	}
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date,
// capped by MaxRetryAfter.
func (s *Sink) retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(s.cfg.maxRetryAft/time.Second)+1)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(s.cfg.now())
		if d <= 0 {
			return 0, false
		}
	} else {
		d = s.cfg.maxRetryAft // unparsable: be conservative
	}
	return min(d, s.cfg.maxRetryAft), true
}

// printable keeps a response snippet readable in an error message.
func printable(b []byte) string {
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1] // cut a rune split by the 200-byte limit
	}
	return strings.TrimSpace(string(b))
}

// Sign returns the Standard Webhooks signature header value for one
// message: "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
