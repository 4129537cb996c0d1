package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/lease"
)

const dlqListDoc = `Lists the dead-lettered events of every stream of the configuration (or of
-stream), oldest first: partition, event id (its first 16 characters),
operation, namespace, the event's documentKey (relaxed Extended JSON), the
attempts made, when the last one was made and its whole error (for a
webhook, the status the receiver answered). Document bodies are never
printed.

With -json it prints one JSON object per entry and line instead, with the
whole event id: stream, partition, eventId, kind (change or backfill),
operation, namespace, documentKey (an Extended JSON object, or null),
attempts, firstAttemptAt, lastAttemptAt (RFC 3339) and error.`

const dlqReplayDoc = `Re-delivers the dead-lettered events of every stream of the configuration
(or of -stream) through the stream's sink, once each, as the event the sink
first got: same operation, namespace, documentKey, body and event id, so a
receiver that de-duplicates on the event id recognises the replay. Each
entry the sink acknowledged is removed; the others stay. It prints
"stream S: replayed N, still failing M" for each stream and exits 1 if any
entry still fails. Stop the cause first (fix the receiver, grant the
permission): a replay that fails again changes nothing.

A replay is delivered as the stream's delivery mode delivers: in idempotent
delivery an event the ledger holds already is not delivered again (its
entry is removed), and a delivered one is recorded in the ledger; in
transactional delivery the ledger entry and the sink's writes commit in one
transaction. ferry verify then counts the event applied. At-least-once
delivery keeps no ledger: ferry verify counts a replayed event, like every
applied one, as unverifiable.`

// streamsFlag returns the streams a -stream flag selects: the named one,
// or every stream when it is empty. For an unknown name it prints the
// problem, naming the flag, and returns exit code 2.
func streamsFlag(cfg *config.Config, cmd, name string, stderr io.Writer) ([]*config.Stream, int) {
	if name != "" {
		st := cfg.Stream(name)
		if st == nil {
			fmt.Fprintf(stderr, "ferry %s: -stream: no stream named %q in the configuration\n", cmd, name)
			return nil, 2
		}
		return []*config.Stream{st}, 0
	}
	all := make([]*config.Stream, len(cfg.Streams))
	for i := range cfg.Streams {
		all[i] = &cfg.Streams[i]
	}
	return all, 0
}

// runDLQList lists the dead-letter entries of the configuration's streams.
func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq list")
	stream := fs.String("stream", "", "stream name (default: every stream)")
	n := fs.Int("n", 50, "at most this many entries per stream (0: all)")
	asJSON := fs.Bool("json", false, "one JSON object per entry and line, for scripts")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	streams, code := streamsFlag(cfg, "dlq list", *stream, stderr)
	if streams == nil {
		return code
	}
	return withState(ctx, "dlq list", cfg, stderr, func(ctx context.Context, db *mongo.Database, _ *lease.Store, _ *mongostore.Store) error {
		dlq := deadletter.NewMongo(db, "dlq")
		var entries []deadletter.Entry
		for _, st := range streams {
			list, err := dlq.List(ctx, st.Name, *n)
			if err != nil {
				return err
			}
			entries = append(entries, list...)
		}
		if *asJSON {
			return writeDLQJSON(stdout, entries)
		}
		return writeDLQTable(stdout, entries)
	})
}

// dlqJSONEntry is one line of ferry dlq list -json.
type dlqJSONEntry struct {
	Stream      string          `json:"stream"`
	Partition   int             `json:"partition"`
	EventID     string          `json:"eventId"`
	Kind        string          `json:"kind"`
	Operation   string          `json:"operation"`
	Namespace   string          `json:"namespace"`
	DocumentKey json.RawMessage `json:"documentKey"` // relaxed Extended JSON; null when unknown
	Attempts    int             `json:"attempts"`
	FirstAt     time.Time       `json:"firstAttemptAt"`
	LastAt      time.Time       `json:"lastAttemptAt"`
	Error       string          `json:"error"`
	TraceID     string          `json:"traceId,omitempty"` // the trace of the delivery that gave up, when tracing was on
}

func writeDLQJSON(w io.Writer, entries []deadletter.Entry) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		line := dlqJSONEntry{Stream: e.Stream, Partition: e.Partition, EventID: e.EventID, Kind: entryKind(e),
			Operation: e.Operation, Namespace: e.Namespace, Attempts: e.Attempts,
			FirstAt: e.FirstAt.UTC(), LastAt: e.LastAt.UTC(), Error: e.Error, TraceID: e.TraceID}
		if key, ok := documentKeyJSON(e); ok {
			line.DocumentKey = json.RawMessage(key)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

func writeDLQTable(w io.Writer, entries []deadletter.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stream\tpartition\tevent\toperation\tnamespace\tdocumentKey\tattempts\tlast attempt\terror")
	for _, e := range entries {
		key, ok := documentKeyJSON(e)
		if !ok {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", oneLine(e.Stream), e.Partition, shortEventID(e.EventID),
			oneLine(e.Operation), oneLine(e.Namespace), oneLine(key), e.Attempts, e.LastAt.UTC().Format(time.RFC3339), oneLine(e.Error))
	}
	return tw.Flush()
}

// entryKind is the entry's kind; entries written before it was recorded
// are told by their operation, as ferry.DeadLetterEvent does.
func entryKind(e deadletter.Entry) string {
	switch {
	case e.Kind != "":
		return e.Kind
	case e.Operation == ferry.OperationBackfill:
		return deadletter.KindBackfill
	}
	return deadletter.KindChange
}

// documentKeyJSON is the entry's documentKey as compact relaxed Extended
// JSON. Entries written before the documentKey was recorded get it from
// the event they hold. ok is false when there is none (a control event) or
// it cannot be read.
func documentKeyJSON(e deadletter.Entry) (string, bool) {
	key := e.DocumentKey
	if len(key) == 0 {
		ev, err := ferry.DeadLetterEvent(e)
		if err != nil {
			return "", false
		}
		key = ev.DocumentKey
	}
	if len(key) == 0 {
		return "", false
	}
	out, err := bson.MarshalExtJSON(key, false, false)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// oneLine keeps a table cell on one line and in its column: control
// characters (newlines and tabs in an error or a key) become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// runDLQReplay re-delivers dead-lettered events through their stream's sink
// and removes each entry once its sink acknowledged it. Each entry is turned
// back into the event the handler saw (ferry.DeadLetterEvent): a change
// event or a backfill event (the scanned document), with its original event
// id, so receivers de-duplicate the replay. Without -stream it replays
// every stream of the configuration, one after the other.
func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq replay")
	stream := fs.String("stream", "", "stream name (default: every stream)")
	cfg, code := loadFlags(fs, args, stderr)
	if cfg == nil {
		return code
	}
	streams, code := streamsFlag(cfg, "dlq replay", *stream, stderr)
	if streams == nil {
		return code
	}
	db, closeDB, err := stateDB(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ferry dlq replay:", err)
		return 1
	}
	defer closeDB()
	dlq := deadletter.NewMongo(db, "dlq")
	code = 0
	for _, st := range streams {
		replayed, failed, err := replayStream(ctx, st, db, dlq, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "ferry dlq replay: stream %s: %v\n", st.Name, err)
			code = 1
		}
		fmt.Fprintf(stderr, "stream %s: replayed %d, still failing %d\n", st.Name, replayed, failed)
		if failed > 0 {
			code = 1
		}
	}
	return code
}

// replayStream replays the dead letters of one stream. The sink is only
// built and connected when there is something to replay. err is a failure
// of the stream as a whole (listing, or the sink); failed counts the
// entries that were not delivered.
func replayStream(ctx context.Context, st *config.Stream, db *mongo.Database, dlq *deadletter.Mongo,
	stdout, stderr io.Writer) (replayed, failed int, err error) {
	entries, err := dlq.List(ctx, st.Name, 0)
	if err != nil {
		return 0, 0, err
	}
	if len(entries) == 0 {
		return 0, 0, nil
	}
	s, err := st.NewSink(stdout, db)
	if err != nil {
		return 0, len(entries), err
	}
	if err := s.Connect(ctx); err != nil {
		return 0, len(entries), err
	}
	defer s.Close(context.Background())
	d, err := newReplayDelivery(ctx, st, s, db)
	if err != nil {
		return 0, len(entries), err
	}
	for _, e := range entries {
		// The event as the handler saw it, change or backfill event, with
		// its original event id (the receiver's idempotency key).
		ev, err := ferry.DeadLetterEvent(e)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "stream %s: event %s: %v\n", st.Name, shortEventID(e.EventID), err) // names the entry and the way out
			continue
		}
		applied, err := d.deliver(ctx, ev, max(e.Partition, 0), max(e.Epoch, 0))
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "stream %s: event %s: still failing: %v\n", st.Name, shortEventID(e.EventID), err)
			continue
		}
		if !applied {
			fmt.Fprintf(stderr, "stream %s: event %s: the ledger holds it already: not delivered again\n", st.Name, shortEventID(e.EventID))
		}
		if err := dlq.Delete(ctx, st.Name, e.EventID); err != nil {
			fmt.Fprintf(stderr, "stream %s: event %s: delivered but not removed from the dead-letter store: %v\n",
				st.Name, shortEventID(e.EventID), err)
			continue
		}
		replayed++
	}
	return replayed, failed, nil
}

func shortEventID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
