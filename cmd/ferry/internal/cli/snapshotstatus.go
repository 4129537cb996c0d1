package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// snapshotStatusJSON is `ferry snapshot status -json`: per stream, its
// current request and each partition's snapshot.
type snapshotStatusJSON struct {
	Streams []streamSnapshotsJSON `json:"streams"`
}

type streamSnapshotsJSON struct {
	Name string `json:"name"`
	// Request is the stream's current request (null: none).
	Request *requestJSON `json:"request"`
	// Partitions: each partition's snapshot in progress or its last one
	// (snapshot null: none).
	Partitions []partitionSnapshotJSON `json:"partitions"`
	// Problems: records that cannot be read.
	Problems []string `json:"problems,omitempty"`
}

type requestJSON struct {
	ID        string    `json:"id"`
	Requested time.Time `json:"requested"`
	Filter    string    `json:"filter,omitempty"` // relaxed Extended JSON
	Note      string    `json:"note,omitempty"`
	Cancelled bool      `json:"cancelled"`
	// NotTakenUp lists the partitions whose owner has not taken the
	// request up (yet: a cancelled request is never taken up).
	NotTakenUp []int `json:"not_taken_up"`
}

type partitionSnapshotJSON struct {
	Partition int           `json:"partition"`
	Snapshot  *snapshotJSON `json:"snapshot"`
	Problem   string        `json:"problem,omitempty"`
}

type snapshotJSON struct {
	ID      string `json:"id"`
	Reason  string `json:"reason"` // start, history-lost or request
	Request string `json:"request,omitempty"`
	State   string `json:"state"` // running, finished or cancelled
	Filter  string `json:"filter,omitempty"`
	// Done of Estimated documents (estimated 0: unknown); Percent of it.
	Done      int64   `json:"done"`
	Estimated int64   `json:"estimated"`
	Percent   float64 `json:"percent"`
	// Rate is the owner's documents per second as of its last chunk (the
	// average since the start for older records); ETASeconds the time
	// left at that rate (null: unknown or ended).
	Rate       float64    `json:"rate"`
	ETASeconds *float64   `json:"eta_seconds"`
	Chunks     int64      `json:"chunks"`
	Namespace  string     `json:"namespace,omitempty"`
	Mode       string     `json:"mode,omitempty"`
	Started    time.Time  `json:"started"`
	Finished   *time.Time `json:"finished"`
	// ChunkFailures counts the failed tries of the chunk it is at (0:
	// none since the last chunk finished); LastError the last one's error.
	ChunkFailures int    `json:"chunk_failures"`
	LastError     string `json:"last_error,omitempty"`
}

// snapshotRow is a partition's snapshot with its rate set.
func snapshotRow(p ferry.SnapshotProgress, now time.Time) *snapshotJSON {
	end := now
	if !p.Finished.IsZero() {
		end = p.Finished
	}
	// The owner's rate as of its last chunk, which the record carries;
	// a record written before it did: the average since the start.
	if el := end.Sub(p.Started); p.Rate <= 0 && el > 0 && p.Done > 0 {
		p.Rate = float64(p.Done) / el.Seconds()
	}
	s := &snapshotJSON{ID: p.ID, Reason: p.Reason, Request: p.Request, State: snapshotStateOf(p), Filter: p.Filter,
		Done: p.Done, Estimated: p.Total, Percent: p.Percent(), Rate: p.Rate, Chunks: p.Chunks,
		Namespace: p.Namespace, Mode: p.Mode, Started: p.Started, ChunkFailures: p.Failures, LastError: p.Error}
	if p.Filter != "" {
		var doc bson.Raw
		if bson.UnmarshalExtJSON([]byte(p.Filter), false, &doc) == nil {
			s.Filter = relaxedJSON(doc)
		}
	}
	if eta := p.ETA(); eta > 0 {
		sec := eta.Round(time.Second).Seconds()
		s.ETASeconds = &sec
	}
	if !p.Finished.IsZero() {
		f := p.Finished
		s.Finished = &f
	}
	return s
}

func snapshotStateOf(p ferry.SnapshotProgress) string {
	switch {
	case p.Running():
		return "running"
	case p.Cancelled:
		return "cancelled"
	}
	return "finished"
}

// streamSnapshots reads one stream's request and partitions.
func streamSnapshots(ctx context.Context, state *snapshotState, st *config.Stream, now time.Time) (streamSnapshotsJSON, error) {
	out := streamSnapshotsJSON{Name: st.Name, Partitions: []partitionSnapshotJSON{}}
	parts, notes, err := readSnapshots(ctx, state, st)
	if err != nil {
		return out, err
	}
	out.Problems = notes
	req, err := state.reqs.SnapshotRequest(ctx, st.Name)
	var ce *checkpoint.CorruptError
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case errors.As(err, &ce):
		out.Problems = append(out.Problems, "the snapshot request cannot be read: "+ce.Error()+" (a new ferry snapshot replaces it)")
	case err != nil:
		return out, err
	default:
		r := &requestJSON{ID: req.ID, Requested: req.Requested, Note: req.Note, Cancelled: req.Cancelled, NotTakenUp: []int{}}
		if len(req.Filter) > 0 {
			r.Filter = relaxedJSON(req.Filter)
		}
		out.Request = r
	}
	for _, p := range parts {
		row := partitionSnapshotJSON{Partition: p.partition, Problem: p.problem}
		if p.has {
			row.Snapshot = snapshotRow(p.progress, now)
		}
		if out.Request != nil && (!p.has || p.progress.Request != out.Request.ID) {
			out.Request.NotTakenUp = append(out.Request.NotTakenUp, p.partition)
		}
		out.Partitions = append(out.Partitions, row)
	}
	return out, nil
}

// runSnapshotStatus is `ferry snapshot status`.
func runSnapshotStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("snapshot status")
	stream := fs.String("stream", "", "stream name (default: every stream)")
	asJSON := fs.Bool("json", false, "print one JSON document instead of the table")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	streams, code := streamsFlag(cfg, "snapshot status", *stream, stderr)
	if streams == nil {
		return code
	}
	return withSnapshotState(ctx, "snapshot status", cfg, stderr, func(ctx context.Context, state *snapshotState) error {
		now := time.Now()
		var doc snapshotStatusJSON
		for _, st := range streams {
			s, err := streamSnapshots(ctx, state, st, now)
			if err != nil {
				return fmt.Errorf("stream %s: %w", st.Name, err)
			}
			doc.Streams = append(doc.Streams, s)
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(doc)
		}
		return printSnapshotStatus(stdout, doc, now)
	})
}

// printSnapshotStatus prints the document as a table per stream.
func printSnapshotStatus(stdout io.Writer, doc snapshotStatusJSON, now time.Time) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, s := range doc.Streams {
		fmt.Fprintf(w, "stream %s:\n", s.Name)
		fmt.Fprintln(w, "  partition\tsnapshot\treason\tstate\tdone/estimated\tpercent\trate\tETA\tchunks\tfilter")
		for _, p := range s.Partitions {
			sn := p.Snapshot
			if sn == nil {
				what := "no snapshot"
				if p.Problem != "" {
					what = "snapshot record unreadable: " + p.Problem
				}
				fmt.Fprintf(w, "  %d\t-\t-\t%s\n", p.Partition, what)
				continue
			}
			est := "?"
			if sn.Estimated > 0 {
				est = fmt.Sprint(sn.Estimated)
			}
			eta := "-"
			if sn.ETASeconds != nil {
				eta = (time.Duration(*sn.ETASeconds) * time.Second).String()
			}
			filter := "no"
			if sn.Filter != "" {
				filter = "yes"
			}
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%d/%s\t%.1f%%\t%s\t%s\t%d\t%s\n", p.Partition, sn.ID, sn.Reason, sn.State,
				sn.Done, est, sn.Percent, rateText(sn.Rate), eta, sn.Chunks, filter)
			if sn.ChunkFailures > 0 {
				fmt.Fprintf(w, "    partition %d: its next chunk failed %s, retrying: %s\n", p.Partition, plural(sn.ChunkFailures, "time"), sn.LastError)
			}
		}
		if r := s.Request; r != nil {
			state := "pending"
			switch {
			case r.Cancelled:
				state = "cancelled"
			case len(r.NotTakenUp) == 0:
				state = "taken up by every partition"
			}
			fmt.Fprintf(w, "  request %s (%s ago): %s", r.ID, ageOf(now, r.Requested), state)
			if !r.Cancelled && len(r.NotTakenUp) > 0 {
				ps := make([]string, len(r.NotTakenUp))
				for i, p := range r.NotTakenUp {
					ps[i] = fmt.Sprint(p)
				}
				fmt.Fprintf(w, "; not taken up yet by partition(s) %s", strings.Join(ps, ", "))
			}
			fmt.Fprintln(w)
			if r.Filter != "" {
				fmt.Fprintf(w, "    filter: %s\n", r.Filter)
			}
			if r.Note != "" {
				fmt.Fprintf(w, "    note: %s\n", r.Note)
			}
		} else {
			fmt.Fprintln(w, "  request: none")
		}
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
	return w.Flush()
}
