// Package verify is Ferry's reconciliation: it re-reads a window of a
// stream — the same definition, partition by partition, from a cluster
// time, while the oplog still holds it — and checks that every event was
// either applied (it has a ledger entry, in the idempotent and
// transactional delivery modes), dead-lettered (it has a dead-letter
// entry), or is still pending (it lies after its partition's checkpoint).
// Anything else is missing: a change whose effect was lost. The missing
// count is what operators alert on (`ferry verify`, and the daemon's
// ferry_verify_missing).
//
//	r, err := verify.Stream(ctx, verify.Config{
//		Client: client, Stream: "orders", Partitions: 4,
//		Options:        []ferry.Option{ferry.WatchCollection("shop", "orders")},
//		Checkpoints:    store, Ledger: ledgerStore, DeadLetters: dlq,
//		From:           from, // a cluster time, e.g. an hour ago
//		FromOplogStart: true, // or fail when the oplog no longer holds from
//	})
//	fmt.Println(r)          // verify: events=N applied=A dead-lettered=D pending=P missing=M
//	fmt.Println(r.Window()) // 2026-12-01T15:09:31Z (#388) to …
//	ok := r.OK()
//
// The window: a window the oplog no longer holds starts, with
// FromOplogStart, at the oplog's start — its oldest entry, to the
// increment (ferry.Consumer.OplogStart), so the changes of its first
// second are checked — and a note says how much of it is gone; without
// it, Stream fails with ErrWindow naming that start. Cluster times are
// printed as FormatTime prints them: RFC 3339 in UTC and the increment.
// An invalidate (the collection or database dropped or renamed) does not
// end the re-read: it goes on after it. The re-read takes a getMore per
// empty batch, never polls a closed cursor, and says where it stopped
// when its context ends (BenchmarkWindow: about 0.2-0.4 s per 10,000
// events against the emulator).
//
// Checked nothing: a window that reads no event while the state store
// shows changes of the stream in it fails (Report.Failure; OK is false).
// The evidence, each a change of the stream rather than a sign of life:
// ledger entries whose appliedAt lies in the requested window (appliedAt
// is at or after the change, so a backlog of older changes applied in the
// window counts too); a checkpoint whose resume token is that of a change
// in the window, or whose Pending records one; dead letters of changes in
// the window. A quiet stream's checkpoints move to high-water marks and
// count for nothing: a quiet window passes.
//
// Without a ledger (at-least-once delivery) applied and missing cannot be
// told apart: such events are counted as Unverifiable and the report says
// so. Backfill events are not in the stream and are not checked; the
// projection diff (Projection) covers a backfilled read model.
package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/ledger"
)

// Config says which stream to verify over which window.
type Config struct {
	// Client reaches the source.
	Client *mongo.Client
	// Stream is the stream's name; Options its definition (scope,
	// pipeline, change-stream options), as the consumers run it. Stream,
	// Partition, Checkpoints and DeadLetters are set by Stream itself, and
	// so is the partitioning when Options sets none: the one the stream's
	// checkpoints resolve to (ferry.ResolvePartitioning).
	Stream  string
	Options []ferry.Option
	// Partitions is the stream's partition count (default 1).
	Partitions int
	// Checkpoints is the stream's checkpoint store.
	Checkpoints checkpoint.Store
	// Ledger is the idempotency ledger (nil: at-least-once delivery,
	// applied events cannot be told from missing ones). LedgerAlso names
	// the stream this one started from (source.start_at checkpoints_of),
	// whose entries count as applied too.
	Ledger     *ledger.Store
	LedgerAlso string
	// DeadLetters is the dead-letter store.
	DeadLetters deadletter.Store
	// From is where the window starts; To where it ends (zero, or a time
	// after the source's current cluster time: the source's current
	// cluster time when Stream starts).
	From, To bson.Timestamp
	// FromOplogStart: when the oplog no longer holds From, the window
	// starts at the oplog's start instead — the cluster time of its oldest
	// entry, to the increment (ferry.Consumer.OplogStart) — and a note
	// says so. Without it such a window fails with ErrWindow, naming the
	// oplog's start. If the oplog rolls past the window's start while it
	// is read, the read starts again from the new start, at most
	// startAttempts times.
	FromOplogStart bool
	// ListMissing bounds how many missing events the report lists (default
	// 100; they are all counted).
	ListMissing int
}

// startAttempts bounds how often a FromOplogStart window is read again
// because the oplog rolled past its start while it was read.
const startAttempts = 4

// Report is the outcome of a verification.
type Report struct {
	Stream string
	// From and To are the window read: From is Config.From, or the
	// oplog's start (FromOplogStart); Requested is Config.From.
	From, To, Requested bson.Timestamp
	Events              int // events of the window, each counted once (control events by partition 0)
	Applied             int // with a ledger entry
	DeadLettered        int // with a dead-letter entry
	Pending             int // after their partition's checkpoint
	Missing             int // none of the above: lost
	// Unverifiable counts events before the checkpoint without a
	// dead-letter entry when there is no ledger (at-least-once): applied or
	// lost, Ferry cannot tell.
	Unverifiable int
	// MissingEvents lists missing events (up to Config.ListMissing).
	MissingEvents []Event
	// Failure, when not empty, says why the verification failed although
	// nothing is missing: the window read no event, yet the state store
	// shows changes of the stream in it (ledger entries applied in the
	// requested window, a checkpoint at or pending on a change in it,
	// dead letters of changes in it). Nothing was checked then — the
	// oplog no longer holds those changes, or the definition read is not
	// the one that ran — and a pass would be false.
	Failure string
	// Notes say what could not be checked.
	Notes []string
}

// OK reports whether the verification passed: nothing missing and no
// Failure.
func (r Report) OK() bool { return r.Missing == 0 && r.Failure == "" }

// Event is one event of a report.
type Event struct {
	ID          string // the event id (sha256 of the resume token)
	Partition   int
	Operation   string
	Namespace   ferry.Namespace
	DocumentKey bson.Raw
	ClusterTime bson.Timestamp
}

// ShortID is the event id's first 16 hex digits, as logs show it.
func (e Event) ShortID() string {
	if len(e.ID) > 16 {
		return e.ID[:16]
	}
	return e.ID
}

// String is the report's summary line:
//
//	verify: events=N applied=A dead-lettered=D pending=P missing=M
func (r Report) String() string {
	s := fmt.Sprintf("verify: events=%d applied=%d dead-lettered=%d pending=%d missing=%d",
		r.Events, r.Applied, r.DeadLettered, r.Pending, r.Missing)
	if r.Unverifiable > 0 {
		s += fmt.Sprintf(" unverifiable=%d", r.Unverifiable)
	}
	return s
}

// Window is the window read, as `ferry verify` prints it after
// "window: ":
//
//	2026-12-01T15:09:31Z (#388) to 2026-12-01T16:09:30Z (#5) (from the oplog's start)
func (r Report) Window() string {
	s := fmt.Sprintf("%s to %s", FormatTime(r.From), FormatTime(r.To))
	if r.From != r.Requested && !r.Requested.IsZero() {
		s += " (from the oplog's start)"
	}
	return s
}

// ErrWindow: the window cannot be read (it starts before the oplog, or
// after its end).
var ErrWindow = errors.New("verify: the window cannot be read")

// Stream verifies one stream over the configured window.
func Stream(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Client == nil || cfg.Stream == "" || cfg.Checkpoints == nil || cfg.DeadLetters == nil {
		return Report{}, fmt.Errorf("verify: Client, Stream, Checkpoints and DeadLetters are required")
	}
	if cfg.Partitions < 1 {
		cfg.Partitions = 1
	}
	if cfg.ListMissing == 0 {
		cfg.ListMissing = 100
	}
	now, err := operationTime(ctx, cfg.Client)
	if err != nil {
		return Report{}, err
	}
	var notes []string
	if cfg.To.IsZero() || cfg.To.After(now) {
		if !cfg.To.IsZero() {
			notes = append(notes, fmt.Sprintf("the window's end %s is after the source's current time: it ends at %s",
				FormatTime(cfg.To), FormatTime(now)))
		}
		cfg.To = now
	}
	if cfg.From.IsZero() || !cfg.From.Before(cfg.To) {
		return Report{}, fmt.Errorf("%w: its start %s is not before its end %s", ErrWindow, FormatTime(cfg.From), FormatTime(cfg.To))
	}
	cps, err := cfg.Checkpoints.List(ctx, cfg.Stream)
	if err != nil {
		return Report{}, fmt.Errorf("verify: read the checkpoints of %s: %w", cfg.Stream, err)
	}
	// The partitions are re-read as the consumers read them: under the
	// partitioning they run with (a stream that checkpointed under
	// HashMod keeps it when none is set).
	scheme, _, err := ferry.ResolvePartitioning(ctx, cfg.Checkpoints, append(append([]ferry.Option(nil), cfg.Options...),
		ferry.Stream(cfg.Stream), ferry.Partition(0, cfg.Partitions))...)
	if err != nil {
		return Report{}, fmt.Errorf("verify: the partitioning of %s: %w", cfg.Stream, err)
	}
	cfg.Options = append(append([]ferry.Option(nil), cfg.Options...), ferry.WithPartitioning(scheme))
	dlq, err := cfg.DeadLetters.List(ctx, cfg.Stream, 0)
	if err != nil {
		return Report{}, fmt.Errorf("verify: read the dead letters of %s: %w", cfg.Stream, err)
	}
	var r Report
	from, start := cfg.From, bson.Timestamp{}
	for attempt := 1; ; attempt++ {
		r, err = check(ctx, cfg, from, cps, dlq)
		if !errors.Is(err, errHistoryLost) {
			break
		}
		// The oplog does not hold from (any more): find where it starts.
		s, serr := oplogStart(ctx, cfg, start)
		if serr != nil {
			return r, fmt.Errorf("%w (%v); and finding the oplog's start failed: %w", ErrWindow, err, serr)
		}
		switch {
		case !cfg.FromOplogStart:
			return r, fmt.Errorf("%w: the oplog starts at %s, after the window's start %s: the changes before it are gone",
				ErrWindow, FormatTime(s), FormatTime(cfg.From))
		case !s.Before(cfg.To):
			return r, fmt.Errorf("%w: the oplog starts at %s, after the window's end %s: the window's changes are gone",
				ErrWindow, FormatTime(s), FormatTime(cfg.To))
		case attempt == startAttempts:
			return r, fmt.Errorf("%w: the oplog rolls past the window's start faster than verify reads the window "+
				"(its start moved from %s to %s during %d reads): choose a window that starts later", ErrWindow,
				FormatTime(start), FormatTime(s), attempt)
		}
		from, start = s, s
	}
	if err != nil {
		return r, err
	}
	r.Notes = append(notes, r.Notes...)
	if from != cfg.From {
		r.Notes = append(r.Notes, fmt.Sprintf("the oplog does not reach back to the window's start %s: the window starts at the oplog's start, %s "+
			"(%v after it); the changes before it are gone and not checked", FormatTime(cfg.From), FormatTime(from),
			wall(from).Sub(wall(cfg.From))))
	}
	if cfg.Ledger == nil {
		r.Notes = append(r.Notes, "at-least-once delivery keeps no ledger: events before the checkpoint without a dead letter are "+
			"applied or lost, which cannot be told apart (unverifiable)")
	} else if age := wall(cfg.To).Sub(wall(from)); age > cfg.Ledger.Retention() {
		r.Notes = append(r.Notes, fmt.Sprintf("the window (%v) is longer than the ledger's retention (%v): "+
			"events older than the retention count as missing although they may have been applied", age, cfg.Ledger.Retention()))
	}
	if r.Events == 0 {
		a, err := activityIn(ctx, cfg, cfg.From, cfg.To, cps, dlq)
		if err != nil {
			return r, err
		}
		if !a.none() {
			r.Failure = fmt.Sprintf("the window read no change, but the state store shows changes of %s from %s to %s (%s): nothing was checked",
				cfg.Stream, FormatTime(cfg.From), FormatTime(cfg.To), a)
			if from != cfg.From {
				r.Failure += fmt.Sprintf("; the oplog, which starts at %s, no longer holds them", FormatTime(from))
			}
		}
	}
	return r, nil
}

// check reads the window from from, partition by partition, and checks
// every event against the checkpoints, the dead letters and the ledger.
func check(ctx context.Context, cfg Config, from bson.Timestamp, cps []checkpoint.Checkpoint, dlq []deadletter.Entry) (Report, error) {
	r := Report{Stream: cfg.Stream, From: from, To: cfg.To, Requested: cfg.From}
	position := map[int]string{} // partition → its checkpoint token's _data
	for _, cp := range cps {
		if d, ok := tokenData(cp.Token); ok {
			position[cp.Partition] = d
		}
	}
	dead := make(map[string]bool, len(dlq))
	for _, e := range dlq {
		dead[e.EventID] = true
	}
	for p := 0; p < cfg.Partitions; p++ {
		read, err := readWindow(ctx, cfg, p, from)
		if err != nil {
			return r, err
		}
		if p == 0 {
			for _, at := range read.invalidated {
				r.Notes = append(r.Notes, fmt.Sprintf("the stream was invalidated at %s (its collection or database was dropped or renamed): "+
					"the window is read on after it, as a consumer with on_invalidate restart reads it", FormatTime(at)))
			}
		}
		var before []Event // before the checkpoint: applied, dead-lettered or missing
		for _, ev := range read.events {
			r.Events++
			switch pos, ok := position[p]; {
			case dead[ev.ID]:
				r.DeadLettered++
			case !ok || ev.tokenData > pos:
				r.Pending++
			default:
				before = append(before, ev.Event)
			}
		}
		if len(before) == 0 {
			continue
		}
		if cfg.Ledger == nil {
			r.Unverifiable += len(before)
			continue
		}
		applied, err := seen(ctx, cfg, before)
		if err != nil {
			return r, err
		}
		for _, ev := range before {
			if applied[ev.ID] {
				r.Applied++
				continue
			}
			r.Missing++
			if len(r.MissingEvents) < cfg.ListMissing {
				r.MissingEvents = append(r.MissingEvents, ev)
			}
		}
	}
	sort.Slice(r.MissingEvents, func(i, j int) bool {
		return r.MissingEvents[i].ClusterTime.Before(r.MissingEvents[j].ClusterTime)
	})
	return r, nil
}

// oplogStart finds the oldest cluster time the source's oplog holds, to
// the increment (ferry.Consumer.OplogStart), hint a previous answer.
func oplogStart(ctx context.Context, cfg Config, hint bson.Timestamp) (bson.Timestamp, error) {
	c, err := consumer(cfg, 0)
	if err != nil {
		return bson.Timestamp{}, err
	}
	return c.OplogStart(ctx, hint)
}

// seen looks the events up in the ledger (and in the one of the stream
// this one started from).
func seen(ctx context.Context, cfg Config, evs []Event) (map[string]bool, error) {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	applied, err := cfg.Ledger.SeenMany(ctx, cfg.Stream, ids)
	if err != nil {
		return nil, fmt.Errorf("verify: read the ledger: %w", err)
	}
	if cfg.LedgerAlso != "" {
		var rest []string
		for _, id := range ids {
			if !applied[id] {
				rest = append(rest, id)
			}
		}
		also, err := cfg.Ledger.SeenMany(ctx, cfg.LedgerAlso, rest)
		if err != nil {
			return nil, fmt.Errorf("verify: read the ledger of %s: %w", cfg.LedgerAlso, err)
		}
		for id, ok := range also {
			if ok {
				applied[id] = true
			}
		}
	}
	return applied, nil
}

// tokenData returns a resume token's _data.
func tokenData(tok bson.Raw) (string, bool) {
	if len(tok) == 0 {
		return "", false
	}
	v, err := tok.LookupErr("_data")
	if err != nil {
		return "", false
	}
	return v.StringValueOK()
}

// operationTime is the source's current cluster time.
func operationTime(ctx context.Context, client *mongo.Client) (bson.Timestamp, error) {
	raw, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("verify: read the source's cluster time: %w", err)
	}
	t, i, ok := raw.Lookup("operationTime").TimestampOK()
	if !ok {
		return bson.Timestamp{}, errors.New("verify: the source's reply carries no operationTime")
	}
	return bson.Timestamp{T: t, I: i}, nil
}
