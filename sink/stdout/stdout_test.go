package stdout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/stdout"
)

// lines is a writer that parses each line it is given, like a program
// reading ferry's output through a pipe, and fails lines on request: it
// takes the lines before a failing one and returns their length with the
// error, as a write that fails midway does.
type lines struct {
	mu     sync.Mutex
	got    []sinktest.Delivery
	fail   map[string]bool
	errs   []error
	writes int
}

type line struct {
	ID    string          `json:"id"`
	Epoch int64           `json:"epoch"`
	Op    string          `json:"op"`
	Event json.RawMessage `json:"event"`
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	if len(p) == 0 || p[len(p)-1] != '\n' {
		l.errs = append(l.errs, errors.New("a Write call did not end with a whole line"))
	}
	n := 0
	for rest := p; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n') + 1
		if end == 0 {
			end = len(rest)
		}
		var ln line
		dec := json.NewDecoder(bytes.NewReader(rest[:end]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ln); err != nil {
			l.errs = append(l.errs, err)
			return n, err
		}
		var head struct {
			OperationType string `json:"operationType"`
		}
		if err := json.Unmarshal(ln.Event, &head); err == nil && head.OperationType != ln.Op {
			l.errs = append(l.errs, fmt.Errorf("line op %q, event operationType %q", ln.Op, head.OperationType))
		}
		if l.fail[ln.ID] {
			return n, errors.New("disk full")
		}
		l.got = append(l.got, sinktest.Delivery{EventID: ln.ID, IdempotencyKey: ln.ID, Epoch: ln.Epoch, Body: bytes.Clone(ln.Event)})
		n += end
		rest = rest[end:]
	}
	return n, nil
}

func (l *lines) Received() []sinktest.Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sinktest.Delivery(nil), l.got...)
}

func (l *lines) Fail(id string, f sinktest.Fault) bool {
	if f != sinktest.FaultRetryable {
		return false // a writer has no way to reject an event for good
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[id] = true
	return true
}

func (l *lines) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.fail)
}

func (l *lines) NewSink(t *testing.T) sink.Sink {
	s, err := stdout.New(stdout.Writer(l))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (l *lines) check(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.errs {
		t.Errorf("output is not JSON lines: %v", err)
	}
}

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		l := &lines{fail: map[string]bool{}}
		t.Cleanup(func() { l.check(t) })
		return l.NewSink(t), l
	})
}

func TestLineFormat(t *testing.T) {
	var buf bytes.Buffer
	s, err := stdout.New(stdout.Writer(&buf))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	ev := sinktest.NewEvent(7, "a", 12)
	if err := s.Write(ctx, []*ferry.Event{ev}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	want := `{"id":"` + ev.ID() + `","epoch":12,"op":"update","event":{"_id":{"_data":"`
	if !strings.HasPrefix(out, want) {
		t.Errorf("line = %q, want prefix %q", out, want)
	}
	// Relaxed: plain numbers, dates as ISO-8601, decimals as $numberDecimal.
	for _, frag := range []string{`"seq":7`, `"wallTime":{"$date":"2024-`, `"total":{"$numberDecimal":"19.99"}`} {
		if !strings.Contains(out, frag) {
			t.Errorf("line %q lacks %q", out, frag)
		}
	}
	buf.Reset()
	s2, _ := stdout.New(stdout.Writer(&buf), stdout.Canonical())
	_ = s2.Connect(ctx)
	if err := s2.Write(ctx, []*ferry.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"seq":{"$numberInt":"7"}`) {
		t.Errorf("canonical line %q lacks $numberInt", buf.String())
	}
	// A snapshot row: op "backfill", the event is the bare document.
	buf.Reset()
	row := sinktest.NewEvent(8, "a", 12)
	row.OperationType, row.Raw, row.Backfill = "backfill", row.FullDocument, true
	if err := s.Write(ctx, []*ferry.Event{row}); err != nil {
		t.Fatal(err)
	}
	if want := `","epoch":12,"op":"backfill","event":{"_id":"a","seq":8,`; !strings.Contains(buf.String(), want) {
		t.Errorf("snapshot row line %q lacks %q", buf.String(), want)
	}
}

func TestOptionErrors(t *testing.T) {
	if _, err := stdout.New(stdout.Writer(nil)); !errors.Is(err, stdout.ErrInvalidOption) || !strings.Contains(err.Error(), "Writer: nil writer") {
		t.Errorf("New(Writer(nil)) = %v, want ErrInvalidOption naming Writer", err)
	}
	if _, err := stdout.New(nil); !errors.Is(err, stdout.ErrInvalidOption) || !strings.Contains(err.Error(), "nil option") {
		t.Errorf("New(nil) = %v, want ErrInvalidOption naming the nil option", err)
	}
}

func TestMalformedEventIsPermanent(t *testing.T) {
	var buf bytes.Buffer
	s, _ := stdout.New(stdout.Writer(&buf))
	_ = s.Connect(context.Background())
	ev := sinktest.NewEvent(1, "a", 1)
	ev.Raw = []byte{1, 2, 3}
	err := sink.Errors(s.Write(context.Background(), []*ferry.Event{ev}), 1)[0]
	if err == nil || sink.IsRetryable(err) || buf.Len() != 0 {
		t.Errorf("malformed event: %v (wrote %q), want a permanent error and no output", err, buf.String())
	}
}

// shortWriter takes at most max bytes per call, without an error.
type shortWriter struct {
	buf   bytes.Buffer
	max   int
	calls int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	w.calls++
	if len(p) > w.max {
		p = p[:w.max]
	}
	return w.buf.Write(p)
}

// TestOneWritePerBatch: a batch costs one Write call on the writer; a
// failing line costs one more for the lines after it; a short write
// delivers the whole lines it took and writes the rest again.
func TestOneWritePerBatch(t *testing.T) {
	ctx := context.Background()
	var evs []*ferry.Event
	for i := range 10 {
		evs = append(evs, sinktest.NewEvent(i, string(rune('a'+i%5)), 1))
	}
	l := &lines{fail: map[string]bool{}}
	s := l.NewSink(t)
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if l.writes != 1 || len(l.Received()) != 10 {
		t.Fatalf("a batch of 10: %d writes, %d lines; want 1 write of 10 lines", l.writes, len(l.Received()))
	}
	l.check(t)

	l = &lines{fail: map[string]bool{evs[2].ID(): true}}
	s = l.NewSink(t)
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	for i, err := range errs {
		switch {
		case i == 2 && (err == nil || !sink.IsRetryable(err)):
			t.Errorf("failed line: %v, want a retryable error", err)
		case i == 7 && !errors.Is(err, sink.ErrSkipped):
			t.Errorf("later event of the failed document: %v, want ErrSkipped", err)
		case i != 2 && i != 7 && err != nil:
			t.Errorf("event %d: %v, want delivered", i, err)
		}
	}
	if l.writes != 2 || len(l.Received()) != 8 {
		t.Fatalf("a failing line: %d writes, %d lines; want 2 writes, 8 lines", l.writes, len(l.Received()))
	}

	// A writer that takes one line and a half per call.
	var one bytes.Buffer
	s, err := stdout.New(stdout.Writer(&one))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, evs[:1]); err != nil {
		t.Fatal(err)
	}
	w := &shortWriter{max: one.Len() * 3 / 2}
	s, err = stdout.New(stdout.Writer(w))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	errs = sink.Errors(s.Write(ctx, evs[:3]), 3)
	if errs[0] != nil || !errors.Is(errs[1], io.ErrShortWrite) || errs[2] != nil {
		t.Fatalf("short write: %v, want the event it stopped in failed with io.ErrShortWrite, the others delivered", errs)
	}
	out := w.buf.String()
	for _, i := range []int{0, 2} {
		if !strings.Contains(out, `{"id":"`+evs[i].ID()+`"`) {
			t.Errorf("event %d's line missing from %q", i, out)
		}
	}
}
