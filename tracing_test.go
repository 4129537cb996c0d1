package ferry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

func TestTraceParentInContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ferry.WithTraceParent(context.Background(), tp)
	if got := ferry.TraceParent(ctx); got != tp {
		t.Fatalf("TraceParent = %q", got)
	}
	if got := ferry.TraceID(tp); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("TraceID = %q", got)
	}
	for _, bad := range []string{"", "x", strings.ToUpper(tp), "01" + tp[2:], tp + "-00",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01"} {
		if ferry.ValidTraceParent(bad) {
			t.Errorf("ValidTraceParent(%q) = true", bad)
		}
		if got := ferry.TraceParent(ferry.WithTraceParent(context.Background(), bad)); got != "" {
			t.Errorf("WithTraceParent(%q) carried %q", bad, got)
		}
	}
	if ferry.TraceParent(context.Background()) != "" {
		t.Error("an empty context carries a traceparent")
	}
}

// fakeTracer is a HookRead and HookDelivery that hands out traceparents:
// a trace per read batch, a span per delivery in its batch's trace.
type fakeTracer struct {
	mu         sync.Mutex
	n          int
	reads      map[string]ferry.ReadInfo // traceparent → the batch as it ended
	openReads  int
	calls      []traceCall
	deliveries map[string]*traceCall // the delivery's traceparent → call
}

type traceCall struct {
	parent, tp string
	before     ferry.EventInfo
	end        ferry.EventInfo
	ended      int
}

func (f *fakeTracer) next() string {
	f.n++
	return fmt.Sprintf("%016x", f.n)
}

func (f *fakeTracer) OnRead(i ferry.ReadInfo) (string, func(ferry.ReadInfo)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tp := "00-" + f.next() + f.next() + "-" + f.next() + "-01"
	f.openReads++
	return tp, func(end ferry.ReadInfo) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.openReads--
		f.reads[tp] = end
	}
}

func (f *fakeTracer) OnDelivery(ctx context.Context, ev *ferry.Event, i ferry.EventInfo) (context.Context, func(ferry.EventInfo)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parent := ferry.TraceParent(ctx)
	trace := ferry.TraceID(parent)
	if trace == "" {
		trace = f.next() + f.next()
	}
	c := &traceCall{parent: parent, tp: "00-" + trace + "-" + f.next() + "-01", before: i}
	f.deliveries[c.tp] = c
	return ferry.WithTraceParent(ctx, c.tp), func(end ferry.EventInfo) {
		f.mu.Lock()
		defer f.mu.Unlock()
		c.end = end
		c.ended++
		f.calls = append(f.calls, *c)
	}
}

// TestTraceContext runs a consumer with a tracing hook: each handler call
// gets the traceparent its delivery hook made, in the trace of the event's
// read batch; each call's end reports its result (applied, retried,
// dead-lettered) once; the batches account for every event; a dead
// letter records the trace id; every log line of a delivery carries the
// short event id and the same trace id.
func TestTraceContext(t *testing.T) {
	e := newEnv(t)
	tr := &fakeTracer{reads: map[string]ferry.ReadInfo{}, deliveries: map[string]*traceCall{}}
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := newRecorder()
	var mu sync.Mutex
	seen := map[int32][]string{} // document → the traceparent of each handler call
	rec.fn = func(ctx context.Context, ev *ferry.Event) error {
		id := ev.DocumentKey.Lookup("_id").Int32()
		mu.Lock()
		seen[id] = append(seen[id], ferry.TraceParent(ctx))
		n := len(seen[id])
		mu.Unlock()
		switch {
		case id == 2 && n == 1:
			return fmt.Errorf("fails once")
		case id == 3:
			return ferry.Permanent(fmt.Errorf("refused"))
		}
		return nil
	}
	start(t, e.client, rec.handle, e.opts(ferry.WithHooks(tr), ferry.Logger(log))...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}},
		bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "_id", Value: 5}})
	rec.waitFor(t, 4)
	poll.Until(t, 10*time.Second, func() error {
		entries, err := e.dlq.List(context.Background(), "s", 0)
		if err != nil {
			return err
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(entries) != 1 || len(tr.calls) != 6 || tr.openReads != 0 {
			return fmt.Errorf("%d dead letters, %d calls ended, %d reads open; want 1, 6 and 0", len(entries), len(tr.calls), tr.openReads)
		}
		return nil
	})
	tr.mu.Lock()
	defer tr.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()

	results := map[int32][]ferry.EventResult{}
	for _, c := range tr.calls {
		if c.ended != 1 {
			t.Errorf("a call ended %d times", c.ended)
		}
		if _, ok := tr.reads[c.parent]; !ok {
			t.Errorf("delivery parent %q is not a read batch's traceparent", c.parent)
		}
		if ferry.TraceID(c.tp) != ferry.TraceID(c.parent) {
			t.Errorf("delivery %s is not in its batch's trace %s", c.tp, c.parent)
		}
		if c.before.EventID == "" || c.before.Stream != "s" || c.before.Attempt < 1 || c.end.Attempt != c.before.Attempt {
			t.Errorf("delivery info: before %+v end %+v", c.before, c.end)
		}
		var id int32
		for doc, tps := range seen {
			for _, tp := range tps {
				if tp == c.tp {
					id = doc
				}
			}
		}
		if id == 0 {
			t.Errorf("no handler call got the delivery's traceparent %s", c.tp)
		}
		results[id] = append(results[id], c.end.Result)
	}
	want := map[int32][]ferry.EventResult{1: {"applied"}, 2: {"retried", "applied"}, 3: {"dead-lettered"}, 4: {"applied"}, 5: {"applied"}}
	for id, w := range want {
		if fmt.Sprint(results[id]) != fmt.Sprint(w) {
			t.Errorf("document %d: results %v, want %v", id, results[id], w)
		}
	}
	var events int
	for _, r := range tr.reads {
		if r.Stream != "s" || r.Events < 1 || r.Start.IsZero() || r.Duration < 0 || r.Bytes <= 0 || r.Backfill {
			t.Errorf("read batch %+v", r)
		}
		events += r.Events
	}
	if events != 5 {
		t.Errorf("the read batches hold %d events, want 5", events)
	}

	entries, _ := e.dlq.List(context.Background(), "s", 0)
	if got, want := entries[0].TraceID, ferry.TraceID(seen[3][0]); got != want || got == "" {
		t.Errorf("dead letter trace id %q, want %q", got, want)
	}

	// Every log line naming an event carries its trace id.
	logMu.Lock()
	defer logMu.Unlock()
	byEvent := map[string]string{}
	for _, c := range tr.calls {
		byEvent[c.before.EventID[:16]] = ferry.TraceID(c.tp)
	}
	var checked int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		ev, ok := rec["event"].(string)
		if !ok {
			continue
		}
		checked++
		if rec["trace"] != byEvent[ev] {
			t.Errorf("log line of event %s has trace %v, want %s: %s", ev, rec["trace"], byEvent[ev], line)
		}
	}
	if checked < 6 { // 4 applied (debug), retrying, dead-lettered, applied after the retry
		t.Errorf("only %d log lines name an event:\n%s", checked, logs.String())
	}
}

// TestTraceContextBatch: in a batch handler call each event is a delivery
// of its own: the delivery hooks run once per event and attempt, in the
// trace of the event's read batch, and DeliveryTraceParent gives each
// event its own traceparent, while the context of a call of several
// events carries none (it would name one event's span for all); a call of
// one event gets its delivery's in the context as well. Results and the
// dead letter's trace id are per event.
func TestTraceContextBatch(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	for i := int32(1); i <= 5; i++ {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: i}})
	}
	tr := &fakeTracer{reads: map[string]ferry.ReadInfo{}, deliveries: map[string]*traceCall{}}
	g := newGate()
	var mu sync.Mutex
	seen := map[int32][]string{} // document → its delivery traceparent in each call
	var ctxTPs []string          // the context's traceparent of each call of several events
	h := func(ctx context.Context, batch []*ferry.Event) error {
		g.wait(ctx)
		mu.Lock()
		defer mu.Unlock()
		if len(batch) > 1 {
			ctxTPs = append(ctxTPs, ferry.TraceParent(ctx))
		} else if got, want := ferry.TraceParent(ctx), ferry.DeliveryTraceParent(ctx, batch[0]); got != want {
			t.Errorf("a call of one event: context traceparent %q, its delivery's %q", got, want)
		}
		be := ferry.NewBatchError(len(batch))
		for i, ev := range batch {
			id := idOf(ev)
			seen[id] = append(seen[id], ferry.DeliveryTraceParent(ctx, ev))
			switch {
			case id == 2 && len(seen[id]) == 1:
				be.Set(i, errors.New("fails once"))
			case id == 3:
				be.Set(i, ferry.Permanent(errors.New("refused")))
			}
		}
		return be.Err()
	}
	c, _ := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(1), ferry.WithHooks(tr))...)
	g.openWhenQueued(t, c, 5)
	eventually(t, 10*time.Second, func() string { return "the dead letter and every delivery's end" }, func() bool {
		entries, _ := e.dlq.List(context.Background(), "s", 0)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(entries) == 1 && len(tr.calls) == 6 && tr.openReads == 0
	})
	tr.mu.Lock()
	defer tr.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(ctxTPs) == 0 {
		t.Fatal("no call had several events: the batch path was not exercised")
	}
	for _, tp := range ctxTPs {
		if tp != "" {
			t.Errorf("a call of several events got traceparent %q in its context, want none", tp)
		}
	}
	results := map[int32][]ferry.EventResult{}
	for _, cl := range tr.calls {
		if cl.ended != 1 {
			t.Errorf("a delivery ended %d times", cl.ended)
		}
		if _, ok := tr.reads[cl.parent]; !ok || ferry.TraceID(cl.tp) != ferry.TraceID(cl.parent) {
			t.Errorf("delivery %s: parent %q is not its read batch's", cl.tp, cl.parent)
		}
		var id int32
		for doc, tps := range seen {
			if slices.Contains(tps, cl.tp) {
				id = doc
			}
		}
		if id == 0 {
			t.Errorf("no event got the delivery's traceparent %s", cl.tp)
		}
		results[id] = append(results[id], cl.end.Result)
	}
	want := map[int32][]ferry.EventResult{1: {"applied"}, 2: {"retried", "applied"}, 3: {"dead-lettered"}, 4: {"applied"}, 5: {"applied"}}
	for id, w := range want {
		if fmt.Sprint(results[id]) != fmt.Sprint(w) {
			t.Errorf("document %d: results %v, want %v", id, results[id], w)
		}
	}
	entries, _ := e.dlq.List(context.Background(), "s", 0)
	if got, want := entries[0].TraceID, ferry.TraceID(seen[3][0]); got != want || got == "" {
		t.Errorf("dead letter trace id %q, want %q", got, want)
	}
}
