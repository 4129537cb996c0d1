package ferryotel_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	ferryotel "github.com/ferry-io/ferry/otel"
)

// handled is what one handler call saw.
type handled struct {
	doc         string
	traceParent string
	span        trace.SpanContext
}

const docSecret = "hunter2-in-the-document"

// TestSpansOfAConsumer runs a consumer against the emulator with the
// tracer and the SDK's in-memory exporter: every handler call is a deliver
// span whose parent is the read span of its batch, the handler's context
// carries that span and its traceparent, the attributes say stream,
// partition, operation, namespace, short event id, attempt and result,
// and neither a resume token nor anything of the documents is in a span.
func TestSpansOfAConsumer(t *testing.T) {
	client, _ := emutest.Client(t)
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	var mu sync.Mutex
	var calls []handled
	tries := map[string]int{}
	events := map[string]*ferry.Event{} // short event id → event
	h := func(ctx context.Context, ev *ferry.Event) error {
		doc := ev.DocumentKey.Lookup("_id").StringValue()
		mu.Lock()
		calls = append(calls, handled{doc: doc, traceParent: ferry.TraceParent(ctx), span: trace.SpanContextFromContext(ctx)})
		tries[doc]++
		n := tries[doc]
		events[ev.ID()[:16]] = ev
		mu.Unlock()
		switch {
		case doc == "flaky" && n == 1:
			return errors.New("receiver hiccup")
		case doc == "bad":
			return ferry.Permanent(errors.New("receiver refused it"))
		}
		return nil
	}
	c, err := ferry.NewConsumer(client, h, ferry.Stream("orders"), ferry.WatchCollection("shop", "orders"),
		ferry.Checkpoints(store), ferry.DeadLetters(deadletter.NewMongo(client.Database("state"), "dlq")),
		ferry.CommitEvery(1, 20*time.Millisecond), ferry.MaxAwaitTime(50*time.Millisecond),
		ferry.Retry(3, time.Millisecond, 5*time.Millisecond), ferry.WithHooks(ferryotel.New(ferryotel.TracerProvider(tp))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	poll.Until(t, 20*time.Second, func() error {
		if cp, err := store.Load(context.Background(), "orders", 0); err != nil || cp.Token == nil {
			return fmt.Errorf("the consumer did not start: no checkpoint with a token (%v)", err)
		}
		return nil
	})
	coll := client.Database("shop").Collection("orders")
	for _, id := range []string{"a", "flaky", "bad", "b"} {
		if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "password", Value: docSecret}}); err != nil {
			t.Fatal(err)
		}
	}
	wantCalls := 5 // a, flaky twice, bad, b
	poll.Until(t, 20*time.Second, func() error {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		var deliver int
		for _, s := range exp.GetSpans() {
			if strings.HasPrefix(s.Name, "deliver ") {
				deliver++
			}
		}
		if n < wantCalls || deliver < wantCalls {
			return fmt.Errorf("%d handler calls and %d deliver spans, want %d", n, deliver, wantCalls)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	reads := map[trace.SpanID]tracetest.SpanStub{}
	var readEvents int64
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "read ") {
			reads[s.SpanContext.SpanID()] = s
			readEvents += attr(s, ferryotel.AttrBatchEvents).AsInt64()
			if s.SpanKind != trace.SpanKindConsumer || attr(s, ferryotel.AttrStream).AsString() != "orders" || s.Parent.IsValid() {
				t.Errorf("read span %s: kind %v, stream %v, parent %v", s.Name, s.SpanKind, attr(s, ferryotel.AttrStream), s.Parent)
			}
		}
	}
	if readEvents != 4 {
		t.Errorf("read spans hold %d events, want 4", readEvents)
	}
	mu.Lock()
	defer mu.Unlock()
	results := map[string][]string{}
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "deliver ") {
			continue
		}
		read, ok := reads[s.Parent.SpanID()]
		if !ok || s.Parent.TraceID() != read.SpanContext.TraceID() || s.SpanContext.TraceID() != read.SpanContext.TraceID() {
			t.Errorf("deliver span %s is not the child of a read span (parent %v)", s.SpanContext.SpanID(), s.Parent)
		}
		if s.SpanKind != trace.SpanKindProducer {
			t.Errorf("deliver span kind %v", s.SpanKind)
		}
		short := attr(s, ferryotel.AttrEventID).AsString()
		ev := events[short]
		if len(short) != 16 || ev == nil {
			t.Fatalf("deliver span event id %q is not a handled event's short id", short)
		}
		doc := ev.DocumentKey.Lookup("_id").StringValue()
		if attr(s, ferryotel.AttrOperation).AsString() != "insert" || attr(s, ferryotel.AttrNamespace).AsString() != "shop.orders" ||
			attr(s, ferryotel.AttrPartition).AsInt64() != 0 || attr(s, ferryotel.AttrStream).AsString() != "orders" {
			t.Errorf("deliver span attributes %v", s.Attributes)
		}
		result := attr(s, ferryotel.AttrResult).AsString()
		results[doc] = append(results[doc], fmt.Sprintf("%d:%s", attr(s, ferryotel.AttrAttempt).AsInt64(), result))
		if (result == "applied") != (s.Status.Code != codes.Error) {
			t.Errorf("%s attempt: result %s, status %v", doc, result, s.Status)
		}
		// The handler got this span and its traceparent.
		wantTP := fmt.Sprintf("00-%s-%s-01", s.SpanContext.TraceID(), s.SpanContext.SpanID())
		var found bool
		for _, c := range calls {
			if c.traceParent == wantTP && c.span.SpanID() == s.SpanContext.SpanID() {
				found = true
			}
		}
		if !found {
			t.Errorf("no handler call got the span %s and its traceparent %s", s.SpanContext.SpanID(), wantTP)
		}
	}
	want := map[string]string{"a": "[1:applied]", "flaky": "[1:retried 2:applied]", "bad": "[1:dead-lettered]", "b": "[1:applied]"}
	for doc, w := range want {
		if got := fmt.Sprint(results[doc]); got != w {
			t.Errorf("%s: deliveries %s, want %s", doc, got, w)
		}
	}

	// Nothing of a token or a document in any span.
	var forbidden []string
	for _, ev := range events {
		data := ev.Token.Lookup("_data").StringValue()
		forbidden = append(forbidden, data, data[:24], ev.ID())
	}
	forbidden = append(forbidden, docSecret, "password")
	for _, s := range spans {
		text := s.Name + " " + s.Status.Description
		for _, a := range s.Attributes {
			text += " " + string(a.Key) + "=" + a.Value.Emit()
		}
		for _, e := range s.Events {
			text += " " + e.Name
			for _, a := range e.Attributes {
				text += " " + a.Value.Emit()
			}
		}
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				t.Errorf("span %s holds %q: %s", s.Name, f, text)
			}
		}
	}
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

func TestEnabled(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		s    ferryotel.Settings
		want bool
	}{
		{ferryotel.Settings{Getenv: env()}, false},
		{ferryotel.Settings{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")}, true},
		{ferryotel.Settings{Getenv: env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")}, true},
		{ferryotel.Settings{Endpoint: "http://c:4318", Getenv: env()}, true},
		{ferryotel.Settings{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "true")}, false},
		{ferryotel.Settings{Endpoint: "http://c:4318", Getenv: env("OTEL_TRACES_EXPORTER", "none")}, false},
	}
	for i, c := range cases {
		if got, why := c.s.Enabled(); got != c.want || (!got && why == "") {
			t.Errorf("case %d: Enabled = %v (%q), want %v", i, got, why, c.want)
		}
	}
	tr, shutdown, err := ferryotel.FromEnv(context.Background(), ferryotel.Settings{Getenv: env()})
	if tr != nil || err != nil || shutdown(context.Background()) != nil {
		t.Errorf("FromEnv with tracing off: %v, %v", tr, err)
	}
	for _, bad := range []ferryotel.Settings{
		{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")},
		{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "zipkin")},
		{Endpoint: "http://user:pw-secret@c:4318", Getenv: env()},
	} {
		_, _, err := ferryotel.FromEnv(context.Background(), bad)
		if !errors.Is(err, ferryotel.ErrConfig) || strings.Contains(fmt.Sprint(err), "pw-secret") {
			t.Errorf("FromEnv(%+v): %v", bad.Endpoint, err)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, ok := range []string{"http://collector:4318", "https://otel.example.com", "http://127.0.0.1:4318/prefix"} {
		if err := ferryotel.CheckEndpoint(ok); err != nil {
			t.Errorf("CheckEndpoint(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"collector:4318", "grpc://c:4317", "http://", "http://u:p@c:4318", "http://c:4318/?x=1", "::"} {
		if err := ferryotel.CheckEndpoint(bad); !errors.Is(err, ferryotel.ErrConfig) {
			t.Errorf("CheckEndpoint(%q) = %v", bad, err)
		}
	}
}
