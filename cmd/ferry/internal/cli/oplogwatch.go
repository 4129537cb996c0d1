package cli

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/metrics"
)

// oplogProbeInterval is how often the daemon finds the start of each
// stream's oplog window, for ferry_oplog_window_seconds and
// ferry_oplog_headroom_seconds. A probe is 2 change-stream opens while the
// window has not moved, and about 2·log2(seconds it moved) + 32 when it
// has (Consumer.OplogStart).
const oplogProbeInterval = time.Minute

// oplogWatcher reports the start of one stream's oplog window to the
// metrics every oplogProbeInterval. Every member runs it (it only reads).
type oplogWatcher struct {
	stream string
	cons   *ferry.Consumer
	src    *mongo.Client // the source, whose clock the window is measured by
	m      *metrics.Metrics
	log    *slog.Logger
}

func (w *oplogWatcher) run(ctx context.Context) {
	interval := oplogProbeInterval
	if h := oplogProbeTestHook.Load(); h != nil {
		interval = *h
	}
	var hint bson.Timestamp
	lastErr := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start, err := w.cons.OplogStart(pctx, hint)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if err.Error() != lastErr {
				w.log.Warn("cannot find the start of the oplog window (ferry_oplog_headroom_seconds is stale); retrying", "err", err)
				lastErr = err.Error()
			}
		default:
			if lastErr != "" {
				w.log.Info("found the start of the oplog window again")
				lastErr = ""
			}
			hint = start
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			now, err := serverClock(cctx, w.src)
			cancel()
			if err != nil {
				now = time.Time{} // ours, then
			}
			w.m.OplogStart(w.stream, time.Unix(int64(start.T), 0), now)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// oplogProbeTestHook shortens the interval in tests.
var oplogProbeTestHook atomic.Pointer[time.Duration]
