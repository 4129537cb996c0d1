package config_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/webhook"
)

// parseStream parses doc and returns its first stream.
func parseStream(t *testing.T, doc string, env func(string) (string, bool)) *config.Stream {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), env)
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Streams[0]
}

// writeOne connects s, writes one event and closes it.
func writeOne(t *testing.T, s sink.Sink, ev *ferry.Event) {
	t.Helper()
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Write(ctx, []*ferry.Event{ev}); err != nil {
		t.Fatal(err)
	}
}

// TestNewSinkStdout: the stdout sink writes where it is told, in the
// configured encoding.
func TestNewSinkStdout(t *testing.T) {
	for enc, want := range map[string]string{"relaxed": `"seq":1`, "canonical": `"seq":{"$numberInt":"1"}`} {
		st := parseStream(t, edit("      webhook:\n        url: https://hooks.example.com/ferry\n        secret: ${HOOK_SECRET}\n",
			"      stdout: {encoding: "+enc+"}\n"), testEnv(nil))
		var buf bytes.Buffer
		s, err := st.NewSink(&buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := sinktest.NewEvent(1, "a", 1)
		writeOne(t, s, ev)
		if line := buf.String(); !strings.Contains(line, `"id":"`+ev.ID()+`"`) || !strings.Contains(line, want) {
			t.Errorf("%s: line %s, want the event id and %s", enc, line, want)
		}
	}
}

// TestNewSinkWebhook: URL, secret, timeout, headers and encoding reach the
// webhook sink: a request arrives at the URL with the configured header,
// signed with the configured secret, in the configured encoding.
func TestNewSinkWebhook(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, body = r, b
		mu.Unlock()
	}))
	defer srv.Close()
	doc := edit("        url: https://hooks.example.com/ferry\n", "        url: "+srv.URL+"/hook\n        headers: {x-team: orders}\n        encoding: relaxed\n")
	st := parseStream(t, doc, testEnv(nil))
	s, err := st.NewSink(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*webhook.Sink); !ok {
		t.Fatalf("NewSink = %T, want *webhook.Sink", s)
	}
	ev := sinktest.NewEvent(1, "a", 1)
	writeOne(t, s, ev)
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		t.Fatal("no request arrived")
	}
	if got.URL.Path != "/hook" || got.Header.Get("X-Team") != "orders" {
		t.Errorf("request %s with X-Team %q, want /hook with orders", got.URL.Path, got.Header.Get("X-Team"))
	}
	key, err := webhook.DecodeSecret(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := strconv.ParseInt(got.Header.Get("Webhook-Timestamp"), 10, 64)
	if want := webhook.Sign(key, got.Header.Get("Webhook-Id"), ts, body); got.Header.Get("Webhook-Signature") != want {
		t.Errorf("signature %q, want %q (the configured secret)", got.Header.Get("Webhook-Signature"), want)
	}
	if !bytes.Contains(body, []byte(`"seq":1`)) {
		t.Errorf("body %s is not relaxed Extended JSON", body)
	}
}

// TestNewSinkBrokers: the broker sinks are built from their sections
// (their connections are exercised by package cli's tests).
func TestNewSinkBrokers(t *testing.T) {
	k, err := parseStream(t, kafkaSinkConfig, kafkaEnv()).NewSink(io.Discard, nil)
	if _, ok := k.(*kafka.Sink); !ok || err != nil {
		t.Errorf("kafka: NewSink = %T, %v", k, err)
	}
	n, err := parseStream(t, natsConfig, testEnv(nil)).NewSink(io.Discard, nil)
	if _, ok := n.(*natsjs.Sink); !ok || err != nil {
		t.Errorf("nats: NewSink = %T, %v", n, err)
	}
	p, err := parseStream(t, pubsubSinkConfig, testEnv(nil)).NewSink(io.Discard, nil)
	if ps, ok := p.(*pubsub.Sink); !ok || err != nil || ps.Topic() != "projects/ferry-prod/topics/ferry-orders" {
		t.Errorf("pubsub: NewSink = %T, %v", p, err)
	}
}

// TestNewSinkMongoDB: the projection is written in the state store's
// cluster, to the configured collection; without a state store there is
// no sink.
func TestNewSinkMongoDB(t *testing.T) {
	st := parseStream(t, mongoSinkConfig, testEnv(nil))
	if _, err := st.NewSink(io.Discard, nil); err == nil || !strings.Contains(err.Error(), "needs a MongoDB state store") {
		t.Errorf("NewSink without a state store = %v", err)
	}
	state := client(t).Database("ferry")
	s, err := st.NewSink(io.Discard, state)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := s.(*mongoproj.Sink)
	if !ok {
		t.Fatalf("NewSink = %T, want *mongoproj.Sink", s)
	}
	if tg := m.Target(); tg.Database().Name() != st.Sink.MongoDB.Database || tg.Name() != st.Sink.MongoDB.Collection ||
		tg.Database().Client() != state.Client() {
		t.Errorf("target %s.%s, want %s.%s with the state store's client", tg.Database().Name(), tg.Name(),
			st.Sink.MongoDB.Database, st.Sink.MongoDB.Collection)
	}
	if _, err := (&config.Stream{Name: "x"}).NewSink(io.Discard, state); err == nil || !strings.Contains(err.Error(), "has no sink") {
		t.Errorf("NewSink of a stream without a sink = %v", err)
	}
}

// TestKafkaSASLMechanisms: each configured mechanism maps onto its SASL
// mechanism; an unknown one is an error that shows no password.
func TestKafkaSASLMechanisms(t *testing.T) {
	for mech, name := range map[string]string{
		config.KafkaSASLPlain: "PLAIN", config.KafkaSASLScramSHA256: "SCRAM-SHA-256", config.KafkaSASLScramSHA512: "SCRAM-SHA-512",
	} {
		m, err := (&config.KafkaSASL{Mechanism: mech, User: "ferry", Password: config.Secret(kafkaPassword)}).SASL()
		if err != nil || m.Name() != name {
			t.Errorf("%s: SASL() = %v, %v; want %s", mech, m, err, name)
		}
	}
	_, err := (&config.KafkaSASL{Mechanism: "gssapi", User: "ferry", Password: config.Secret(kafkaPassword)}).SASL()
	if err == nil || strings.Contains(err.Error(), kafkaPassword) || !strings.Contains(err.Error(), `"gssapi"`) {
		t.Errorf("SASL() of an unknown mechanism = %v", err)
	}
}

// TestNewSinkWebhookKeepsAConnectionPerLane: the webhook sink of a stream
// keeps an idle connection for every lane that may post through it in
// one process (every partition's, ferry.DefaultConcurrency each): 16
// partitions' 128 lanes, all pausing together between bursts, dial about
// once each. (With the sink's fixed default, 64, half of them dial again
// after every pause: over 300 dials here.)
func TestNewSinkWebhookKeepsAConnectionPerLane(t *testing.T) {
	const partitions, bursts = 16, 5
	lanes := partitions * ferry.DefaultConcurrency
	var mu sync.Mutex
	dials := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			dials++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	doc := edit("        url: https://hooks.example.com/ferry\n", "        url: "+srv.URL+"/hook\n")
	doc = strings.Replace(doc, "    sink:", "    group: {partitions: "+strconv.Itoa(partitions)+"}\n    sink:", 1)
	s, err := parseStream(t, doc, testEnv(nil)).NewSink(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for b := range bursts {
		var wg sync.WaitGroup
		for l := range lanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Write(ctx, []*ferry.Event{sinktest.NewEvent(b*lanes+l, "a", 1)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	// A dial may race a connection coming back idle: allow a spare for
	// half the lanes.
	if limit := lanes + lanes/2; dials > limit {
		t.Errorf("%d dials for %d requests from %d lanes, want at most %d", dials, bursts*lanes, lanes, limit)
	}
	t.Logf("%d dials for %d requests from %d lanes", dials, bursts*lanes, lanes)
}
