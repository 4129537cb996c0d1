package stdout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/stdout"
)

// lines is a writer that parses each line it is given, like a program
// reading ferry's output through a pipe, and fails lines on request.
type lines struct {
	mu   sync.Mutex
	got  []sinktest.Delivery
	fail map[string]bool
	errs []error
}

type line struct {
	ID    string          `json:"id"`
	Epoch int64           `json:"epoch"`
	Event json.RawMessage `json:"event"`
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(p) == 0 || p[len(p)-1] != '\n' || bytes.Count(p, []byte("\n")) != 1 {
		l.errs = append(l.errs, errors.New("a Write call was not exactly one line"))
	}
	var ln line
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ln); err != nil {
		l.errs = append(l.errs, err)
		return 0, err
	}
	if l.fail[ln.ID] {
		return 0, errors.New("disk full")
	}
	l.got = append(l.got, sinktest.Delivery{EventID: ln.ID, IdempotencyKey: ln.ID, Epoch: ln.Epoch, Body: bytes.Clone(ln.Event)})
	return len(p), nil
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
	want := `{"id":"` + ev.ID() + `","epoch":12,"event":{"_id":{"_data":"`
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
