// Package stdout is a sink that writes one JSON line per change event, for
// debugging and piping into other tools:
//
//	{"id":"<event id>","epoch":3,"event":{...the change event, relaxed Extended JSON...}}
//
// A line is written with a single Write call on the underlying writer
// (os.Stdout by default), under a lock, so concurrent batches never
// interleave within a line. An event counts as delivered when that Write
// returned without error; a write error fails the event retryably (and the
// later events of its document in the batch). An event whose BSON cannot be
// rendered as Extended JSON fails permanently. The id is the idempotency key:
// a replayed event produces a line with the same id and event (its epoch is
// the new owner's after a lease takeover).
package stdout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Option configures a Sink.
type Option func(*config) error

type config struct {
	w         io.Writer
	canonical bool
}

// Writer sets where lines go (default os.Stdout).
func Writer(w io.Writer) Option {
	return func(c *config) error {
		if w == nil {
			return errors.New("stdout: Writer: nil writer")
		}
		c.w = w
		return nil
	}
}

// Canonical renders events as canonical rather than relaxed Extended JSON.
func Canonical() Option {
	return func(c *config) error { c.canonical = true; return nil }
}

// Sink writes JSON lines. It is safe for concurrent use.
type Sink struct {
	cfg       config
	mu        sync.Mutex
	connected bool
	buf       []byte
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected stdout sink.
func New(opts ...Option) (*Sink, error) {
	s := &Sink{cfg: config{w: os.Stdout}}
	for _, o := range opts {
		if err := o(&s.cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Connect makes the sink ready to write.
func (s *Sink) Connect(context.Context) error {
	s.mu.Lock()
	s.connected = true
	s.mu.Unlock()
	return nil
}

// Close stops the sink; later writes fail with sink.ErrNotConnected. The
// writer is not closed: the sink does not own it.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	s.connected = false
	s.mu.Unlock()
	return nil
}

// Write writes one line per event, in order.
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.connected {
		return sink.Retryable(sink.ErrNotConnected)
	}
	return sink.EachInOrder(ctx, batch, s.writeOne, nil)
}

// writeOne renders and writes one line; s.mu is held.
func (s *Sink) writeOne(_ context.Context, ev *ferry.Event) error {
	js, err := bson.MarshalExtJSON(ev.Raw, s.cfg.canonical, false)
	if err != nil {
		return sink.Permanent(fmt.Errorf("stdout: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	b := s.buf[:0]
	b = append(b, `{"id":"`...)
	b = append(b, ev.ID()...) // hex: needs no escaping
	b = append(b, `","epoch":`...)
	b = strconv.AppendInt(b, ev.Epoch, 10)
	b = append(b, `,"event":`...)
	b = append(b, js...)
	b = append(b, "}\n"...)
	s.buf = b
	if _, err := s.cfg.w.Write(b); err != nil {
		return sink.Retryable(fmt.Errorf("stdout: event %s: %w", ev.ID(), err))
	}
	return nil
}
