package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/resumetoken"
)

// activity is what the state store shows of the stream's changes in a
// window (Report.Failure says why it matters: a window that read no event
// although the stream was active in it checked nothing). Each kind of
// evidence is a change of the stream, not a sign of life: a quiet
// stream's checkpoints move too (to high-water marks), and count for
// nothing here.
type activity struct {
	// applied: ledger entries of the stream (or of Config.LedgerAlso)
	// whose appliedAt lies in the window. appliedAt is at or after the
	// change's own time, so a backlog of older changes applied inside the
	// window counts too.
	applied int64
	// checkpoints: partitions whose checkpoint is the resume token of a
	// change in the window (the last one applied), or records a change in
	// the window still pending (Checkpoint.Pending).
	checkpoints []int
	// deadLettered: dead-letter entries of changes in the window.
	deadLettered int
}

func (a activity) none() bool {
	return a.applied == 0 && len(a.checkpoints) == 0 && a.deadLettered == 0
}

// String lists the evidence, for Report.Failure.
func (a activity) String() string {
	var parts []string
	if a.applied > 0 {
		parts = append(parts, fmt.Sprintf("%d ledger entries applied in it", a.applied))
	}
	if n := len(a.checkpoints); n > 0 {
		ps := make([]string, n)
		for i, p := range a.checkpoints {
			ps[i] = fmt.Sprint(p)
		}
		if n == 1 {
			parts = append(parts, fmt.Sprintf("the checkpoint of partition %s at a change in it", ps[0]))
		} else {
			parts = append(parts, fmt.Sprintf("the checkpoints of partitions %s at changes in it", strings.Join(ps, ", ")))
		}
	}
	if a.deadLettered > 0 {
		parts = append(parts, fmt.Sprintf("%d dead letters of changes in it", a.deadLettered))
	}
	return strings.Join(parts, "; ")
}

// activityIn gathers the evidence of changes of the stream from from to
// to: the ledger's entries applied in that time (in the window's seconds,
// the source's clock), the checkpoints and the dead letters read.
func activityIn(ctx context.Context, cfg Config, from, to bson.Timestamp, cps []checkpoint.Checkpoint, dlq []deadletter.Entry) (activity, error) {
	in := func(ts bson.Timestamp) bool { return !ts.IsZero() && !ts.Before(from) && !ts.After(to) }
	var a activity
	if cfg.Ledger != nil {
		end := wall(to).Add(time.Second) // the whole of the window's last second
		for _, stream := range []string{cfg.Stream, cfg.LedgerAlso} {
			if stream == "" {
				continue
			}
			n, err := cfg.Ledger.CountApplied(ctx, stream, wall(from), end)
			if err != nil {
				return a, fmt.Errorf("verify: %w", err)
			}
			a.applied += n
		}
	}
	for _, cp := range cps {
		tok, err := resumetoken.Parse(cp.Token)
		if err == nil && tok.TokenType == resumetoken.TypeEvent && in(tok.ClusterTime) || in(cp.Pending) {
			a.checkpoints = append(a.checkpoints, cp.Partition)
		}
	}
	for _, e := range dlq {
		if len(e.Event) == 0 {
			continue
		}
		if t, i, ok := e.Event.Lookup("clusterTime").TimestampOK(); ok && in(bson.Timestamp{T: t, I: i}) {
			a.deadLettered++
		}
	}
	return a, nil
}
