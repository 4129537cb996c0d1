package cli

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// otlpSpan is a span as an OTLP/HTTP collector received it.
type otlpSpan struct {
	trace, id, parent, name string
	attrs                   map[string]string
	service                 string
	text                    string // everything the span says, for the secrets checks
}

// otlpReceiver is an in-process OTLP/HTTP trace collector: it decodes
// what POST /v1/traces receives (protobuf, gzip or not).
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	posts int
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.posts++
		for _, rs := range msg.ResourceSpans {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := otlpSpan{trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
						parent: hex.EncodeToString(s.ParentSpanId), name: s.Name, attrs: map[string]string{}, service: service}
					sp.text = s.Name + " " + s.GetStatus().GetMessage()
					for _, a := range s.Attributes {
						v := anyValue(a.Value)
						sp.attrs[a.Key] = v
						sp.text += " " + a.Key + "=" + v
					}
					for _, e := range s.Events {
						sp.text += " " + e.Name
						for _, a := range e.Attributes {
							sp.text += " " + a.Key + "=" + anyValue(a.Value)
						}
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return fmt.Sprint(v)
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

func (r *otlpReceiver) named(prefix string) []otlpSpan {
	var out []otlpSpan
	for _, s := range r.all() {
		if strings.HasPrefix(s.name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// hookReceiver is a webhook receiver recording each 2xx delivery's
// webhook-id, document and traceparent.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []hookDelivery
	fail func(doc string) int
}

type hookDelivery struct{ id, doc, traceParent string }

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		doc := ""
		if m := docIDPattern.FindSubmatch(body); m != nil {
			doc = string(m[1])
		}
		r.mu.Lock()
		code := http.StatusOK
		if r.fail != nil {
			code = r.fail(doc)
		}
		if code < 300 {
			r.got = append(r.got, hookDelivery{id: req.Header.Get("Webhook-Id"), doc: doc, traceParent: req.Header.Get("Traceparent")})
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) deliveries() []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookDelivery(nil), r.got...)
}

// tracedYAML is one stream, orders (1 partition), idempotent to the
// webhook at url, logging at debug (a line per applied event).
func tracedYAML(uri, url, extra string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: debug}
state: {uri: %[1]q}
%[4]s
streams:
  - name: orders
    source: {uri: %[1]q, scope: {collection: shop.orders}}
    group: {partitions: 1, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: idempotent}
    sink: {webhook: {url: %[2]q, secret: %[3]q}}
`, uri, url, procSecret, extra)
}

// TestTracingEndToEnd runs `ferry run` as a process with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at an in-process OTLP/HTTP
// collector. Five documents written one at a time are five deliveries:
// the collector receives five traces, each a read span and the deliver
// span under it with the delivery's attributes; the webhook receiver gets
// each delivery with a traceparent naming that trace and that deliver
// span; every log line of a delivery carries its short event id and
// trace id; no id is a metric label.
func TestTracingEndToEnd(t *testing.T) {
	e := newProcEnv(t)
	otlp := newOTLPReceiver(t)
	hook := newHookReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: export soon
	t.Setenv("OTEL_SERVICE_NAME", "ferry-e2e")
	cfg := writeFile(t, tracedYAML(e.srv.URI(), hook.srv.URL+"/hook", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 1)
	const n = 5
	for i := range n {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
		poll.Until(t, 20*time.Second, func() error {
			if got := len(hook.deliveries()); got != i+1 {
				return fmt.Errorf("%d deliveries, want %d", got, i+1)
			}
			return nil
		})
	}
	poll.Until(t, 20*time.Second, func() error {
		if got := len(otlp.named("deliver ")); got < n {
			return fmt.Errorf("the collector received %d deliver spans, want every delivery's (%d)", got, n)
		}
		return nil
	})
	metricsBody := func() string { _, b := m.get("/metrics"); return b }()
	m.stop(syscall.SIGTERM) // flushes the rest

	spans := otlp.all()
	byID := map[string]otlpSpan{}
	traces := map[string][]otlpSpan{}
	for _, s := range spans {
		byID[s.id] = s
		traces[s.trace] = append(traces[s.trace], s)
		if s.service != "ferry-e2e" {
			t.Errorf("span %s: service.name %q", s.name, s.service)
		}
	}
	deliveries := hook.deliveries()
	if len(deliveries) != n {
		t.Fatalf("%d webhook deliveries, want %d", len(deliveries), n)
	}
	seenTraces := map[string]bool{}
	for _, d := range deliveries {
		if !ferry.ValidTraceParent(d.traceParent) {
			t.Errorf("delivery of %s: traceparent %q", d.doc, d.traceParent)
			continue
		}
		traceID, spanID := d.traceParent[3:35], d.traceParent[36:52]
		seenTraces[traceID] = true
		del, ok := byID[spanID]
		if !ok || del.trace != traceID || !strings.HasPrefix(del.name, "deliver ") {
			t.Errorf("delivery of %s: its traceparent's span %s is no deliver span the collector received (%+v)", d.doc, spanID, del)
			continue
		}
		want := map[string]string{"ferry.stream": "orders", "ferry.partition": "0", "ferry.operation": "insert",
			"ferry.namespace": "shop.orders", "ferry.event_id": d.id[:16], "ferry.attempt": "1", "ferry.result": "applied"}
		for k, v := range want {
			if del.attrs[k] != v {
				t.Errorf("deliver span of %s: %s = %q, want %q", d.doc, k, del.attrs[k], v)
			}
		}
		read, ok := byID[del.parent]
		if !ok || !strings.HasPrefix(read.name, "read ") || read.trace != traceID || read.parent != "" || read.attrs["ferry.batch.events"] != "1" {
			t.Errorf("delivery of %s: the deliver span's parent is not its read batch's span: %+v", d.doc, read)
		}
		// One trace per delivery: its read span and its deliver span.
		if got := traces[traceID]; len(got) != 2 {
			t.Errorf("the trace of %s holds %d spans, want 2 (read, deliver)", d.doc, len(got))
		}
	}
	if len(seenTraces) != n {
		t.Errorf("%d distinct traces for %d deliveries", len(seenTraces), n)
	}
	if got := len(otlp.named("deliver ")); got != n {
		t.Errorf("%d deliver spans, want %d", got, n)
	}

	// Logs: each delivery's line carries its short event id and trace id.
	traceOf := map[string]string{}
	for _, d := range deliveries {
		traceOf[d.id[:16]] = d.traceParent[3:35]
	}
	applied := 0
	for _, line := range m.logLines() {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		ev, ok := rec["event"].(string)
		if !ok {
			continue
		}
		if want, known := traceOf[ev]; known && rec["trace"] != want {
			t.Errorf("log line of event %s has trace %v, want %s: %s", ev, rec["trace"], want, line)
		}
		if rec["msg"] == "event applied" {
			applied++
		}
	}
	if applied != n {
		t.Errorf("%d 'event applied' lines, want %d", applied, n)
	}
	// No id is a metric label.
	for _, d := range deliveries {
		for _, id := range []string{d.id[:16], d.traceParent[3:35], d.traceParent[36:52]} {
			if strings.Contains(metricsBody, id) {
				t.Errorf("/metrics holds the id %s", id)
			}
		}
	}
	if !strings.Contains(metricsBody, "ferry_events_total") {
		t.Errorf("/metrics was not read:\n%.300s", metricsBody)
	}
}
