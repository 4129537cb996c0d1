package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/ledger"
	"github.com/ferry-io/ferry/verify"
)

const verifyDoc = `Re-reads a window of the stream with its definition (scope, pipeline,
options, partitions), from a cluster time the oplog still holds, and
checks every event: applied (a ledger entry, in idempotent and
transactional delivery), dead-lettered (ferry dlq list), or pending (after
its partition's checkpoint). Anything else is missing: a change whose
effect was lost. It prints

  verify: events=N applied=A dead-lettered=D pending=P missing=M
  window: 2026-12-01T15:09:31Z (#388) to 2026-12-01T16:09:30Z (#5)

(cluster times in UTC, with the increment that orders the changes of one
second) and lists the missing events by short event id, operation,
namespace and documentKey. An invalidate (the collection dropped or
renamed) does not end the read: it goes on after it. With the mongodb sink
it also diffs the source collection and the projection document by
document (missing, extra, stale). With at-least-once delivery there is no
ledger: events before the checkpoint are counted as unverifiable (a
replayed dead letter too).

The window: -since D (default 1h) before now, or -from TIME (RFC 3339),
up to -to TIME (default now; a later time is now). A -since window the
oplog does not hold starts at the oplog's start, its oldest entry to the
increment, and a note says how much of the window is gone; a -from the
oplog does not hold is refused, naming the oplog's start.

The exit code is 0 only when nothing is missing (and the projection equals
the source), 1 otherwise. It is 1 also when the window read no change while
the state store shows the stream active in it — ledger entries applied in
the window, a checkpoint at (or pending on) a change in it, dead letters of
changes in it — and then a "fail:" line says so: nothing was checked (the
oplog no longer holds those changes), and a pass would be false.`

// runVerify is `ferry verify`.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify")
	stream := fs.String("stream", "", "stream name (required)")
	since := fs.Duration("since", time.Hour, "the window: this long before now")
	from := fs.String("from", "", "the window's start, RFC 3339 (instead of -since)")
	to := fs.String("to", "", "the window's end, RFC 3339 (default now)")
	n := fs.Int("n", 100, "list at most this many missing events")
	cfg, code := loadFlags(fs, args, stderr, readOnlyButProjection)
	if cfg == nil {
		return code
	}
	st := cfg.Stream(*stream)
	if st == nil {
		fmt.Fprintf(stderr, "ferry verify: -stream: no stream named %q in the configuration\n", *stream)
		return 2
	}
	w := window{since: *since}
	for _, f := range []struct {
		name string
		v    string
		dst  *time.Time
	}{{"-from", *from, &w.from}, {"-to", *to, &w.to}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.v)
		if err != nil {
			fmt.Fprintf(stderr, "ferry verify: %s: %q is not an RFC 3339 time such as 2026-12-01T12:00:00Z\n", f.name, f.v)
			return 2
		}
		*f.dst = t
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep, proj, err := verifyStream(ctx, cfg, st, w, *n)
	if err != nil {
		fmt.Fprintln(stderr, "ferry verify:", err)
		if errors.Is(err, verify.ErrWindow) && *from != "" {
			fmt.Fprintln(stderr, "ferry verify: choose a -from the oplog holds, or -since: a -since window the oplog does not hold starts at its start")
		}
		return 1
	}
	fmt.Fprintln(stdout, rep)
	fmt.Fprintln(stdout, "window:", rep.Window())
	for _, ev := range rep.MissingEvents {
		key, _ := bson.MarshalExtJSON(ev.DocumentKey, false, false)
		if ev.DocumentKey == nil {
			key = []byte("-")
		}
		fmt.Fprintf(stdout, "missing: %s %s %s %s\n", ev.ShortID(), ev.Operation, ev.Namespace, key)
	}
	for _, note := range rep.Notes {
		fmt.Fprintln(stdout, "note:", note)
	}
	if rep.Failure != "" {
		fmt.Fprintln(stdout, "fail:", rep.Failure)
	}
	if proj != nil {
		fmt.Fprintln(stdout, proj)
		for _, l := range []struct {
			what string
			ids  []bson.RawValue
		}{{"missing", proj.MissingIDs}, {"extra", proj.ExtraIDs}, {"stale", proj.StaleIDs}} {
			for _, id := range l.ids {
				key, _ := bson.MarshalExtJSON(bson.D{{Key: "_id", Value: id}}, false, false)
				fmt.Fprintf(stdout, "projection %s: %s\n", l.what, key)
			}
		}
	}
	if !rep.OK() || proj != nil && !proj.Clean() {
		return 1
	}
	return 0
}

// window is verify's window: since before now, or from..to.
type window struct {
	since    time.Duration
	from, to time.Time
}

// verifyStream runs the verification of one stream of the configuration
// (and the projection diff for the mongodb sink).
func verifyStream(ctx context.Context, cfg *config.Config, st *config.Stream, w window, n int) (verify.Report, *verify.ProjectionReport, error) {
	if cfg.State.Bolt != nil {
		return verify.Report{}, nil, fmt.Errorf("state.bolt: verify needs a MongoDB state store (state.uri)")
	}
	src, err := mongo.Connect(options.Client().ApplyURI(st.Source.URI.Reveal()))
	if err != nil {
		return verify.Report{}, nil, fmt.Errorf("connect to %s: %w", st.Source.URI, err)
	}
	defer src.Disconnect(context.Background())
	state, closeState, err := stateDB(ctx, cfg)
	if err != nil {
		return verify.Report{}, nil, err
	}
	defer closeState()
	return verifyWith(ctx, src, state, st, w, n)
}

// verifyWith verifies st with connected clients (the daemon reuses its own).
func verifyWith(ctx context.Context, src *mongo.Client, state *mongo.Database, st *config.Stream, w window, n int) (verify.Report, *verify.ProjectionReport, error) {
	cps, err := mongostore.New(state)
	if err != nil {
		return verify.Report{}, nil, err
	}
	copts, err := st.ConsumerOptions(cps)
	if err != nil {
		return verify.Report{}, nil, err
	}
	now, err := serverClock(ctx, src)
	if err != nil {
		now = time.Now()
	}
	from, to := w.from, w.to
	if from.IsZero() {
		from = now.Add(-w.since)
	}
	vc := verify.Config{Client: src, Stream: st.Name, Options: copts, Partitions: st.Group.Partitions,
		Checkpoints: cps, DeadLetters: deadletter.NewMongo(state, "dlq"), ListMissing: n,
		From: bson.Timestamp{T: uint32(from.Unix())}, FromOplogStart: w.from.IsZero()}
	if !to.IsZero() {
		vc.To = bson.Timestamp{T: uint32(to.Unix()), I: ^uint32(0)}
	}
	if st.Delivery.Mode != group.AtLeastOnce {
		l, err := ledger.New(ctx, state)
		if err != nil {
			return verify.Report{}, nil, err
		}
		vc.Ledger = l
		if st.Source.StartAt.Kind == "checkpoints" {
			vc.LedgerAlso = st.Source.StartAt.Stream
		}
	}
	rep, err := verify.Stream(ctx, vc)
	if err != nil {
		return rep, nil, err
	}
	if m := st.Sink.MongoDB; m != nil && st.Source.Scope.Collection != "" {
		source := src.Database(st.Source.Scope.Database).Collection(st.Source.Scope.Collection)
		target := state.Client().Database(m.Database).Collection(m.Collection)
		p, err := verify.Projection(ctx, source, target, 20)
		if err != nil {
			return rep, nil, err
		}
		if rep.Pending > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d events are pending: stale projection documents may only be not applied yet", rep.Pending))
		}
		return rep, &p, nil
	}
	return rep, nil, nil
}
