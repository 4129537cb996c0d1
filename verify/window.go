package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
)

// errHistoryLost: the oplog no longer holds the window's start — when the
// stream opens (ChangeStreamHistoryLost), or later, when the oplog rolls
// past the position of a stream verify is still reading.
var errHistoryLost = errors.New("the oplog no longer holds the window's start")

// windowEvent is an event of the window with its token's _data, which
// orders it against checkpoints.
type windowEvent struct {
	Event
	tokenData string
}

// partitionRead is what the re-read of one partition found.
type partitionRead struct {
	events []windowEvent
	// invalidated lists the cluster times of the invalidate events met:
	// the stream was read on after each.
	invalidated []bson.Timestamp
}

// consumer is partition p of the stream, as configured, never run: it
// opens the re-read's change streams and finds the oplog's start.
func consumer(cfg Config, p int) (*ferry.Consumer, error) {
	opts := append(append([]ferry.Option(nil), cfg.Options...),
		ferry.Stream(cfg.Stream), ferry.Partition(p, cfg.Partitions),
		ferry.Checkpoints(cfg.Checkpoints), ferry.DeadLetters(cfg.DeadLetters),
		ferry.MaxAwaitTime(100*time.Millisecond)) // an idle stream's end is seen sooner
	c, err := ferry.NewConsumer(cfg.Client, func(context.Context, *ferry.Event) error { return nil }, opts...)
	if err != nil {
		return nil, fmt.Errorf("verify: the stream's definition: %w", err)
	}
	return c, nil
}

// readWindow re-reads partition p of the stream from from to cfg.To. An
// invalidate (the collection or database dropped or renamed) ends a
// change stream: the server closes its cursor. The consumer does not hand
// it to the handler (it records its token, and stops or restarts after
// it), so it is not an event of the window: the read goes on after it, as
// a consumer with on_invalidate restart does, to the window's end.
func readWindow(ctx context.Context, cfg Config, p int, from bson.Timestamp) (partitionRead, error) {
	c, err := consumer(cfg, p)
	if err != nil {
		return partitionRead{}, err
	}
	var out partitionRead
	at := from
	for {
		cs, err := c.Watch(ctx, at)
		if err != nil {
			if mongoerr.IsHistoryLost(err) {
				return out, fmt.Errorf("%w: partition %d at %s: %w", errHistoryLost, p, FormatTime(at), err)
			}
			return out, fmt.Errorf("verify: open partition %d of %s at %s: %w", p, cfg.Stream, FormatTime(at), err)
		}
		r := streamRead{cfg: cfg, p: p, cs: cs, out: &out, reached: at}
		inv, err := r.read(ctx)
		cs.Close(context.WithoutCancel(ctx))
		if err != nil || inv == nil {
			return out, err
		}
		out.invalidated = append(out.invalidated, *inv)
		at = after(*inv)
		if !at.Before(cfg.To) {
			return out, nil
		}
	}
}

// streamRead reads one change stream of a partition's re-read.
type streamRead struct {
	cfg     Config
	p       int
	cs      *mongo.ChangeStream
	out     *partitionRead
	reached bson.Timestamp // how far the stream has been read: said when reading stops
}

// read reads the stream up to the window's end. It returns the cluster
// time of an invalidate event when it meets one (the server closes the
// cursor after it), nil at the window's end. Every iteration without an
// event is a getMore that waits up to the stream's MaxAwaitTime: a cursor
// the server closed is never polled again.
func (r *streamRead) read(ctx context.Context) (*bson.Timestamp, error) {
	cfg, cs, p := r.cfg, r.cs, r.p
	for {
		// At the end of a server batch the stream's position is its
		// postBatchResumeToken: past the window's end, no getMore is
		// needed (an idle one waits MaxAwaitTime). An event's token at
		// the end itself is not past it: a batch may end inside a
		// transaction, whose events share their cluster time.
		if cs.RemainingBatchLength() == 0 && r.passedEnd(true) {
			return nil, nil
		}
		if cs.TryNext(ctx) {
			if v, err := cs.Current.LookupErr("splitEvent"); err == nil {
				if n, ok := v.Document().Lookup("fragment").AsInt64OK(); ok && n > 1 {
					continue // a split event counts once, by its first fragment (its event id)
				}
			}
			ev, err := ferry.ParseEvent(cs.Current, p, 0)
			if err != nil {
				return nil, fmt.Errorf("verify: partition %d of %s after %s: %w", p, cfg.Stream, FormatTime(r.reached), err)
			}
			if ev.ClusterTime.After(cfg.To) {
				return nil, nil
			}
			r.reached = ev.ClusterTime
			if ev.OperationType == "invalidate" {
				at := ev.ClusterTime
				return &at, nil
			}
			if ev.DocumentKey == nil && p != 0 && cfg.Partitions > 1 {
				continue // a control event: partition 0 counts it
			}
			d, _ := tokenData(ev.Token)
			r.out.events = append(r.out.events, windowEvent{Event: Event{ID: ev.ID(), Partition: p, Operation: ev.OperationType,
				Namespace: ev.Namespace, DocumentKey: ev.DocumentKey, ClusterTime: ev.ClusterTime}, tokenData: d})
			continue
		}
		if err := cs.Err(); err != nil {
			if mongoerr.IsHistoryLost(err) {
				return nil, fmt.Errorf("%w: partition %d, read up to %s: %w", errHistoryLost, p, FormatTime(r.reached), err)
			}
			return nil, fmt.Errorf("verify: read partition %d of %s after %s: %w", p, cfg.Stream, FormatTime(r.reached), err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("verify: partition %d of %s stopped at %s (%d events read, the window ends at %s): %w",
				p, cfg.Stream, FormatTime(r.reached), len(r.out.events), FormatTime(cfg.To), err)
		}
		// An empty batch: done once the stream's position passed To.
		if r.passedEnd(false) {
			return nil, nil
		}
		if cs.ID() == 0 {
			// Closed by the server without an invalidate verify saw: the
			// stream's pipeline filters the invalidate out, and where the
			// stream ended is unknown.
			return nil, fmt.Errorf("verify: the server closed partition %d's change stream of %s after %s, before the window's end %s, "+
				"without an invalidate event (the stream's pipeline filters it out): its collection or database was dropped or renamed; "+
				"verify cannot read past it: end the window before it", p, cfg.Stream, FormatTime(r.reached), FormatTime(cfg.To))
		}
	}
}

// passedEnd reports whether the stream's position (its resume token) is
// at or past the window's end — with strict, past it or a high-water mark
// at it — and notes how far it got.
func (r *streamRead) passedEnd(strict bool) bool {
	tok, err := resumetoken.Parse(r.cs.ResumeToken())
	if err != nil {
		return false
	}
	if tok.ClusterTime.After(r.reached) {
		r.reached = tok.ClusterTime
	}
	if strict && tok.TokenType == resumetoken.TypeEvent {
		return tok.ClusterTime.After(r.cfg.To)
	}
	return !tok.ClusterTime.Before(r.cfg.To)
}
