package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/lease"
)

// The snapshot commands write an operator's request for a snapshot of a
// live stream to the state store (checkpoint.SnapshotRequests), cancel it,
// and read each partition's progress from its checkpoint (ferry.SnapshotOf).
// The members do the work: each partition's owner polls the store every
// snapshot.poll_interval, takes the request up without a restart, and
// records its progress with its checkpoint after every chunk.

func snapshotCommand() *command {
	return &command{
		name: "snapshot", args: "-c ferry.yaml -stream S [-filter '{json}'] [-note text] [-wait]",
		summary: "re-deliver a live stream's documents (or those a filter matches) as backfill events",
		doc:     snapshotDoc,
		run:     runSnapshotRequest,
		sub: []*command{
			{name: "snapshot status", args: "-c ferry.yaml [-stream S] [-json]",
				summary: "each partition's snapshot: done of estimated, rate, ETA, chunks; the pending request",
				doc:     snapshotStatusDoc, run: runSnapshotStatus},
			{name: "snapshot cancel", args: "-c ferry.yaml -stream S [-id ID]",
				summary: "cancel a stream's requested snapshot: members stop it at their next chunk",
				doc:     snapshotCancelDoc, run: runSnapshotCancel},
		},
	}
}

const snapshotDoc = `Asks the members of a running stream to snapshot it: each partition reads
the documents of its share of the stream's scope, in chunks of
snapshot.chunk_size at snapshot.max_rate at most, and delivers them to the
sink as events with operationType "backfill", beside the stream's changes
and ordered with them (a document changed meanwhile ends in its latest
state). With -filter only the documents that match it are delivered: a query
filter in Extended JSON, such as '{"status": "open"}' or
'{"_id": {"$gte": {"$oid": "…"}}}'. Use it to load a new sink, or to deliver
a subset again after a receiver lost or mishandled it.

The request is written to the state store (state.uri, or state.bolt while
ferry run is stopped); each partition's owner picks it up within
snapshot.poll_interval, without a restart, and a new member taking a
partition over goes on at its first chunk not finished. A stream has one
current request: a new one replaces it, and partitions still running the
old one stop it at their next chunk.

Without -wait it prints the request's id and how to follow it. With -wait
it follows the snapshot until every partition finished it: a progress bar
(percent, documents done of the estimated total, rate, ETA) on a terminal,
a plain line every few seconds otherwise. It exits 0 when every partition
finished, 1 when the snapshot was cancelled or replaced, or a partition
stopped (stalled, invalidated). Ctrl-C stops waiting and exits 130; it does
not cancel the snapshot: ferry snapshot cancel does.`

const snapshotStatusDoc = `Prints, per stream and partition, the partition's snapshot in progress or
its last one, read from its checkpoint: the snapshot's id; why it runs
(start: start_at backfill, history-lost: on_history_lost backfill, request:
ferry snapshot); its state (running, finished, cancelled); documents done of
the estimated total and the percentage; the average rate since it started
and the time left at that rate; the chunks finished (a restart goes on at
the next one); and whether a filter selects the documents. Then the stream's
current request, if any: its id, when it was made, its filter and note,
and which partitions have not taken it up yet. With -json it prints the
same as one JSON document.`

const snapshotCancelDoc = `Cancels the stream's current snapshot request. Each partition running it
stops at its next chunk (within snapshot.poll_interval of one) and records
it cancelled; the documents of the chunks it finished were delivered, no
others are. Partitions that had not taken it up never will. With -id it
cancels only that request: if another replaced it meanwhile, nothing is
cancelled. Snapshots of start_at: backfill and on_history_lost: backfill
cannot be cancelled: the stream needs them.`

// snapshotState is the configured state store as the snapshot commands
// use it: checkpoints and requests, and the live members where the store
// records them (MongoDB).
type snapshotState struct {
	where string // "state.uri" or "state.bolt.path", for messages
	cps   checkpoint.Store
	reqs  checkpoint.SnapshotRequests
	// list returns the stream's decodable checkpoints and a note per
	// corrupt record.
	list    func(ctx context.Context, stream string) ([]checkpoint.Checkpoint, []string, error)
	members func(ctx context.Context, stream string) (int, error) // nil: not recorded (bolt)
	close   func()
}

// snapshotRequests returns the snapshot requests of store, or an error
// saying that it keeps none.
func snapshotRequests(store checkpoint.Store, where string) (checkpoint.SnapshotRequests, error) {
	reqs, ok := store.(checkpoint.SnapshotRequests)
	if !ok {
		return nil, fmt.Errorf("%s: this state store (%T) does not keep snapshot requests (checkpoint.SnapshotRequests); "+
			"use a MongoDB state store (state.uri) or state.bolt", where, store)
	}
	return reqs, nil
}

// openSnapshotState opens the configuration's state store. A bolt file is
// locked by the ferry run using it, so it can be opened only while that
// is stopped; it is not created when it does not exist.
func openSnapshotState(ctx context.Context, cfg *config.Config) (*snapshotState, error) {
	if cfg.State.Bolt != nil {
		path := cfg.State.Bolt.Path
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("state.bolt.path: %s: %v (ferry run creates it; run it once first)", path, describeErr(err))
		}
		store, err := boltstore.Open(path, boltstore.LockTimeout(2*time.Second))
		if errors.Is(err, boltstore.ErrLocked) {
			return nil, fmt.Errorf("state.bolt.path: %s is locked by the ferry run that uses it (a bolt file is open in one process at a time): "+
				"stop it, request the snapshot, and start it again (it takes the request up at once); "+
				"a MongoDB state store (state.uri) takes requests while the members run", path)
		}
		if err != nil {
			return nil, fmt.Errorf("state.bolt.path: %w", err)
		}
		reqs, err := snapshotRequests(store, "state.bolt")
		if err != nil {
			_ = store.Close()
			return nil, err
		}
		return &snapshotState{where: "state.bolt.path", cps: store, reqs: reqs,
			list: func(ctx context.Context, stream string) ([]checkpoint.Checkpoint, []string, error) {
				cps, err := store.List(ctx, stream)
				return cps, nil, err
			},
			close: func() { _ = store.Close() }}, nil
	}
	db, closeDB, err := stateDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ms, err := mongostore.New(db)
	if err != nil {
		closeDB()
		return nil, err
	}
	ls, err := lease.New(db)
	if err != nil {
		closeDB()
		return nil, err
	}
	reqs, err := snapshotRequests(ms, "state.uri")
	if err != nil {
		closeDB()
		return nil, err
	}
	return &snapshotState{where: "state.uri", cps: ms, reqs: reqs,
		list: func(ctx context.Context, stream string) ([]checkpoint.Checkpoint, []string, error) {
			recs, err := ms.Records(ctx, stream)
			if err != nil {
				return nil, nil, err
			}
			var notes []string
			for _, r := range recs {
				if r.Corrupt != nil {
					notes = append(notes, fmt.Sprintf("partition %d: corrupt checkpoint record %s (%s)", r.Partition, r.Corrupt.Record, r.Corrupt.Problem))
				}
			}
			return readable(recs), notes, nil
		},
		members: func(ctx context.Context, stream string) (int, error) {
			m, err := liveMembers(ctx, ls, stream)
			return len(m), err
		},
		close: closeDB}, nil
}

func describeErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// streamFlag returns the stream -stream names; for none or an unknown one
// it prints the problem, naming the flag and the configured streams, and
// returns exit code 2.
func streamFlag(cfg *config.Config, cmd, name string, stderr io.Writer) (*config.Stream, int) {
	if st := cfg.Stream(name); st != nil {
		return st, 0
	}
	names := make([]string, len(cfg.Streams))
	for i, s := range cfg.Streams {
		names[i] = s.Name
	}
	problem := fmt.Sprintf("no stream named %q in the configuration", name)
	if name == "" {
		problem = "required: name the stream"
	}
	fmt.Fprintf(stderr, "ferry %s: -stream: %s (streams: %s)\n", cmd, problem, strings.Join(names, ", "))
	return nil, 2
}

// maxNote bounds -note.
const maxNote = 1000

// parseFilter reads -filter: a query filter as Extended JSON, canonical or
// relaxed. Empty, or {}, is every document (nil).
func parseFilter(s string) (bson.Raw, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var doc bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &doc); err != nil {
		return nil, fmt.Errorf("-filter: not a JSON document (%v); write a query filter in Extended JSON, such as '{\"status\": \"open\"}' or '{\"k\": {\"$lt\": 300}}'", err)
	}
	if len(doc) == 0 {
		return nil, nil
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("-filter: %v", err)
	}
	return raw, nil
}

// checkFilter asks the source whether it accepts filter (one find of at
// most one document) when the stream watches one collection: a filter the
// server refuses (an unknown operator) would fail every chunk. It returns
// a refusal as an error naming -filter; other failures (the source cannot
// be reached) as a warning.
func checkFilter(ctx context.Context, st *config.Stream, filter bson.Raw) (warning string, err error) {
	sc := st.Source.Scope
	if len(filter) == 0 || sc.Collection == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(st.Source.URI.Reveal()).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		return fmt.Sprintf("-filter not checked against the source: %v", err), nil
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	err = client.Database(sc.Database).RunCommand(ctx, bson.D{{Key: "find", Value: sc.Collection}, {Key: "filter", Value: filter},
		{Key: "limit", Value: int64(1)}, {Key: "singleBatch", Value: true}}).Err()
	var se mongo.ServerError
	if errors.As(err, &se) {
		return "", fmt.Errorf("-filter: the source refuses it as a query filter of %s.%s: %v", sc.Database, sc.Collection, err)
	}
	if err != nil {
		return fmt.Sprintf("-filter not checked against the source: %v", err), nil
	}
	return "", nil
}

// runSnapshotRequest is `ferry snapshot`: it records a request for a
// snapshot of the stream and, with -wait, follows it to its end.
func runSnapshotRequest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("snapshot")
	stream := fs.String("stream", "", "stream name (required)")
	filterText := fs.String("filter", "", "only the documents this query filter matches, as Extended JSON (default: every document)")
	note := fs.String("note", "", "who asks and why, kept with the request (at most 1000 bytes)")
	wait := fs.Bool("wait", false, "follow the snapshot until every partition finished it (Ctrl-C stops waiting, not the snapshot)")
	interval := fs.Duration("interval", time.Second, "with -wait, how often the progress is read")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	st, code := streamFlag(cfg, "snapshot", *stream, stderr)
	if st == nil {
		return code
	}
	filter, err := parseFilter(*filterText)
	if err != nil {
		fmt.Fprintln(stderr, "ferry snapshot:", err)
		return 2
	}
	if len(*note) > maxNote || !utf8.ValidString(*note) {
		fmt.Fprintf(stderr, "ferry snapshot: -note: at most %d bytes of UTF-8 text, got %d bytes\n", maxNote, len(*note))
		return 2
	}
	if *interval < 100*time.Millisecond {
		fmt.Fprintf(stderr, "ferry snapshot: -interval: at least 100ms, got %v\n", *interval)
		return 2
	}
	if *wait && cfg.State.Bolt != nil {
		fmt.Fprintln(stderr, "ferry snapshot: -wait needs a MongoDB state store (state.uri): the ferry run using state.bolt keeps the file locked, "+
			"so its progress cannot be read from another process; leave -wait out and follow the snapshot in ferry run's log and /status")
		return 2
	}
	if warning, err := checkFilter(ctx, st, filter); err != nil {
		fmt.Fprintln(stderr, "ferry snapshot:", err)
		return 2
	} else if warning != "" {
		fmt.Fprintln(stderr, "ferry snapshot: warning:", warning)
	}
	cfgPath := fs.Lookup("c").Value.String()
	opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	state, err := openSnapshotState(opCtx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ferry snapshot:", err)
		return 1
	}
	defer state.close()
	prev, prevErr := state.reqs.SnapshotRequest(opCtx, st.Name)
	req, err := state.reqs.RequestSnapshot(opCtx, checkpoint.SnapshotRequest{Stream: st.Name, Filter: filter, Note: *note})
	if err != nil {
		fmt.Fprintln(stderr, "ferry snapshot:", err)
		return 1
	}
	what := "every document"
	if len(filter) > 0 {
		what = "the documents matching " + relaxedJSON(filter)
	}
	fmt.Fprintf(stdout, "snapshot requested: stream %s, request %s, %s\n", st.Name, req.ID, what)
	if prevErr == nil && !prev.Cancelled && prev.ID != req.ID {
		if running := runningRequest(opCtx, state, st, prev.ID); running > 0 {
			fmt.Fprintf(stdout, "it replaces request %s, which %s still running: they stop it at their next chunk\n", prev.ID, partitionsVerb(running))
		}
	}
	if n := liveCount(opCtx, state, st.Name); n == 0 {
		fmt.Fprintf(stdout, "stream %s has no live member: the first ferry run of it takes the request up when it starts\n", st.Name)
	} else {
		fmt.Fprintf(stdout, "each partition's owner takes it up within %v (snapshot.poll_interval)\n", st.Snapshot.PollInterval)
	}
	if !*wait {
		fmt.Fprintf(stdout, "follow it:  ferry snapshot status -c %s -stream %s\n", cfgPath, st.Name)
		fmt.Fprintf(stdout, "cancel it:  ferry snapshot cancel -c %s -stream %s -id %s\n", cfgPath, st.Name, req.ID)
		return 0
	}
	cancel()
	w := &snapshotWait{state: state, stream: st, id: req.ID, interval: *interval, out: stdout, tty: isTerminal(stdout),
		cfgPath: cfgPath}
	return w.run(ctx)
}

// liveCount is the stream's live members (-1: the store does not record
// them, or they cannot be read).
func liveCount(ctx context.Context, state *snapshotState, stream string) int {
	if state.members == nil {
		return -1
	}
	n, err := state.members(ctx, stream)
	if err != nil {
		return -1
	}
	return n
}

// runningRequest counts the partitions whose snapshot of request id runs.
func runningRequest(ctx context.Context, state *snapshotState, st *config.Stream, id string) int {
	parts, _, err := readSnapshots(ctx, state, st)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range parts {
		if p.has && p.progress.Request == id && p.progress.Running() {
			n++
		}
	}
	return n
}

func partitionsVerb(n int) string {
	if n == 1 {
		return "1 partition is"
	}
	return fmt.Sprintf("%d partitions are", n)
}

// partitionSnapshot is a partition's snapshot as its checkpoint records it.
type partitionSnapshot struct {
	partition  int
	checkpoint bool // the partition has a checkpoint
	state      checkpoint.State
	note       string
	has        bool // the checkpoint records a snapshot
	progress   ferry.SnapshotProgress
	problem    string // the snapshot record cannot be read
}

// readSnapshots reads the snapshot of each of the stream's partitions (and
// of any partition beyond the configured count that has a checkpoint),
// with notes on the records that cannot be read.
func readSnapshots(ctx context.Context, state *snapshotState, st *config.Stream) ([]partitionSnapshot, []string, error) {
	cps, notes, err := state.list(ctx, st.Name)
	if err != nil {
		return nil, nil, err
	}
	n := st.Group.Partitions
	for _, cp := range cps {
		n = max(n, cp.Partition+1)
	}
	out := make([]partitionSnapshot, n)
	for i := range out {
		out[i].partition = i
	}
	for _, cp := range cps {
		p := &out[cp.Partition]
		p.checkpoint, p.state, p.note = true, cp.State, cp.Note
		prog, ok, err := ferry.SnapshotOf(cp)
		if err != nil {
			p.problem = err.Error()
			continue
		}
		p.has, p.progress = ok, prog
	}
	return out, notes, nil
}

// relaxedJSON is doc as relaxed Extended JSON, as operators write it.
func relaxedJSON(doc bson.Raw) string {
	b, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		return doc.String()
	}
	return string(b)
}

// isTerminal reports whether w is a terminal (a character device), where
// -wait draws a bar that it redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return os.Getenv("TERM") != "dumb"
}

// runSnapshotCancel is `ferry snapshot cancel`.
func runSnapshotCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("snapshot cancel")
	stream := fs.String("stream", "", "stream name (required)")
	id := fs.String("id", "", "cancel only this request (default: the stream's current one)")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	st, code := streamFlag(cfg, "snapshot cancel", *stream, stderr)
	if st == nil {
		return code
	}
	return withSnapshotState(ctx, "snapshot cancel", cfg, stderr, func(ctx context.Context, state *snapshotState) error {
		req, err := state.reqs.SnapshotRequest(ctx, st.Name)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return fmt.Errorf("stream %s has no snapshot request to cancel%s", st.Name, otherSnapshots(ctx, state, st))
		}
		if err != nil {
			return err
		}
		if *id != "" && req.ID != *id {
			return fmt.Errorf("-id: request %s is not the stream's current request (%s): it was replaced, and its partitions stopped it at their next chunk; nothing cancelled", *id, req.ID)
		}
		if req.Cancelled {
			fmt.Fprintf(stdout, "request %s of stream %s was cancelled already\n", req.ID, st.Name)
			return nil
		}
		if err := state.reqs.CancelSnapshot(ctx, st.Name, req.ID); err != nil {
			if errors.Is(err, checkpoint.ErrNotFound) {
				return fmt.Errorf("request %s was replaced while it was being cancelled; nothing cancelled: %w", req.ID, err)
			}
			return err
		}
		running := runningRequest(ctx, state, st, req.ID)
		fmt.Fprintf(stdout, "request %s of stream %s cancelled", req.ID, st.Name)
		switch {
		case running == 1:
			fmt.Fprintf(stdout, ": the partition running it stops at its next chunk, within %v (snapshot.poll_interval) of one", st.Snapshot.PollInterval)
		case running > 1:
			fmt.Fprintf(stdout, ": the %d partitions running it stop at their next chunk, within %v (snapshot.poll_interval) of one", running, st.Snapshot.PollInterval)
		}
		fmt.Fprintf(stdout, "\nsee it:  ferry snapshot status -c %s -stream %s\n", fs.Lookup("c").Value.String(), st.Name)
		return nil
	})
}

// withSnapshotState opens the configuration's state store (with a 15 s
// budget), runs fn and reports its error as "ferry <name>: ...", exit
// code 1.
func withSnapshotState(ctx context.Context, name string, cfg *config.Config, stderr io.Writer,
	fn func(ctx context.Context, state *snapshotState) error) int {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := func() error {
		state, err := openSnapshotState(ctx, cfg)
		if err != nil {
			return err
		}
		defer state.close()
		return fn(ctx, state)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "ferry %s: %v\n", name, err)
		return 1
	}
	return 0
}

// otherSnapshots says which partitions run a snapshot that is not a
// request (start, history-lost), which cancel cannot stop.
func otherSnapshots(ctx context.Context, state *snapshotState, st *config.Stream) string {
	parts, _, err := readSnapshots(ctx, state, st)
	if err != nil {
		return ""
	}
	var running []string
	for _, p := range parts {
		if p.has && p.progress.Running() && p.progress.Reason != ferry.SnapshotForRequest {
			running = append(running, fmt.Sprintf("%d (%s)", p.partition, p.progress.Reason))
		}
	}
	if len(running) == 0 {
		return ""
	}
	return fmt.Sprintf("; partition(s) %s run a snapshot the stream itself needs, which cannot be cancelled", strings.Join(running, ", "))
}
