package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/webhook"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var testNow = time.Unix(1750000000, 0)

// action is a scripted answer to one request.
type action func(w http.ResponseWriter, r *http.Request, body []byte)

// receiver is an HTTP receiver that verifies every request the way a
// Standard Webhooks consumer does (its own code, not the sink's), records
// what it accepted, and fails in scripted ways.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	got    []sinktest.Delivery // answered 2xx
	seen   []sinktest.Delivery // body fully read, whatever the answer
	faults map[string]sinktest.Fault
	script []action // answers for the next requests, in order
	conns  int      // connections opened
	bad    []string // verification failures
	opts   []webhook.Option
	// reject, if set, answers 400 to bodies it reports true for.
	reject func(body []byte) bool
	// changed is signalled (without blocking) after every request.
	changed chan struct{}
}

func newReceiver(t *testing.T, opts ...webhook.Option) *receiver {
	r := &receiver{t: t, faults: map[string]sinktest.Fault{}, opts: opts, changed: make(chan struct{}, 1)}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
		}
	}
	r.srv.Start()
	t.Cleanup(func() {
		r.srv.CloseClientConnections()
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range r.bad {
			t.Errorf("receiver: %s", b)
		}
	})
	return r
}

// verify checks a request's signature with an independent implementation
// of the Standard Webhooks verification.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, tsText, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return fmt.Errorf("missing webhook headers")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("bad timestamp %q", tsText)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %d outside tolerance", ts)
	}
	mac := hmac.New(sha256.New, key)
	io.WriteString(mac, id+"."+tsText+".")
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		ver, b64, ok := strings.Cut(s, ",")
		if !ok || ver != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no valid signature in %q", sigs)
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	d := sinktest.Delivery{EventID: req.Header.Get("webhook-id"), IdempotencyKey: req.Header.Get("Idempotency-Key"), Body: body}
	d.Epoch, _ = strconv.ParseInt(req.Header.Get("Ferry-Epoch"), 10, 64)
	r.mu.Lock()
	if err := verify(testSecret, req.Header, body, testNow); err != nil {
		r.bad = append(r.bad, err.Error())
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" || req.Method != http.MethodPost {
		r.bad = append(r.bad, fmt.Sprintf("%s with Content-Type %q", req.Method, ct))
	}
	r.seen = append(r.seen, d)
	var act action
	if len(r.script) > 0 {
		act, r.script = r.script[0], r.script[1:]
	}
	fault := r.faults[d.EventID]
	if r.reject != nil && r.reject(body) {
		fault = sinktest.FaultPermanent
	}
	defer func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}()
	if act == nil && fault == 0 {
		r.got = append(r.got, d)
	}
	r.mu.Unlock()
	switch {
	case act != nil:
		act(w, req, body)
	case fault == sinktest.FaultRetryable:
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case fault == sinktest.FaultPermanent:
		http.Error(w, "injected rejection", http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (r *receiver) then(acts ...action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = append(r.script, acts...)
}

func (r *receiver) Received() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sinktest.Delivery(nil), r.got...)
}

func (r *receiver) Seen() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sinktest.Delivery(nil), r.seen...)
}

func (r *receiver) Conns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

func (r *receiver) Fail(id string, f sinktest.Fault) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[id] = f
	return true
}

func (r *receiver) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.faults)
}

func (r *receiver) NewSink(t *testing.T) sink.Sink { return r.newSink(t) }

func (r *receiver) newSink(t *testing.T, extra ...webhook.Option) *webhook.Sink {
	t.Helper()
	opts := append([]webhook.Option{webhook.Secret(testSecret), webhook.WithClock(func() time.Time { return testNow })}, r.opts...)
	s, err := webhook.New(r.srv.URL+"/hook", append(opts, extra...)...)
	if err != nil {
		t.Fatalf("webhook.New: %v", err)
	}
	return s
}

// Scripted answers.

func status(code int, header ...string) action {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, "scripted "+strconv.Itoa(code))
	}
}

// hang answers only after the client gave up.
func hang() action {
	return func(_ http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }
}

// drop closes the connection after reading the whole body, without an
// answer: the receiver may have applied the event.
func drop() action {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
}
