// Package stdout is a sink that writes one JSON line per change event, for
// debugging and piping into other tools:
//
//	{"id":"<event id>","epoch":3,"event":{...the change event, relaxed Extended JSON...}}
//
// A line is rendered without holding any lock, then written with a single
// Write call on the underlying writer (os.Stdout by default) under a lock,
// so concurrent batches never interleave within a line (their lines may
// interleave with each other). An event counts as delivered when that Write
// returned without error; a write error fails the event retryably (and the
// later events of its document in the batch). An event whose BSON cannot be
// rendered as Extended JSON fails permanently. The id is the idempotency key:
// a replayed event produces a line with the same id and event (its epoch is
// the new owner's after a lease takeover).
//
// New validates its options once (see package sink, "Options"); its error
// matches ErrInvalidOption.
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
	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/sink"
)

// ErrInvalidOption is wrapped by every error New returns about its
// options.
var ErrInvalidOption = errors.New("stdout: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one)
// and then validates the result once; its error matches ErrInvalidOption
// and lists every problem, each naming its option. A nil option is a
// problem. Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	w         io.Writer
	canonical bool
}

func (c *config) validate(p *optcheck.Problems) {
	if c.w == nil {
		p.Add("Writer", "nil writer (leave the option out for os.Stdout)")
	}
}

// Writer sets where lines go (default os.Stdout).
func Writer(w io.Writer) Option { return option(func(c *config) { c.w = w }) }

// Canonical renders events as canonical rather than relaxed Extended JSON.
func Canonical() Option { return option(func(c *config) { c.canonical = true }) }

// Sink writes JSON lines. It is safe for concurrent use.
type Sink struct {
	cfg       config
	mu        sync.Mutex // guards connected and serialises writes to cfg.w
	connected bool
}

var _ sink.Sink = (*Sink)(nil)

// New returns an unconnected stdout sink.
func New(opts ...Option) (*Sink, error) {
	cfg := config{w: os.Stdout}
	var p optcheck.Problems
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	return &Sink{cfg: cfg}, nil
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

// Write writes one line per event, in order. Each line is rendered
// before the lock is taken, so concurrent batches render in parallel and
// hold the lock only for their Write calls.
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	connected := s.connected
	s.mu.Unlock()
	if !connected {
		return sink.Retryable(sink.ErrNotConnected)
	}
	bp := lineBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledLine {
			lineBufs.Put(bp)
		}
	}()
	return sink.EachInOrder(ctx, batch, func(_ context.Context, ev *ferry.Event) error {
		return s.writeOne(ev, bp)
	}, nil)
}

// maxPooledLine is the largest line buffer kept for reuse.
const maxPooledLine = 1 << 20

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// writeOne renders one line into *bp, then writes it under s.mu.
func (s *Sink) writeOne(ev *ferry.Event, bp *[]byte) error {
	b := append((*bp)[:0], `{"id":"`...)
	b = append(b, ev.ID()...) // hex: needs no escaping
	b = append(b, `","epoch":`...)
	b = strconv.AppendInt(b, ev.Epoch, 10)
	b = append(b, `,"event":`...)
	b, err := extjson.Append(b, ev.Raw, s.cfg.canonical)
	if err != nil {
		return sink.Permanent(fmt.Errorf("stdout: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	b = append(b, "}\n"...)
	*bp = b
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.connected {
		return sink.Retryable(sink.ErrNotConnected)
	}
	if _, err := s.cfg.w.Write(b); err != nil {
		return sink.Retryable(fmt.Errorf("stdout: event %s: %w", ev.ID(), err))
	}
	return nil
}
