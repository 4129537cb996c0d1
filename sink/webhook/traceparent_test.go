package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/webhook"
)

// TestTraceParentHeader: a delivery carries the handler context's
// traceparent in its traceparent header, and none without one.
func TestTraceParentHeader(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // webhook-id → traceparent header values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("Webhook-Id")] = r.Header.Values("Traceparent")
		mu.Unlock()
	}))
	defer srv.Close()
	s, err := webhook.New(srv.URL, webhook.Secret(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	connected(t, s)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, plain := sinktest.NewEvent(1, "a", 1), sinktest.NewEvent(2, "b", 1)
	ctx := context.Background()
	if err := s.Write(ferry.WithTraceParent(ctx, tp), []*ferry.Event{traced}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []*ferry.Event{plain}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if v := got[traced.ID()]; len(v) != 1 || v[0] != tp {
		t.Errorf("traceparent %v, want [%s]", v, tp)
	}
	if v, ok := got[plain.ID()]; !ok || len(v) != 0 {
		t.Errorf("traceparent %v without one in the context (delivered: %v)", v, ok)
	}
}
