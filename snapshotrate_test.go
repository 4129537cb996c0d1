package ferry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	ferry "github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// snapshotHook records what HookSnapshot reports.
type snapshotHook struct {
	mu    sync.Mutex
	infos []ferry.SnapshotInfo
}

func (h *snapshotHook) OnSnapshot(i ferry.SnapshotInfo) {
	h.mu.Lock()
	h.infos = append(h.infos, i)
	h.mu.Unlock()
}

func (h *snapshotHook) seen() []ferry.SnapshotInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ferry.SnapshotInfo(nil), h.infos...)
}

// TestSnapshotRecordsItsRate: the checkpoint's snapshot record carries
// the owner's rate as of its last chunk, so a reader of the store (ferry
// status, /status of another member) shows it; once the snapshot
// finished, the rate stays what it was at its last chunk (it does not
// decay as the partition goes on streaming).
func TestSnapshotRecordsItsRate(t *testing.T) {
	e := newEnv(t)
	const n, chunk, maxRate = 600, 100, 2000.0
	insertN(t, e.db.Collection("c"), 0, n, func(int) bson.D { return nil })
	hook := &snapshotHook{}
	c, err := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(chunk), ferry.SnapshotMaxRate(maxRate),
			ferry.SnapshotPollInterval(20*time.Millisecond), ferry.WithHooks(hook))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	mid := waitSnapshot(t, e.store, "s", 0, "a chunk finished, running", func(p ferry.SnapshotProgress) bool { return p.Running() && p.Chunks >= 1 })
	if mid.Rate <= 0 {
		t.Errorf("the record of a running snapshot after %d chunk(s): rate %v, want the owner's rate", mid.Chunks, mid.Rate)
	}
	fin := waitSnapshot(t, e.store, "s", 0, "finished", finished)
	// The whole snapshot took at least (n-chunk)/maxRate: its rate is at
	// most n/((n-chunk)/maxRate).
	if limit := float64(n) * maxRate / float64(n-chunk); fin.Rate <= 0 || fin.Rate > limit*1.01 {
		t.Errorf("finished snapshot's recorded rate %.0f/s, want above 0 and at most %.0f/s (cap %v/s)", fin.Rate, limit, maxRate)
	}
	// The snapshot goroutine shows the finished record again at every
	// poll: always with the rate of its last chunk.
	poll.Until(t, 10*time.Second, func() error {
		var after int
		for _, i := range hook.seen() {
			if i.Progress.ID == fin.ID && !i.Progress.Finished.IsZero() {
				after++
				if i.Progress.Rate != fin.Rate {
					return fmt.Errorf("a finished snapshot reported at %.1f/s, its record says %.1f/s", i.Progress.Rate, fin.Rate)
				}
			}
		}
		if after < 3 {
			return fmt.Errorf("the finished snapshot was reported %d times, want 3", after)
		}
		return nil
	})
	if s := c.Status().Snapshot; s == nil || s.Rate != fin.Rate || s.Done != n {
		t.Errorf("Status().Snapshot = %+v, want %d done at %.1f/s", s, n, fin.Rate)
	}
	// While it ran, the hook saw 0 before the first chunk and the
	// member's rate after.
	var first, later bool
	for _, i := range hook.seen() {
		if p := i.Progress; p.Running() && p.Chunks == 0 {
			first = first || p.Rate == 0
		} else if p.Running() && p.Rate > 0 {
			later = true
		}
	}
	if !first || !later {
		t.Errorf("running snapshot reports: rate 0 before the first chunk %v, a rate after %v", first, later)
	}
}
