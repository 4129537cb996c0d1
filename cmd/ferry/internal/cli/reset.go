package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
)

const resetDoc = `Deletes the checkpoints of a stream whose members are all stopped, so that
its next ferry run starts from source.start_at, as a new stream does: after
a changed definition (pipeline, options, partitions) made them unusable, or
to deliver the source again.

What becomes of the changes made since the checkpoints depends on
source.start_at:

  now (the default)  they are skipped and never delivered. ferry reset says
                     how many seconds of changes that is and deletes nothing
                     without -yes.
  backfill           the next run scans the source and delivers every
                     document as a backfill event, then the changes made
                     since the scan began.
  a time T           the next run delivers the changes from T on: those
                     since the checkpoints, and again those between T and
                     them (receivers de-duplicate on the event id). If T is
                     after the oldest checkpoint, the changes in between are
                     skipped, and ferry reset deletes nothing without -yes.
                     If the oplog no longer reaches back to T,
                     on_history_lost decides.
  {checkpoints_of: S}
                     the next run starts at the oldest position of stream
                     S's checkpoints, read when its first member starts:
                     if that is at or before this stream's oldest
                     checkpoint, the changes since are delivered again
                     (receivers de-duplicate on the event id); if it is
                     after, the changes in between are skipped, and ferry
                     reset deletes nothing without -yes. If S has no
                     checkpoints, the next run stops and says so.

It refuses while members of the stream are live (ferry status lists them).

A checkpoint record that cannot be read (a field of the wrong type or
missing, edited by hand or damaged) is deleted too, without being decoded:
only if it is still exactly as read. ferry reset names each such record by
its collection and _id.`

// runReset deletes a stream's checkpoints, so it starts again from its
// start_at position. The stream's group must be stopped. When that start
// skips the changes made since the checkpoints, it says how many seconds of
// changes and deletes nothing without -yes.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reset")
	stream := fs.String("stream", "", "stream name (required)")
	yes := fs.Bool("yes", false, "delete even if the changes made since the checkpoints are then skipped")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	st := cfg.Stream(*stream)
	if st == nil {
		names := make([]string, len(cfg.Streams))
		for i, s := range cfg.Streams {
			names[i] = s.Name
		}
		problem := fmt.Sprintf("no stream named %q in the configuration", *stream)
		if *stream == "" {
			problem = "required: name the stream to reset"
		}
		fmt.Fprintf(stderr, "ferry reset: -stream: %s (streams: %s)\n", problem, strings.Join(names, ", "))
		return 2
	}
	return withState(ctx, "reset", cfg, stderr, func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		members, err := liveMembers(ctx, ls, st.Name)
		if err != nil {
			return err
		}
		if len(members) > 0 {
			return fmt.Errorf("stream %s still has %d live member(s); stop their ferry run first (ferry status lists them)",
				st.Name, len(members))
		}
		recs, err := cps.Records(ctx, st.Name)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			fmt.Fprintf(stdout, "stream %s: no checkpoints, nothing to delete: its next ferry run starts from source.start_at (%s)\n",
				st.Name, startAtName(st.Source.StartAt))
			return nil
		}
		oldest, known := oldestPosition(readable(recs))
		var from startFrom
		if st.Source.StartAt.Kind == "checkpoints" {
			fromRecs, err := cps.Records(ctx, st.Source.StartAt.Stream)
			if err != nil {
				return err
			}
			from.oldest, from.known = oldestPosition(readable(fromRecs))
		}
		plan := planReset(st, oldest, known, sourceClock(ctx, cfg, st, db), from)
		if plan.skips && !*yes {
			return errors.New(plan.refusal + corruptNote(recs))
		}
		for _, r := range recs {
			if r.Corrupt != nil {
				// Its version cannot be compared: it is deleted if it is
				// still exactly as read.
				if err := cps.Remove(ctx, r); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "stream %s: partition %d: corrupt record %s (%s) deleted\n", st.Name, r.Partition, r.Corrupt.Record, r.Corrupt.Problem)
				continue
			}
			if err := cps.Delete(ctx, r.Checkpoint.Stream, r.Checkpoint.Partition, r.Checkpoint.Version); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "stream %s: %d checkpoint(s) deleted. %s\n", st.Name, len(recs), plan.next)
		if asked, err := group.RequestRecheck(ctx, db, st.Name); err != nil {
			return err
		} else if asked > 0 {
			fmt.Fprintf(stdout, "%d failed member(s) asked to re-check: they start again within 10 s.\n", asked)
		}
		return nil
	})
}

// resetPlan is what deleting a stream's checkpoints leads to.
type resetPlan struct {
	skips   bool   // changes made since the checkpoints would never be delivered
	refusal string // why ferry reset wants -yes (when skips)
	next    string // what the stream does on its next run
}

// startFrom is the oldest position of the checkpoints of the stream that
// source.start_at: {checkpoints_of: S} names (known false: S has none
// with a position).
type startFrom struct {
	oldest bson.Timestamp
	known  bool
}

// planReset says what the stream st does once its checkpoints are gone,
// given the oldest position they record (known false: none records one),
// the source cluster's clock now, and, for start_at {checkpoints_of: S},
// where S's checkpoints are.
func planReset(st *config.Stream, oldest bson.Timestamp, known bool, now time.Time, from startFrom) resetPlan {
	name := st.Name
	since := time.Unix(int64(oldest.T), 0).UTC()
	sinceText := since.Format(time.RFC3339)
	skipped := func(until time.Time) int64 { // whole seconds from the oldest checkpoint to until
		if d := until.Unix() - since.Unix(); d > 0 {
			return d
		}
		return 0
	}
	const skipHint = "To deliver them, set source.start_at to backfill or to a time at or before %s; " +
		"to skip them, run again with -yes. Nothing was deleted."
	start := st.Source.StartAt
	switch start.Kind {
	case "backfill":
		return resetPlan{next: "Its next ferry run scans the source (start_at: backfill) and delivers every document " +
			"as a backfill event, then the changes made since the scan began."}
	case "time":
		at := start.Time.UTC().Format(time.RFC3339)
		replay := fmt.Sprintf("Its next ferry run delivers the changes made from %s on (source.start_at); "+
			"those delivered before come again with the same event ids. %s", at, historyLostNote(st))
		if !known {
			return resetPlan{next: replay}
		}
		if start.Time.Unix() <= since.Unix() {
			return resetPlan{next: fmt.Sprintf("Its next ferry run delivers the changes made from %s on (source.start_at), "+
				"%d s before its oldest checkpoint (%s): those delivered before come again with the same event ids. %s",
				at, since.Unix()-start.Time.Unix(), sinceText, historyLostNote(st))}
		}
		n := skipped(start.Time)
		return resetPlan{skips: true,
			refusal: fmt.Sprintf("stream %s: start_at is %s, after its oldest checkpoint: the changes of the %d s between %s and %s "+
				"would be skipped and never delivered. "+skipHint, name, at, n, sinceText, at, sinceText),
			next: fmt.Sprintf("Its next ferry run delivers the changes made from %s on (source.start_at); "+
				"the %d s of changes between %s and %s are not delivered.", at, n, sinceText, at)}
	case "checkpoints":
		return planResetFrom(st, oldest, known, from)
	}
	// start_at: now (the default).
	if !known {
		return resetPlan{skips: true,
			refusal: fmt.Sprintf("stream %s: start_at is now: its checkpoints record no position, so every change made since "+
				"it last ran would be skipped and never delivered. To deliver them, set source.start_at to backfill or to a "+
				"time at or before its last run; to skip them, run again with -yes. Nothing was deleted.", name),
			next: "Its next ferry run starts from the changes made from then on (start_at: now)."}
	}
	n := skipped(now)
	return resetPlan{skips: true,
		refusal: fmt.Sprintf("stream %s: start_at is now: the changes of the last %d s (since %s) would be skipped "+
			"and never delivered. "+skipHint, name, n, sinceText, sinceText),
		next: fmt.Sprintf("Its next ferry run starts from the changes made from then on (start_at: now): "+
			"the changes since %s (%d s so far) are not delivered.", sinceText, n)}
}

// historyLostNote says what happens when the oplog no longer holds the
// start time.
func historyLostNote(st *config.Stream) string {
	if st.OnHistoryLost == ferry.HistoryLostBackfill {
		return "If the oplog no longer reaches back that far, it scans the source instead (on_history_lost: backfill)."
	}
	return fmt.Sprintf("If the oplog no longer reaches back that far, it stops and says so (on_history_lost: %s).", st.OnHistoryLost)
}

// startAtName is source.start_at as written in the file.
func startAtName(s config.StartAt) string {
	if s.Kind == "time" {
		return s.Time.UTC().Format(time.RFC3339)
	}
	if s.Kind == "" {
		return "now"
	}
	return s.Kind
}

// oldestPosition is the oldest cluster time the checkpoints resume from:
// per checkpoint the cluster time of its resume token, or its recorded
// ClusterTime when the token cannot be decoded. known is false when no
// checkpoint records either.
func oldestPosition(list []checkpoint.Checkpoint) (oldest bson.Timestamp, known bool) {
	for _, cp := range list {
		ts, ok := positionOf(cp)
		if ok && (!known || ts.Before(oldest)) {
			oldest, known = ts, true
		}
	}
	return oldest, known
}

// sourceClock is the current time of the stream's source cluster, whose
// clock the checkpoints' cluster times come from: hello's localTime, or its
// operationTime. When the source cannot be asked, the state store's clock
// is used, and the local clock as a last resort.
func sourceClock(ctx context.Context, cfg *config.Config, st *config.Stream, state *mongo.Database) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if st.Source.URI.Reveal() != cfg.StateURI().Reveal() {
		if client, err := mongo.Connect(options.Client().ApplyURI(st.Source.URI.Reveal())); err == nil {
			t, err := serverClock(ctx, client)
			_ = client.Disconnect(context.Background())
			if err == nil {
				return t
			}
		}
	}
	if t, err := serverClock(ctx, state.Client()); err == nil {
		return t
	}
	return time.Now()
}

// serverClock asks a server for its current time: hello's localTime, else
// the reply's operationTime.
func serverClock(ctx context.Context, client *mongo.Client) (time.Time, error) {
	var hello struct {
		LocalTime     time.Time      `bson:"localTime"`
		OperationTime bson.Timestamp `bson:"operationTime"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return time.Time{}, err
	}
	switch {
	case !hello.LocalTime.IsZero():
		return hello.LocalTime, nil
	case hello.OperationTime.T > 0:
		return time.Unix(int64(hello.OperationTime.T), 0), nil
	}
	return time.Time{}, errors.New("hello: neither localTime nor operationTime")
}

// planResetFrom is planReset for start_at {checkpoints_of: S}: the next
// run starts at S's oldest checkpoint, read when its first member starts.
func planResetFrom(st *config.Stream, oldest bson.Timestamp, known bool, from startFrom) resetPlan {
	name, other := st.Name, st.Source.StartAt.Stream
	startAt := fmt.Sprintf("source.start_at: {checkpoints_of: %s}", other)
	if !from.known {
		return resetPlan{next: fmt.Sprintf("Its next ferry run starts where the checkpoints of stream %s are (%s), but %s has "+
			"none that records a position: the run stops and says so (start-position) until %s has run, or "+
			"source.start_at is changed. Nothing is skipped.", other, startAt, other, other)}
	}
	fromText := tsText(from.oldest)
	moving := fmt.Sprintf(" The position is read when its first member starts: if stream %s runs meanwhile, it "+
		"may have moved on by then (ferry position show -stream %s shows where it is).", other, other)
	if !known || !from.oldest.After(oldest) {
		again := "the changes since are delivered again, with the same event ids (receivers de-duplicate on them; the " +
			"ledger absorbs them in idempotent and transactional delivery)"
		if known {
			again = fmt.Sprintf("%d s before its own oldest checkpoint (%s): %s", int64(oldest.T)-int64(from.oldest.T),
				tsText(oldest), again)
		}
		return resetPlan{next: fmt.Sprintf("Its next ferry run starts where the checkpoints of stream %s are (%s), now at %s, "+
			"%s.%s %s", other, startAt, fromText, again, moving, historyLostNote(st))}
	}
	n := int64(from.oldest.T) - int64(oldest.T)
	return resetPlan{skips: true,
		refusal: fmt.Sprintf("stream %s: %s starts at %s, after its own oldest checkpoint (%s): the changes of the %d s "+
			"in between would be skipped and never delivered. To deliver them, set source.start_at to backfill or to a "+
			"time at or before %s; to skip them, run again with -yes. Nothing was deleted.",
			name, startAt, fromText, tsText(oldest), n, tsText(oldest)),
		next: fmt.Sprintf("Its next ferry run starts where the checkpoints of stream %s are (%s), now at %s: the %d s of "+
			"changes since its own oldest checkpoint (%s) are not delivered.%s", other, startAt, fromText, n, tsText(oldest), moving)}
}
