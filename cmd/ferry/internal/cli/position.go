package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/lease"
)

const positionShowDoc = `Prints the oplog window of each stream's source (the cluster time of the
oldest entry its oplog holds, and how much history that is) and every
partition's position: where it resumes, its head-room (its position minus
the start of the window: how long until the oplog no longer holds it and
the stream fails with lost history), its state, version and epoch. A
partition whose position is already outside the window says how much
history was lost. The window is found by probing the source with change
streams opened at cluster times (no access to local.oplog.rs is needed).`

const positionSetDoc = `Sets where a stopped stream resumes: every partition's checkpoint is
replaced, in one transaction and compare-and-set against the checkpoints
read, by one of

  -time T                 the changes from cluster time T (RFC 3339) on
  -token-from-dlq ID      the change after a dead-lettered event (its event
                          id, or the start of it that ferry dlq list shows)
  -at-checkpoint-of S     the oldest position of stream S's checkpoints (S
                          may be the stream itself: it then adopts a changed
                          definition where it stands, redelivering from its
                          oldest partition's position on)

The checkpoints are written with the stream's configured definition, so
the members run it as configured. It refuses while members of the stream
are live (failed members are not live: they are asked to re-check, and
resume from the new position within 10 s). It prints, per partition, what
the new position means: changes delivered again (receivers de-duplicate on
the event id; the ledger absorbs them in idempotent and transactional
delivery) or changes skipped, which it writes only with -yes.

A position before the start of the oplog window is refused, with the size
of the gap: those changes are gone. With -allow-gap it sets the start of
the window instead, and says how much history that leaves out. A time
after the source's current time (by its clock) is refused, -yes or not.

A checkpoint record that cannot be read (a field of the wrong type or
missing, edited by hand or damaged) is overwritten with the new position,
without being decoded: only if it is still exactly as read. The plan names
it by its collection and _id; its old position is unknown, so what the new
one skips for that partition cannot be said.`

// runPositionShow prints the oplog window and every partition's position.
func runPositionShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("position show")
	stream := fs.String("stream", "", "stream name (default: every stream)")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	streams, code := streamsFlag(cfg, "position show", *stream, stderr)
	if streams == nil {
		return code
	}
	return withState(ctx, "position show", cfg, stderr, func(ctx context.Context, db *mongo.Database, _ *lease.Store, cps *mongostore.Store) error {
		for _, st := range streams {
			if err := showPositions(ctx, st, db, cps, stdout); err != nil {
				return err
			}
		}
		return nil
	})
}

func showPositions(ctx context.Context, st *config.Stream, db *mongo.Database, cps *mongostore.Store, stdout io.Writer) error {
	w, err := oplogWindowOf(ctx, st, cps)
	if err != nil {
		return err
	}
	recs, err := cps.Records(ctx, st.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stream %s: %s\n", st.Name, w)
	if len(recs) == 0 {
		fmt.Fprintf(stdout, "  no checkpoints: its next ferry run starts from source.start_at (%s)\n", startAtName(st.Source.StartAt))
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  partition\tposition\thead-room\tstate\tversion\tepoch\tupdated")
	for _, r := range recs {
		if r.Corrupt != nil {
			fmt.Fprintf(tw, "  %d\t-\t-\tcorrupt: record %s: %s\t-\t-\t-\n", r.Partition, r.Corrupt.Record, r.Corrupt.Problem)
			continue
		}
		cp := r.Checkpoint
		pos, known := positionOf(cp)
		at, room := "-", "-"
		if known {
			at = tsText(pos)
			room = headroomText(pos, w.start)
		}
		if cp.Token == nil && known {
			at += " (a start time)"
		}
		state := string(cp.State)
		if state == "" {
			state = "running"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%d\t%s\n", cp.Partition, at, room, state, cp.Version, cp.Epoch,
			ageOf(w.now, cp.UpdatedAt))
	}
	return tw.Flush()
}

// oplogWindow is the history a stream's source holds.
type oplogWindow struct {
	start bson.Timestamp // the oldest entry's cluster time
	now   time.Time      // the source's clock
}

func (w oplogWindow) String() string {
	span := w.now.Sub(tsTime(w.start)).Round(time.Second)
	return fmt.Sprintf("oplog window from %s (%s of history)", tsText(w.start), span)
}

// oplogWindowOf probes the stream's source for the start of its oplog.
func oplogWindowOf(ctx context.Context, st *config.Stream, cps checkpoint.Store) (oplogWindow, error) {
	src, closeSrc, err := sourceClient(st)
	if err != nil {
		return oplogWindow{}, err
	}
	defer closeSrc()
	cons, err := toolConsumer(st, src, cps)
	if err != nil {
		return oplogWindow{}, err
	}
	start, err := cons.OplogStart(ctx, bson.Timestamp{})
	if err != nil {
		return oplogWindow{}, err
	}
	now, err := serverClock(ctx, src)
	if err != nil {
		now = time.Now()
	}
	return oplogWindow{start: start, now: now}, nil
}

// sourceClient connects to the stream's source.
func sourceClient(st *config.Stream) (*mongo.Client, func(), error) {
	client, err := mongo.Connect(options.Client().ApplyURI(st.Source.URI.Reveal()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", st.Source.URI, err)
	}
	return client, func() { _ = client.Disconnect(context.Background()) }, nil
}

// toolConsumer is a consumer of the stream as configured, for tools that
// read its definition or probe its source; it is never run.
func toolConsumer(st *config.Stream, src *mongo.Client, cps checkpoint.Store, extra ...ferry.Option) (*ferry.Consumer, error) {
	copts, err := st.ConsumerOptions(cps)
	if err != nil {
		return nil, err
	}
	// Never run: what it would write to and do with poison does not matter.
	copts = append(copts, ferry.Stream(st.Name), ferry.Partition(0, max(st.Group.Partitions, 1)),
		ferry.Checkpoints(cps), ferry.OnPoison(ferry.PoisonStall))
	copts = append(copts, extra...)
	return ferry.NewConsumer(src, func(context.Context, *ferry.Event) error { return nil }, copts...)
}

// positionConsumer is the consumer whose definition ferry position set
// writes: the stream as configured, under the partitioning its members
// run with. With group.partitioning unset that is the one its checkpoints
// resolve to (ferry.ResolvePartitioning: a stream that checkpointed under
// hash-mod keeps it, as its members do), said on stdout; with checkpoints
// of both, hash-range, the default: every partition is set to the one
// position, so the partitioning changes there without losing a change.
func positionConsumer(ctx context.Context, st *config.Stream, src *mongo.Client, cps checkpoint.Store, stdout io.Writer) (*ferry.Consumer, error) {
	cons, err := toolConsumer(st, src, cps)
	if err != nil || st.Group.Partitioning != "" || st.Group.Partitions <= 1 {
		return cons, err
	}
	copts, err := st.ConsumerOptions(cps)
	if err != nil {
		return nil, err
	}
	copts = append(copts, ferry.Partition(0, st.Group.Partitions))
	p, adopted, err := ferry.ResolvePartitioning(ctx, cps, copts...)
	switch {
	case errors.Is(err, ferry.ErrIdentityChanged):
		fmt.Fprintf(stdout, "the checkpoints were written under two partitionings: the positions are written under %s, the default "+
			"(set group.partitioning to choose)\n", ferry.HashRange)
		return cons, nil
	case err != nil:
		return nil, err
	case !adopted:
		return cons, nil
	}
	fmt.Fprintf(stdout, "the stream keeps %s partitioning (its checkpoints were written under it; set group.partitioning: %s "+
		"to move it to %s at this position)\n", p, ferry.HashRange, ferry.HashRange)
	return toolConsumer(st, src, cps, ferry.WithPartitioning(p))
}

// positionOf is where a checkpoint resumes: its resume token's cluster
// time, or its recorded ClusterTime (a start time without a token, or a
// token that cannot be decoded). known is false when it records neither.
func positionOf(cp checkpoint.Checkpoint) (ts bson.Timestamp, known bool) {
	ts = cp.ClusterTime
	if tok, err := resumetoken.Parse(cp.Token); err == nil && !tok.ClusterTime.IsZero() {
		ts = tok.ClusterTime
	}
	return ts, !ts.IsZero()
}

func tsTime(ts bson.Timestamp) time.Time { return time.Unix(int64(ts.T), 0).UTC() }

// tsText is a cluster time as an operator reads it: RFC 3339, and the
// increment when there is one.
func tsText(ts bson.Timestamp) string {
	s := tsTime(ts).Format(time.RFC3339)
	if ts.I > 0 {
		s += fmt.Sprintf(" (#%d)", ts.I)
	}
	return s
}

// gapSeconds is how many seconds from a to b, rounded up (0 when b is not
// after a).
func gapSeconds(a, b bson.Timestamp) int64 {
	if !b.After(a) {
		return 0
	}
	d := int64(b.T) - int64(a.T)
	if b.I > a.I || d == 0 {
		d++
	}
	return d
}

// headroomText is a position's head-room in the window starting at start.
func headroomText(pos, start bson.Timestamp) string {
	if pos.Before(start) {
		return fmt.Sprintf("history lost (%d s before the window)", gapSeconds(pos, start))
	}
	return (time.Duration(int64(pos.T)-int64(start.T)) * time.Second).String()
}

// positionTarget is the position ferry position set writes: every
// partition starts at ts, except that with a token, partition
// tokenPartition resumes after it. An event's token is only valid for the
// partition whose stream returned it: a server refuses to resume a stream
// whose filter excludes the token's event (ChangeStreamFatalError 280),
// so the other partitions start at the event's cluster time (the events
// of its transaction before it come again).
type positionTarget struct {
	token          bson.Raw // resume after this token (partition tokenPartition only); nil: none
	tokenPartition int
	ts             bson.Timestamp // the position's cluster time
	what           string         // how the operator named it
}

// of is the checkpoint position target gives partition p.
func (t positionTarget) of(p int) (bson.Raw, bson.Timestamp) {
	if t.token != nil && p == t.tokenPartition {
		return t.token, t.ts
	}
	return nil, t.ts
}

// runPositionSet replaces a stopped stream's checkpoints with one position.
func runPositionSet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("position set")
	stream := fs.String("stream", "", "stream name (required)")
	at := fs.String("time", "", "resume with the changes from this cluster time (RFC 3339) on")
	fromDLQ := fs.String("token-from-dlq", "", "resume after this dead-lettered event (its event id, or the start that ferry dlq list shows)")
	ofStream := fs.String("at-checkpoint-of", "", "resume from the oldest position of this stream's checkpoints")
	allowGap := fs.Bool("allow-gap", false, "for a position before the oplog window: set the window's start, leaving out what the oplog lost")
	yes := fs.Bool("yes", false, "write even if changes the oplog still holds are then skipped")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	st := cfg.Stream(*stream)
	if st == nil {
		problem := fmt.Sprintf("no stream named %q in the configuration", *stream)
		if *stream == "" {
			problem = "required: name the stream whose position to set"
		}
		fmt.Fprintf(stderr, "ferry position set: -stream: %s\n", problem)
		return 2
	}
	n := 0
	for _, v := range []string{*at, *fromDLQ, *ofStream} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		fmt.Fprintln(stderr, "ferry position set: give exactly one of -time, -token-from-dlq and -at-checkpoint-of")
		return 2
	}
	var atTime time.Time
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil || t.Unix() < 1 || t.Unix() > 1<<32-1 {
			fmt.Fprintf(stderr, "ferry position set: -time: %q is not an RFC 3339 time such as 2026-12-01T12:00:00Z\n", *at)
			return 2
		}
		atTime = t
	}
	return withState(ctx, "position set", cfg, stderr, func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		members, err := liveMembers(ctx, ls, st.Name)
		if err != nil {
			return err
		}
		if len(members) > 0 {
			ids := make([]string, len(members))
			for i, m := range members {
				ids[i] = m.ID
			}
			return fmt.Errorf("stream %s still has %d live member(s) (%s); stop their ferry run first (ferry status lists them). "+
				"Nothing was written", st.Name, len(members), strings.Join(ids, ", "))
		}
		var target positionTarget
		switch {
		case *at != "":
			target = positionTarget{ts: bson.Timestamp{T: uint32(atTime.Unix())}, what: "-time " + *at}
		case *fromDLQ != "":
			target, err = dlqPosition(ctx, db, st.Name, *fromDLQ)
		default:
			target, err = checkpointsPosition(ctx, cps, *ofStream)
		}
		if err != nil {
			return err
		}
		w, err := oplogWindowOf(ctx, st, cps)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stream %s: %s\n", st.Name, w)
		if now := (bson.Timestamp{T: uint32(w.now.Unix())}); target.ts.T > now.T {
			// No change exists there yet: a position in the future would
			// skip every change until then, whatever -yes says.
			ahead := time.Duration(target.ts.T-now.T) * time.Second
			aheadText := ahead.String()
			if ahead >= 48*time.Hour {
				aheadText = fmt.Sprintf("%d days", int(ahead.Hours()/24))
			}
			return fmt.Errorf("%s is %s after the source's current time (%s, by its clock): a stream cannot resume "+
				"from the future. Choose a time at or before %s. Nothing was written",
				target.what, aheadText, tsText(now), tsText(now))
		}
		if target.ts.Before(w.start) {
			gap := gapSeconds(target.ts, w.start)
			if !*allowGap {
				return fmt.Errorf("%s is %s, %d s before the oldest entry of the oplog (%s): the changes of those %d s are gone. "+
					"Choose a time at or after %s, or run again with -allow-gap to start at %s, leaving them out. Nothing was written",
					target.what, tsText(target.ts), gap, tsText(w.start), gap, tsText(w.start), tsText(w.start))
			}
			fmt.Fprintf(stdout, "-allow-gap: %s is %d s before the oplog window; the position is its start, %s: "+
				"the changes of those %d s are not delivered. The start moves on as the oplog rolls: if it passes this "+
				"position before the stream has read it, the stream fails with lost history again\n",
				tsText(target.ts), gap, tsText(w.start), gap)
			target = positionTarget{ts: w.start, what: "the start of the oplog window"}
		}
		src, closeSrc, err := sourceClient(st)
		if err != nil {
			return err
		}
		defer closeSrc()
		cons, err := positionConsumer(ctx, st, src, cps, stdout)
		if err != nil {
			return err
		}
		recs, err := cps.Records(ctx, st.Name)
		if err != nil {
			return err
		}
		plan, err := planPositions(st, recs, target, w.start)
		if err != nil {
			return err
		}
		for _, line := range plan.lines {
			fmt.Fprintln(stdout, "  "+line)
		}
		if plan.skips > 0 && !*yes {
			return fmt.Errorf("the new position skips %d s of changes the oplog still holds for partition %d (and is later for "+
				"the partitions listed so): they would never be delivered. To deliver them choose an earlier position; to skip "+
				"them, run again with -yes. Nothing was written", plan.skips, plan.skipsPartition)
		}
		if err := writePositions(ctx, db, ls, cps, st, recs, target, cons); err != nil {
			return err
		}
		asked, err := group.RequestRecheck(ctx, db, st.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stream %s: %d partition(s) set to %s (%s).", st.Name, max(st.Group.Partitions, 1), tsText(target.ts), target.what)
		if asked > 0 {
			fmt.Fprintf(stdout, " %d failed member(s) asked to re-check: they resume from there within 10 s.", asked)
		} else {
			fmt.Fprint(stdout, " Its next ferry run resumes from there.")
		}
		fmt.Fprintln(stdout)
		return nil
	})
}

// dlqPosition is the position after a dead-lettered change: the entry is
// found by its event id or an unambiguous start of it.
func dlqPosition(ctx context.Context, db *mongo.Database, stream, id string) (positionTarget, error) {
	entries, err := deadletter.NewMongo(db, "dlq").List(ctx, stream, 0)
	if err != nil {
		return positionTarget{}, err
	}
	var match []deadletter.Entry
	for _, e := range entries {
		if e.EventID == id {
			match = []deadletter.Entry{e}
			break
		}
		if strings.HasPrefix(e.EventID, id) {
			match = append(match, e)
		}
	}
	switch {
	case len(match) == 0:
		return positionTarget{}, fmt.Errorf("-token-from-dlq: stream %s has no dead-letter entry %q (ferry dlq list -stream %s lists them)", stream, id, stream)
	case len(match) > 1:
		return positionTarget{}, fmt.Errorf("-token-from-dlq: %q starts %d entries' event ids; give more of it (ferry dlq list -json prints them whole)", id, len(match))
	}
	e := match[0]
	tok := e.ResumeAfter
	if tok == nil && entryKind(e) == deadletter.KindChange && e.Event != nil {
		// Entries written before ResumeAfter was recorded: the event's own token.
		if v, err := e.Event.LookupErr("_id"); err == nil {
			if d, ok := v.DocumentOK(); ok {
				tok = bson.Raw(d)
			}
		}
	}
	if tok == nil {
		why := "it records no resume token"
		if entryKind(e) == deadletter.KindBackfill {
			why = "it is a backfill event, which has no place in the change stream"
		}
		return positionTarget{}, fmt.Errorf("-token-from-dlq: entry %s/%s cannot give a position: %s; use -time with its time (%s)",
			stream, shortEventID(e.EventID), why, e.FirstAt.UTC().Format(time.RFC3339))
	}
	parsed, err := resumetoken.Parse(tok)
	if err != nil {
		return positionTarget{}, fmt.Errorf("-token-from-dlq: entry %s/%s: its resume token cannot be read: %v", stream, shortEventID(e.EventID), err)
	}
	return positionTarget{token: tok, tokenPartition: e.Partition, ts: parsed.ClusterTime,
		what: fmt.Sprintf("after dead-lettered %s %s", e.Operation, shortEventID(e.EventID))}, nil
}

// checkpointsPosition is the oldest position of a stream's checkpoints.
func checkpointsPosition(ctx context.Context, cps checkpoint.Store, stream string) (positionTarget, error) {
	list, err := cps.List(ctx, stream)
	if err != nil {
		return positionTarget{}, err
	}
	oldest, known := oldestPosition(list)
	if !known {
		return positionTarget{}, fmt.Errorf("-at-checkpoint-of: stream %s has no checkpoint that records a position "+
			"(ferry status lists the streams of a configuration)", stream)
	}
	return positionTarget{ts: oldest, what: "the oldest checkpoint of stream " + stream}, nil
}

// positionPlan is what setting a position does to each partition.
type positionPlan struct {
	lines          []string
	skips          int64 // the most seconds of held changes a partition would skip
	skipsPartition int
}

// planPositions says, per partition, what moving it to target means.
func planPositions(st *config.Stream, recs []mongostore.Record, target positionTarget, start bson.Timestamp) (positionPlan, error) {
	n := max(st.Group.Partitions, 1)
	byPartition := map[int]checkpoint.Checkpoint{}
	corrupt := map[int]*checkpoint.CorruptError{}
	for _, r := range recs {
		if r.Partition >= n {
			return positionPlan{}, fmt.Errorf("stream %s has a checkpoint for partition %d but group.partitions is %d: "+
				"run the stream once with its configured partitions (it repartitions), or ferry reset it. Nothing was written",
				st.Name, r.Partition, n)
		}
		if r.Corrupt != nil {
			corrupt[r.Partition] = r.Corrupt
			continue
		}
		byPartition[r.Partition] = r.Checkpoint
	}
	if target.token != nil && target.tokenPartition >= n {
		return positionPlan{}, fmt.Errorf("the dead-lettered event was read by partition %d, but group.partitions is %d now: "+
			"use -time with its time (%s). Nothing was written", target.tokenPartition, n, tsText(target.ts))
	}
	var plan positionPlan
	for p := range n {
		cp, ok := byPartition[p]
		pos, known := positionOf(cp)
		line := fmt.Sprintf("partition %d: ", p)
		switch {
		case corrupt[p] != nil:
			line += fmt.Sprintf("corrupt record %s (%s), position unknown → %s: overwritten", corrupt[p].Record, corrupt[p].Problem, tsText(target.ts))
		case !ok || !known:
			line += "no position yet → " + tsText(target.ts)
		case pos.Before(start):
			line += fmt.Sprintf("%s (history lost: %d s before the window) → %s", tsText(pos), gapSeconds(pos, start), tsText(target.ts))
		default:
			line += tsText(pos) + " → " + tsText(target.ts)
			switch {
			case target.ts.After(pos):
				skip := gapSeconds(pos, target.ts)
				line += fmt.Sprintf(": skips %d s of changes", skip)
				if skip > plan.skips {
					plan.skips, plan.skipsPartition = skip, p
				}
			case pos.After(target.ts):
				line += fmt.Sprintf(": delivers %d s of changes again", gapSeconds(target.ts, pos))
			default:
				line += ": unchanged"
			}
		}
		if ok && cp.State != checkpoint.StateRunning {
			line += fmt.Sprintf(" (was %s)", cp.State)
		}
		plan.lines = append(plan.lines, line)
	}
	return plan, nil
}

// writePositions replaces every partition's checkpoint with target, in
// one transaction, each compare-and-set against the version read (for a
// corrupt record: against the record exactly as read): if a member took
// a partition meanwhile, nothing is written.
func writePositions(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store, st *config.Stream,
	recs []mongostore.Record, target positionTarget, cons *ferry.Consumer) error {
	byPartition := map[int]checkpoint.Checkpoint{}
	corrupt := map[int]mongostore.Record{}
	for _, r := range recs {
		if r.Corrupt != nil {
			corrupt[r.Partition] = r
			continue
		}
		byPartition[r.Partition] = r.Checkpoint
	}
	// A corrupt record's epoch may be unreadable: the record written over
	// it carries the partition lease's epoch, which the next owner's
	// exceeds, and no lower epoch than the record's own where readable.
	overEpoch := map[int]int64{}
	for p, r := range corrupt {
		overEpoch[p] = r.Epoch
		if l, err := ls.Get(ctx, st.Name, p); err == nil {
			overEpoch[p] = max(r.Epoch, l.Epoch)
		}
	}
	sess, err := db.Client().StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.Background())
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		for p := range max(st.Group.Partitions, 1) {
			old := byPartition[p]
			tok, ts := target.of(p)
			next := checkpoint.Checkpoint{Stream: st.Name, Partition: p, Version: old.Version, Epoch: old.Epoch,
				Token: tok, ClusterTime: ts, Identity: cons.Identity(), Definition: cons.Definition(),
				State: checkpoint.StateRunning, Note: "set by ferry position set: " + target.what}
			if r, ok := corrupt[p]; ok {
				next.Version, next.Epoch = r.Version, overEpoch[p]
				if _, err := cps.Overwrite(sc, r, next); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := cps.Save(sc, next); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if errors.Is(err, checkpoint.ErrFenced) {
		return fmt.Errorf("a checkpoint changed while setting (did a member start?): %w. Nothing was written; run ferry position set again", err)
	}
	return err
}

// positionCommand is `ferry position`, with show and set.
func positionCommand() *command {
	return &command{
		name: "position", args: "show|set -c ferry.yaml [flags]",
		summary: "where each partition resumes, the oplog window, and setting where a stopped stream resumes",
		doc: `"ferry position show" prints each partition's position and its head-room in
the oplog window; "ferry position set" sets where a stopped stream resumes.`,
		sub: []*command{
			{name: "position show", args: "-c ferry.yaml [-stream S]",
				summary: "every partition's position, its head-room and the oplog window",
				doc:     positionShowDoc, run: runPositionShow},
			{name: "position set", args: "-c ferry.yaml -stream S (-time T | -token-from-dlq ID | -at-checkpoint-of S2) [-allow-gap] [-yes]",
				summary: "set where a stopped stream resumes (compare-and-set; refused while members are live)",
				doc:     positionSetDoc, run: runPositionSet},
		},
	}
}
