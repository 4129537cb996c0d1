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
//		Options:     []ferry.Option{ferry.WatchCollection("shop", "orders")},
//		Checkpoints: store, Ledger: ledgerStore, DeadLetters: dlq,
//		From:        from, // a cluster time, e.g. an hour ago
//	})
//	fmt.Println(r) // verify: events=N applied=A dead-lettered=D pending=P missing=M
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
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/ledger"
)

// Config says which stream to verify over which window.
type Config struct {
	// Client reaches the source.
	Client *mongo.Client
	// Stream is the stream's name; Options its definition (scope,
	// pipeline, change-stream options), as the consumers run it. Stream,
	// Partition, Checkpoints and DeadLetters are set by Stream itself.
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
	// From is where the window starts (a cluster time still in the oplog);
	// To where it ends (zero: the source's current time when Stream
	// starts).
	From, To bson.Timestamp
	// ListMissing bounds how many missing events the report lists (default
	// 100; they are all counted).
	ListMissing int
}

// Report is the outcome of a verification.
type Report struct {
	Stream       string
	From, To     bson.Timestamp
	Events       int // events of the window, each counted once (control events by partition 0)
	Applied      int // with a ledger entry
	DeadLettered int // with a dead-letter entry
	Pending      int // after their partition's checkpoint
	Missing      int // none of the above: lost
	// Unverifiable counts events before the checkpoint without a
	// dead-letter entry when there is no ledger (at-least-once): applied or
	// lost, Ferry cannot tell.
	Unverifiable int
	// MissingEvents lists missing events (up to Config.ListMissing).
	MissingEvents []Event
	// Notes say what could not be checked.
	Notes []string
}

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
	if cfg.To.IsZero() {
		t, err := operationTime(ctx, cfg.Client)
		if err != nil {
			return Report{}, err
		}
		cfg.To = t
	}
	if cfg.From.IsZero() || !cfg.From.Before(cfg.To) {
		return Report{}, fmt.Errorf("%w: from %d.%d is not before to %d.%d", ErrWindow, cfg.From.T, cfg.From.I, cfg.To.T, cfg.To.I)
	}
	r := Report{Stream: cfg.Stream, From: cfg.From, To: cfg.To}
	cps, err := cfg.Checkpoints.List(ctx, cfg.Stream)
	if err != nil {
		return r, fmt.Errorf("verify: read the checkpoints of %s: %w", cfg.Stream, err)
	}
	position := map[int]string{} // partition → its checkpoint token's _data
	for _, cp := range cps {
		if d, ok := tokenData(cp.Token); ok {
			position[cp.Partition] = d
		}
	}
	dlq, err := cfg.DeadLetters.List(ctx, cfg.Stream, 0)
	if err != nil {
		return r, fmt.Errorf("verify: read the dead letters of %s: %w", cfg.Stream, err)
	}
	dead := make(map[string]bool, len(dlq))
	for _, e := range dlq {
		dead[e.EventID] = true
	}
	if cfg.Ledger == nil {
		r.Notes = append(r.Notes, "at-least-once delivery keeps no ledger: events before the checkpoint without a dead letter are "+
			"applied or lost, which cannot be told apart (unverifiable)")
	} else if age := time.Duration(int64(cfg.To.T)-int64(cfg.From.T)) * time.Second; age > cfg.Ledger.Retention() {
		r.Notes = append(r.Notes, fmt.Sprintf("the window (%v) is longer than the ledger's retention (%v): "+
			"events older than the retention count as missing although they may have been applied", age, cfg.Ledger.Retention()))
	}
	for p := 0; p < cfg.Partitions; p++ {
		events, err := readWindow(ctx, cfg, p)
		if err != nil {
			return r, err
		}
		var before []Event // before the checkpoint: applied, dead-lettered or missing
		for _, ev := range events {
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

// windowEvent is an event of the window with its token's _data, which
// orders it against checkpoints.
type windowEvent struct {
	Event
	tokenData string
}

// readWindow re-reads partition p of the stream from cfg.From to cfg.To.
func readWindow(ctx context.Context, cfg Config, p int) ([]windowEvent, error) {
	opts := append(append([]ferry.Option(nil), cfg.Options...),
		ferry.Stream(cfg.Stream), ferry.Partition(p, cfg.Partitions),
		ferry.Checkpoints(cfg.Checkpoints), ferry.DeadLetters(cfg.DeadLetters),
		ferry.MaxAwaitTime(100*time.Millisecond)) // an idle stream's end is seen sooner
	c, err := ferry.NewConsumer(cfg.Client, func(context.Context, *ferry.Event) error { return nil }, opts...)
	if err != nil {
		return nil, fmt.Errorf("verify: the stream's definition: %w", err)
	}
	cs, err := c.Watch(ctx, cfg.From)
	if err != nil {
		if strings.Contains(err.Error(), "ChangeStreamHistoryLost") || strings.Contains(err.Error(), "(286)") {
			return nil, fmt.Errorf("%w: the oplog no longer reaches back to %d.%d: choose a later -from (%v)", ErrWindow, cfg.From.T, cfg.From.I, err)
		}
		return nil, fmt.Errorf("verify: open partition %d of %s: %w", p, cfg.Stream, err)
	}
	defer cs.Close(context.WithoutCancel(ctx))
	var out []windowEvent
	for {
		if cs.TryNext(ctx) {
			if v, err := cs.Current.LookupErr("splitEvent"); err == nil {
				if n, ok := v.Document().Lookup("fragment").AsInt64OK(); ok && n > 1 {
					continue // a split event counts once, by its first fragment (its event id)
				}
			}
			ev, err := ferry.ParseEvent(cs.Current, p, 0)
			if err != nil {
				return nil, fmt.Errorf("verify: partition %d: %w", p, err)
			}
			if ev.ClusterTime.After(cfg.To) {
				return out, nil
			}
			if ev.DocumentKey == nil && p != 0 && cfg.Partitions > 1 {
				continue // a control event: partition 0 counts it
			}
			d, _ := tokenData(ev.Token)
			out = append(out, windowEvent{Event: Event{ID: ev.ID(), Partition: p, Operation: ev.OperationType, Namespace: ev.Namespace,
				DocumentKey: ev.DocumentKey, ClusterTime: ev.ClusterTime}, tokenData: d})
			continue
		}
		if err := cs.Err(); err != nil {
			return nil, fmt.Errorf("verify: read partition %d of %s: %w", p, cfg.Stream, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// An empty batch: done once the stream's position passed To.
		if tok, err := resumetoken.Parse(cs.ResumeToken()); err == nil && !tok.ClusterTime.Before(cfg.To) {
			return out, nil
		}
	}
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
