package webhook_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/webhook"
)

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		r := newReceiver(t)
		return r.NewSink(t), r
	})
}

func connected(t *testing.T, s *webhook.Sink) *webhook.Sink {
	t.Helper()
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func write1(s sink.Sink, ev *ferry.Event) error {
	return sink.Errors(s.Write(context.Background(), []*ferry.Event{ev}), 1)[0]
}

// The test vector published with the Standard Webhooks reference libraries.
func TestSignReferenceVector(t *testing.T) {
	key, err := webhook.DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

// The values hard-coded in receivers/node/test/gofixture.test.js: the Node
// receiver library must accept exactly what this sink sends.
const (
	nodeSecret    = "whsec_ZmVycnktbm9kZS1yZWNlaXZlci1maXh0dXJlLWtleSE="
	nodeTimestamp = 1700000000
	nodeID        = "a61261dd1ddfa054f1e69b60c20b8dbdad835223363bf61454bd630b77d6e413"
	nodeSignature = "v1,MnMknB+urghTWwmse7Hh/SnQqGs4amu1an0Sc6m0H6I="
	nodeBody      = `{"_id":{"_data":"8266A0F3C2000000012B042C0100296E5A10047F3A9C1E2B4D46A1B0C5D9E8F7A6B5C446645F6964"},"operationType":"update","clusterTime":{"$timestamp":{"t":1730000001,"i":1}},"wallTime":{"$date":"2024-10-27T03:33:21Z"},"ns":{"db":"shop","coll":"orders"},"documentKey":{"_id":"a"},"updateDescription":{"updatedFields":{"seq":1},"removedFields":[]},"fullDocument":{"_id":"a","seq":1,"note":"café \"quoted\" <b>&</b>\n","total":{"$numberDecimal":"19.99"}}}`
)

func TestNodeReceiverFixture(t *testing.T) {
	var gotHeader http.Header
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Clone()
		gotBody, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	s, err := webhook.New(srv.URL, webhook.Secret(nodeSecret), webhook.WithClock(func() time.Time { return time.Unix(nodeTimestamp, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	connected(t, s)
	ev := sinktest.NewEvent(1, "a", 5)
	if err := write1(s, ev); err != nil {
		t.Fatal(err)
	}
	t.Logf("id=%s\nsignature=%s\nbody=%s", gotHeader.Get("webhook-id"), gotHeader.Get("webhook-signature"), gotBody)
	if got := gotHeader.Get("webhook-id"); got != nodeID {
		t.Errorf("webhook-id = %q, want %q", got, nodeID)
	}
	if got := gotHeader.Get("webhook-signature"); got != nodeSignature {
		t.Errorf("webhook-signature = %q, want %q", got, nodeSignature)
	}
	if string(gotBody) != nodeBody {
		t.Errorf("body = %s, want %s", gotBody, nodeBody)
	}
}

func TestFailureClasses(t *testing.T) {
	retryAt := testNow.Add(30 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name      string
		act       action
		opts      []webhook.Option
		retryable bool
		delay     time.Duration
		msg       string
	}{
		{"500", status(500), nil, true, 0, "500 Internal Server Error"},
		{"502", status(502), nil, true, 0, "502"},
		{"408", status(408), nil, true, 0, "408"},
		{"429 seconds", status(429, "Retry-After", "7"), nil, true, 7 * time.Second, "429"},
		{"429 no Retry-After", status(429), nil, true, 0, "429"},
		{"503 http date", status(503, "Retry-After", retryAt), nil, true, 30 * time.Second, "503"},
		{"429 capped", status(429, "Retry-After", "3600"), []webhook.Option{webhook.MaxRetryAfter(2 * time.Second)}, true, 2 * time.Second, "429"},
		{"400", status(400), nil, false, 0, `400 Bad Request: "scripted 400"`},
		{"404", status(404), nil, false, 0, "404"},
		{"redirect not followed", status(307, "Location", "/elsewhere"), nil, false, 0, "307"},
		{"timeout", hang(), []webhook.Option{webhook.Timeout(100 * time.Millisecond)}, true, 0, "timed out after 100ms"},
		{"dropped after body", drop(), nil, true, 0, "POST http://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t)
			s := connected(t, r.newSink(t, c.opts...))
			ev := sinktest.NewEvent(1, "a", 9)
			r.then(c.act)
			err := write1(s, ev)
			if err == nil {
				t.Fatalf("Write succeeded, want a failure")
			}
			if sink.IsRetryable(err) != c.retryable {
				t.Errorf("retryable = %v, want %v (%v)", sink.IsRetryable(err), c.retryable, err)
			}
			d, ok := sink.RetryDelay(err)
			if d != c.delay || ok != (c.delay > 0) {
				t.Errorf("RetryDelay = %v, %v; want %v", d, ok, c.delay)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), ev.ID()) {
				t.Errorf("error %q does not say %q and the event id", err, c.msg)
			}
			if len(r.Seen()) != 1 || len(r.Received()) != 0 {
				t.Fatalf("receiver saw %d requests and accepted %d; want 1 and 0", len(r.Seen()), len(r.Received()))
			}
			// The retry is the same delivery: same id, key, epoch, body.
			if err := write1(s, ev); err != nil {
				t.Fatalf("retry: %v", err)
			}
			seen := r.Seen()
			if len(seen) != 2 || seen[1].IdempotencyKey != seen[0].IdempotencyKey || string(seen[1].Body) != string(seen[0].Body) ||
				seen[1].Epoch != 9 || seen[1].IdempotencyKey != ev.ID() {
				t.Errorf("retry differs from the first attempt: %+v", seen)
			}
		})
	}
}

func TestHandlerClasses(t *testing.T) {
	r := newReceiver(t)
	s := connected(t, r.newSink(t))
	h := sink.Handler(s)
	ev := sinktest.NewEvent(1, "a", 1)
	r.then(status(400))
	if err := h(context.Background(), ev); !errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler on 400 = %v, want ferry.Permanent", err)
	}
	r.then(status(500))
	if err := h(context.Background(), ev); err == nil || errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler on 500 = %v, want a plain retryable error", err)
	}
	// 429 Retry-After: the handler waits, within its context.
	r.then(status(429, "Retry-After", "60"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h(ctx, ev)
	if err == nil || errors.Is(err, ferry.ErrPermanent) || time.Since(start) < 50*time.Millisecond {
		t.Errorf("Handler on 429 = %v after %v, want a retryable error after waiting for the context", err, time.Since(start))
	}
	if err := h(context.Background(), ev); err != nil {
		t.Errorf("Handler after the faults: %v", err)
	}
}

func TestOverloadStopsBatch(t *testing.T) {
	for _, act := range []action{status(429, "Retry-After", "1"), status(503), drop()} {
		r := newReceiver(t)
		s := connected(t, r.newSink(t))
		evs := []*ferry.Event{sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1), sinktest.NewEvent(3, "c", 1)}
		r.then(act)
		errs := sink.Errors(s.Write(context.Background(), evs), 3)
		for i, err := range errs {
			if !sink.IsRetryable(err) {
				t.Errorf("event %d: %v, want retryable failure", i, err)
			}
		}
		if n := len(r.Seen()); n != 1 {
			t.Errorf("receiver saw %d requests, want 1: the batch stops when the receiver is overloaded or gone", n)
		}
	}
}

func TestConnectionReuse(t *testing.T) {
	r := newReceiver(t)
	s := connected(t, r.newSink(t))
	for i := range 20 {
		if i%4 == 0 {
			r.then(status(500)) // error bodies are drained too
		}
		_ = write1(s, sinktest.NewEvent(i, "a", 1))
	}
	if n := len(r.Seen()); n != 20 {
		t.Fatalf("receiver saw %d requests, want 20", n)
	}
	if n := r.Conns(); n != 1 {
		t.Errorf("%d connections for 20 sequential requests, want 1 (keep-alive)", n)
	}
}

// TestConnectionsPerLane: the lanes of four partitions (32 writers)
// keep their connections alive with the default options, even when they
// all go idle at once between bursts (as lanes waiting for the reader do):
// the sink keeps an idle connection for every one of them, so each lane
// dials about once. (With 16 idle connections, the default before, half
// the connections were closed at every pause and dialled again: over 500
// dials here, as the issue measured 950 per 20,000 requests.)
func TestConnectionsPerLane(t *testing.T) {
	const lanes, each = 32, 40
	r := newReceiver(t)
	s := connected(t, r.newSink(t))
	for i := range each {
		// One burst: every lane posts once; then all are idle.
		var wg sync.WaitGroup
		for l := range lanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := write1(s, sinktest.NewEvent(i*lanes+l, "a", 1)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if n := len(r.Seen()); n != lanes*each {
		t.Fatalf("receiver saw %d requests, want %d", n, lanes*each)
	}
	// A dial may race a connection coming back idle: allow one spare per
	// lane, far below the hundreds a pool smaller than the lanes dials.
	if n := r.Conns(); n > 2*lanes {
		t.Errorf("%d connections for %d requests from %d concurrent writers, want at most %d", n, lanes*each, lanes, 2*lanes)
	}
	t.Logf("%d connections for %d requests from %d concurrent writers", r.Conns(), lanes*each, lanes)
}

func TestErrorsHideSecrets(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens any more: connection refused
	s, err := webhook.New("http://alice:hunter2@"+addr+"/hook?token=sekrit", webhook.Secret(testSecret),
		webhook.Header("Authorization", "Bearer gateway-token"))
	if err != nil {
		t.Fatal(err)
	}
	connected(t, s)
	err = write1(s, sinktest.NewEvent(1, "a", 1))
	if err == nil || !sink.IsRetryable(err) {
		t.Fatalf("Write to a closed port = %v, want a retryable error", err)
	}
	for _, secret := range []string{"hunter2", "alice", "sekrit", "gateway-token", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "fullDocument"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q reveals %q", err, secret)
		}
	}
	if !strings.Contains(err.Error(), "http://"+addr+"/hook") {
		t.Errorf("error %q does not say where it posted", err)
	}
}

func TestCanonicalAndHeaders(t *testing.T) {
	var got http.Header
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b := new(strings.Builder)
		_, _ = io.Copy(b, r.Body)
		body = b.String()
	}))
	defer srv.Close()
	s, err := webhook.New(srv.URL, webhook.Secret(testSecret), webhook.Canonical(), webhook.Header("X-Team", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	connected(t, s)
	if err := write1(s, sinktest.NewEvent(3, "a", 1)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"seq":{"$numberInt":"3"}`) {
		t.Errorf("canonical body lacks $numberInt: %s", body)
	}
	if got.Get("X-Team") != "orders" || got.Get("Ferry-Epoch") != "1" {
		t.Errorf("headers = %v", got)
	}
}

// TestUserAgent checks that the sink sends ferry-webhook/1 by default and
// a User-Agent set with Header instead, and that a tab in a value is fine.
func TestUserAgent(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	for _, c := range []struct {
		opts []webhook.Option
		want string
	}{
		{nil, webhook.DefaultUserAgent},
		{[]webhook.Option{webhook.Header("user-agent", "acme-gateway/2\t(ferry)")}, "acme-gateway/2\t(ferry)"},
	} {
		s, err := webhook.New(srv.URL, append(c.opts, webhook.Secret(testSecret))...)
		if err != nil {
			t.Fatal(err)
		}
		connected(t, s)
		if err := write1(s, sinktest.NewEvent(1, "a", 1)); err != nil {
			t.Fatal(err)
		}
		if ua := got.Values("User-Agent"); len(ua) != 1 || ua[0] != c.want {
			t.Errorf("User-Agent = %q, want [%q]", ua, c.want)
		}
	}
	if webhook.DefaultUserAgent != "ferry-webhook/1" {
		t.Errorf("DefaultUserAgent = %q", webhook.DefaultUserAgent)
	}
}

func TestOptionErrors(t *testing.T) {
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("too short"))
	cases := []struct {
		url  string
		opts []webhook.Option
		want string
	}{
		{"ftp://example.com", []webhook.Option{webhook.Secret(testSecret)}, "url: must be an absolute http(s) URL"},
		{"/relative", []webhook.Option{webhook.Secret(testSecret)}, "url:"},
		{"http://example.com", nil, "Secret: required: the shared signing secret"},
		{"http://example.com", []webhook.Option{webhook.Secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}, `Secret: does not start with "whsec_"`},
		{"http://example.com", []webhook.Option{webhook.Secret("whsec_!!!notbase64")}, "Secret: the part after"},
		{"http://example.com", []webhook.Option{webhook.Secret(short)}, "Secret: encodes 9 bytes"},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Timeout(0)}, "Timeout: must be positive"},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.MaxRetryAfter(-time.Second)}, "MaxRetryAfter: must be positive"},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.MaxIdleConns(0)}, "MaxIdleConns: must be at least 1"},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("webhook-signature", "x")}, `Header("webhook-signature"): is set by the webhook sink`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("X-A", "a\r\nb")}, `Header("X-A"): the value must not contain line breaks`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("X-A", "a\x00b")}, `Header("X-A"): the value must not contain line breaks or other control characters`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("X-A", "a\x7fb")}, `Header("X-A"): the value must not contain line breaks or other control characters`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("ferry-epoch", "7")}, `Header("ferry-epoch"): is set by the webhook sink`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("IDEMPOTENCY-KEY", "k")}, `Header("IDEMPOTENCY-KEY"): is set by the webhook sink`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("X(A)", "a")}, `Header("X(A)"): is not a valid HTTP header name`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), webhook.Header("", "a")}, `Header(""): is not a valid HTTP header name`},
		{"http://example.com", []webhook.Option{webhook.Secret(testSecret), nil}, "nil option"},
		{"http://example.com:0/x", []webhook.Option{webhook.Secret(testSecret)}, "url: must be an absolute http(s) URL: bad port"},
		{"http://example.com/x#f", []webhook.Option{webhook.Secret(testSecret)}, "url: must be an absolute http(s) URL without a #fragment"},
		// Validated once, every problem named; a later option overrides an
		// earlier one.
		{"ftp://x", []webhook.Option{webhook.Timeout(0), webhook.Timeout(time.Second), webhook.MaxIdleConns(0), webhook.Header("Host", "h")},
			`webhook: invalid option: url: must be an absolute http(s) URL; Secret: required: the shared signing secret, "whsec_" followed by the base64 of 24 to 64 random bytes; ` +
				`generate one with printf 'whsec_%s' "$(head -c 32 /dev/urandom | base64)"; MaxIdleConns: must be at least 1, got 0; ` +
				`Header("Host"): is set by the webhook sink and cannot be overridden`},
	}
	for _, c := range cases {
		_, err := webhook.New(c.url, c.opts...)
		if !errors.Is(err, webhook.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q, ...) = %v, want ErrInvalidOption saying %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") {
			t.Errorf("error %q reveals the secret", err)
		}
	}
}

func TestMalformedEventIsPermanent(t *testing.T) {
	r := newReceiver(t)
	s := connected(t, r.newSink(t))
	for _, raw := range [][]byte{nil, {1, 2, 3}, {5, 0, 0, 0, 1}} {
		ev := sinktest.NewEvent(1, "a", 1)
		ev.Raw = raw
		if err := write1(s, ev); err == nil || sink.IsRetryable(err) {
			t.Errorf("Raw %v: %v, want a permanent error", raw, err)
		}
	}
	if n := len(r.Seen()); n != 0 {
		t.Errorf("%d requests for malformed events", n)
	}
}

// TestBatchLeavesWhatItHasNoTimeFor: Write posts the first event of a
// batch whatever its deadline, but starts no later request the deadline
// leaves less than Timeout for: those events fail with ErrNoTimeLeft,
// retryable and not attempted (ferry tries them next, alone, uncounted).
// With time enough, every event is posted.
func TestBatchLeavesWhatItHasNoTimeFor(t *testing.T) {
	evs := []*ferry.Event{sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1), sinktest.NewEvent(3, "c", 1)}
	r := newReceiver(t)
	s := connected(t, r.newSink(t, webhook.Timeout(2*time.Hour)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	if errs[0] != nil {
		t.Fatalf("first event: %v, want posted", errs[0])
	}
	for i, err := range errs[1:] {
		if !errors.Is(err, webhook.ErrNoTimeLeft) || !errors.Is(err, sink.ErrNotAttempted) || !sink.IsRetryable(err) {
			t.Errorf("event %d: %v, want ErrNoTimeLeft, not attempted and retryable", i+1, err)
		}
	}
	if n := len(r.Seen()); n != 1 {
		t.Fatalf("receiver saw %d requests, want 1", n)
	}
	s2 := connected(t, r.newSink(t, webhook.Timeout(time.Minute)))
	if err := s2.Write(ctx, evs); err != nil {
		t.Fatalf("a batch with time for every request: %v", err)
	}
	if n := len(r.Seen()); n != 4 {
		t.Fatalf("receiver saw %d requests, want 4", n)
	}
}
