// Package stdout is a sink that writes one JSON line per change event, for
// debugging and piping into other tools:
//
//	{"id":"<event id>","epoch":3,"op":"update","event":{...the change event, relaxed Extended JSON...}}
//
// op is the event's operationType; "backfill" marks a snapshot row, whose
// event is the bare document (apply it as an upsert of the document).
//
// A batch's lines are rendered first, then written with a single Write
// call on the underlying writer (os.Stdout by default), under a lock, so
// concurrent batches never interleave within a line, and a batch costs one
// system call. An event counts as delivered when the writer took its whole
// line without error; a write error (or a short write) fails the event it
// stopped in retryably (and the later events of its document in the
// batch), and the lines after it are written again. An event whose BSON
// cannot be rendered as Extended JSON fails permanently. The id is the
// idempotency key: a replayed event produces a line with the same id and
// event (its epoch is the new owner's after a lease takeover).
//
// New validates its options once (see package sink, "Options"); its error
// matches ErrInvalidOption.
package stdout

import (
	"context"
	"encoding/json"
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
	mu        sync.Mutex // guards connected and serialises the writes to cfg.w
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

// Write writes one line per event, in order, in a single Write call on
// the writer for the whole batch: the lines are rendered before the lock
// is taken, and the lock is held only for that call. If the writer takes
// only part of the batch (a short write or an error), the events whose
// lines it took are delivered, the event it stopped in fails retryably
// (and the later events of its document are not attempted), and the lines
// after it are written with one more call.
func (s *Sink) Write(ctx context.Context, batch []*ferry.Event) error {
	if len(batch) == 0 {
		return nil
	}
	if !s.isConnected() {
		return sink.Retryable(sink.ErrNotConnected)
	}
	be := sink.NewBatchError(len(batch))
	bp := lineBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBatch {
			lineBufs.Put(bp)
		}
	}()
	buf := (*bp)[:0]
	offs := make([]int, 3*len(batch))
	starts := offs[:len(batch)]                  // where each event's line is in buf
	ends := offs[len(batch) : 2*len(batch)]      // and where it ends
	pending := offs[2*len(batch) : 2*len(batch)] // events with a line to write, in order
	sink.Submit(ctx, batch, be, func(i int, ev *ferry.Event) error {
		starts[i] = len(buf)
		var err error
		if buf, err = s.appendLine(buf, ev); err != nil {
			return err
		}
		ends[i] = len(buf)
		pending = append(pending, i)
		return nil
	})
	*bp = buf
	out := buf
	for len(pending) > 0 {
		s.mu.Lock()
		if !s.connected {
			s.mu.Unlock()
			for _, i := range pending {
				be.Set(i, sink.Retryable(sink.ErrNotConnected))
			}
			break
		}
		n, err := s.cfg.w.Write(out)
		s.mu.Unlock()
		if err == nil && n >= len(out) {
			break
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		// The lines before offset n were written; the one holding it was
		// not (whole).
		var rest []int
		var next []byte
		written, cut := 0, ""
		for _, i := range pending {
			ln := buf[starts[i]:ends[i]]
			switch {
			case cut == "" && written+len(ln) <= n:
				written += len(ln)
			case cut == "":
				cut = sink.KeyOf(batch[i])
				be.Set(i, sink.Retryable(fmt.Errorf("stdout: event %s: %w", batch[i].ID(), err)))
			case sink.KeyOf(batch[i]) == cut:
				be.Set(i, sink.Retryable(sink.ErrSkipped))
			case ctx.Err() != nil:
				be.Set(i, sink.Retryable(ctx.Err()))
			default:
				rest = append(rest, i)
				next = append(next, ln...)
			}
		}
		pending, out = rest, next
	}
	return be.Err()
}

func (s *Sink) isConnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// maxPooledBatch is the largest batch buffer kept for reuse.
const maxPooledBatch = 4 << 20

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// appendLine renders ev's line onto b; on an error b is returned as it
// was.
func (s *Sink) appendLine(b []byte, ev *ferry.Event) ([]byte, error) {
	start := len(b)
	b = append(b, `{"id":"`...)
	b = append(b, ev.ID()...) // hex: needs no escaping
	b = append(b, `","epoch":`...)
	b = strconv.AppendInt(b, ev.Epoch, 10)
	if ev.OperationType != "" {
		b = append(b, `,"op":`...)
		b = appendJSONString(b, ev.OperationType)
	}
	b = append(b, `,"event":`...)
	b, err := extjson.Append(b, ev.Raw, s.cfg.canonical)
	if err != nil {
		return b[:start], sink.Permanent(fmt.Errorf("stdout: event %s: rendering Extended JSON: %w", ev.ID(), err))
	}
	return append(b, "}\n"...), nil
}

// appendJSONString appends s as a JSON string. Operation types are plain
// identifiers; anything else goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			q, err := json.Marshal(s)
			if err != nil {
				return append(b, `""`...)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
