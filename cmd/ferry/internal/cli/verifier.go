package cli

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/internal/backoff"
)

// verifier runs `ferry verify` of one stream every verify.interval inside
// the daemon, over the last verify.window (from the oplog's start when the
// oplog holds less), and keeps the outcome for ferry_verify_missing and
// ferry_verify_last_run_timestamp. Every member runs it (it only reads);
// alert on the metric's maximum over members. A run that fails (it cannot
// read the window, or the window read no change although the state store
// shows the stream active in it: it checked nothing) is not a completed
// run: it logs why, and neither metric moves.
type verifier struct {
	st      *config.Stream
	src     *mongo.Client
	state   *mongo.Database
	log     *slog.Logger
	missing atomic.Int64 // -1 until the first run
	lastRun atomic.Int64 // unix seconds of the last completed run, 0: none
}

func newVerifier(st *config.Stream, src *mongo.Client, state *mongo.Database, log *slog.Logger) *verifier {
	v := &verifier{st: st, src: src, state: state, log: log.With("stream", st.Name)}
	v.missing.Store(-1)
	return v
}

func (v *verifier) run(ctx context.Context) {
	interval := v.st.Verify.Interval
	if h := verifierTestHook.Load(); h != nil {
		interval = *h
	}
	t := time.NewTimer(backoff.Jitter(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(interval, time.Minute))
		rep, proj, err := verifyWith(rctx, v.src, v.state, v.st, window{since: v.st.Verify.Window}, 20)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			v.log.Warn("verify failed", "err", err)
		case rep.Failure != "":
			v.log.Warn("verify checked nothing", "summary", rep.String(), "window", rep.Window(), "reason", rep.Failure)
		default:
			missing := int64(rep.Missing)
			if proj != nil {
				missing += int64(proj.Missing + proj.Extra + proj.Stale)
			}
			v.missing.Store(missing)
			v.lastRun.Store(time.Now().Unix())
			attrs := []any{"summary", rep.String(), "window", rep.Window()}
			if proj != nil {
				attrs = append(attrs, "projection", proj.String())
			}
			if missing > 0 {
				for _, ev := range rep.MissingEvents {
					attrs = append(attrs, "missing", ev.ShortID()+" "+ev.Operation)
				}
				v.log.Warn("verify found missing changes", attrs...)
			} else {
				v.log.Info("verify", attrs...)
			}
		}
		t.Reset(backoff.Jitter(interval))
	}
}

// verifierTestHook shortens the interval in tests.
var verifierTestHook atomic.Pointer[time.Duration]
