package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// snapshotWait follows one snapshot request (ferry snapshot -wait) until
// every partition finished it, it was cancelled or replaced, or a
// partition stopped; it reads the request and the checkpoints every
// interval.
type snapshotWait struct {
	state    *snapshotState
	stream   *config.Stream
	id       string
	interval time.Duration
	out      io.Writer
	tty      bool // draw a bar redrawn in place; otherwise print lines
	cfgPath  string

	samples  []rateSample // the last rateWindow of (time, documents done)
	lastLine time.Time    // when the last plain line was printed
	lastKey  string       // the partitions' states then
	drawn    bool         // a bar is on the terminal's current line
	lastErr  string
	// failing is each partition's failing chunk's error, as last printed.
	failing map[int]string
}

type chunkFailure struct {
	tries int
	err   string
}

type rateSample struct {
	at   time.Time
	done int64
}

const (
	// rateWindow is how far back -wait's rate looks.
	rateWindow = 10 * time.Second
	// plainEvery is how often a plain line is printed while only the
	// counts change (a partition's state changing, or another tenth of
	// the documents done, prints one at once).
	plainEvery = 10 * time.Second
)

// waitView is the request's progress over the stream's partitions.
type waitView struct {
	done, total                           int64
	partitions                            int
	running, finished, cancelled, waiting int
	failed                                []string // why a partition cannot go on
	// failing: running partitions whose next chunk failed (the error and
	// how many tries), retried with backoff.
	failing map[int]chunkFailure
	// replacedBy is the request that replaced this one ("": none);
	// cancelledReq: the request is cancelled.
	replacedBy   string
	cancelledReq bool
	started      time.Time // the earliest start of the partitions' snapshots
	ended        time.Time // the latest end
}

func (v waitView) terminal() bool { return v.running == 0 && v.waiting == 0 }

// key changes with a partition's state and at every tenth of the way.
func (v waitView) key() string {
	return fmt.Sprint(v.running, v.finished, v.cancelled, v.waiting, len(v.failed), v.replacedBy, v.cancelledReq, int(v.percent()/10))
}

// view reads the request and the partitions' snapshots once.
func (w *snapshotWait) view(ctx context.Context) (waitView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var v waitView
	req, err := w.state.reqs.SnapshotRequest(ctx, w.stream.Name)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		v.replacedBy = "(none: the request was removed)"
	case err != nil:
		return v, err
	case req.ID != w.id:
		v.replacedBy = req.ID
	case req.Cancelled:
		v.cancelledReq = true
	}
	parts, _, err := readSnapshots(ctx, w.state, w.stream)
	if err != nil {
		return v, err
	}
	v.partitions = len(parts)
	ended := v.replacedBy != "" || v.cancelledReq // partitions that did not take it up never will
	estimated := 0                                // partitions whose estimate is known
	for _, p := range parts {
		mine := p.has && p.progress.Request == w.id
		if mine {
			v.done += p.progress.Done
			v.total += max(p.progress.Total, p.progress.Done)
			if p.progress.Total > 0 || !p.progress.Finished.IsZero() {
				estimated++
			}
			if s := p.progress.Started; !s.IsZero() && (v.started.IsZero() || s.Before(v.started)) {
				v.started = s
			}
			if f := p.progress.Finished; f.After(v.ended) {
				v.ended = f
			}
		}
		switch {
		case mine && !p.progress.Finished.IsZero() && p.progress.Cancelled:
			v.cancelled++
		case mine && !p.progress.Finished.IsZero():
			v.finished++
		case !mine && ended:
			v.cancelled++
		case p.state == checkpoint.StateStalled || p.state == checkpoint.StateInvalidated || p.state == checkpoint.StateNeedsBackfill:
			why := fmt.Sprintf("partition %d is %s", p.partition, p.state)
			if p.note != "" {
				why += " (" + p.note + ")"
			}
			v.failed = append(v.failed, why)
		case p.problem != "":
			v.failed = append(v.failed, fmt.Sprintf("partition %d: %s", p.partition, p.problem))
		case mine:
			v.running++
			if p.progress.Failures > 0 {
				if v.failing == nil {
					v.failing = map[int]chunkFailure{}
				}
				v.failing[p.partition] = chunkFailure{p.progress.Failures, p.progress.Error}
			}
		default:
			v.waiting++
		}
	}
	if estimated == 0 && v.finished < v.partitions && !ended {
		// No estimate yet (a filtered snapshot extrapolates its total from
		// its first chunks): the total is unknown, not what is done.
		v.total = 0
	}
	if estimated > 0 && estimated < v.partitions && !ended {
		// A partition records its estimate with its first chunk: until
		// every one did, the others are taken to be alike.
		v.total = v.total * int64(v.partitions) / int64(estimated)
	}
	return v, nil
}

// run follows the request and returns the exit code: 0 finished, 1
// cancelled, replaced or failed, 130 when ctx ended (Ctrl-C).
func (w *snapshotWait) run(ctx context.Context) int {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		v, err := w.view(ctx)
		now := time.Now()
		if err != nil && ctx.Err() == nil {
			if msg := err.Error(); msg != w.lastErr {
				w.lastErr = msg
				w.println(fmt.Sprintf("cannot read the progress (trying again every %v): %v", w.interval, err))
			}
		} else if err == nil {
			w.lastErr = ""
			w.sample(now, v.done)
			w.showFailing(v)
			if w.lastLine.IsZero() && !w.tty {
				w.show(now, v) // the first line, however quickly it ends
			}
			if v.terminal() || len(v.failed) > 0 {
				return w.finish(v)
			}
			w.show(now, v)
		}
		select {
		case <-ctx.Done():
			w.println("stopped waiting. The snapshot was NOT cancelled: it goes on.")
			fmt.Fprintf(w.out, "follow it:  ferry snapshot status -c %s -stream %s\n", w.cfgPath, w.stream.Name)
			fmt.Fprintf(w.out, "cancel it:  ferry snapshot cancel -c %s -stream %s -id %s\n", w.cfgPath, w.stream.Name, w.id)
			return 130
		case <-t.C:
		}
	}
}

// sample records the documents done at now, keeping rateWindow of them.
func (w *snapshotWait) sample(now time.Time, done int64) {
	if n := len(w.samples); n > 0 && done < w.samples[n-1].done {
		w.samples = w.samples[:0] // a partition went back a chunk (a takeover)
	}
	w.samples = append(w.samples, rateSample{now, done})
	for len(w.samples) > 2 && now.Sub(w.samples[0].at) > rateWindow {
		w.samples = w.samples[1:]
	}
}

// rate is the documents per second over the samples (0: not known yet).
func (w *snapshotWait) rate() float64 {
	if len(w.samples) < 2 {
		return 0
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	el := last.at.Sub(first.at).Seconds()
	if el <= 0 {
		return 0
	}
	return float64(last.done-first.done) / el
}

// show draws the bar, or prints a line when a partition's state changed,
// another tenth of the documents is done, or plainEvery passed.
func (w *snapshotWait) show(now time.Time, v waitView) {
	rate := w.rate()
	if w.tty {
		fmt.Fprintf(w.out, "\r\x1b[K%s", barLine(v, rate))
		w.drawn = true
		return
	}
	key := v.key()
	if key == w.lastKey && now.Sub(w.lastLine) < plainEvery {
		return
	}
	w.lastKey, w.lastLine = key, now
	fmt.Fprintf(w.out, "%s snapshot %s: %s\n", now.UTC().Format(time.RFC3339), w.id, progressText(v, rate))
}

// showFailing prints a line when a partition's next chunk starts failing
// (or fails with another error), and when it goes through again: a chunk
// that keeps failing is retried for as long as it fails, so the operator
// must see why the progress stopped.
func (w *snapshotWait) showFailing(v waitView) {
	parts := make([]int, 0, len(v.failing)+len(w.failing))
	for p := range v.failing {
		parts = append(parts, p)
	}
	for p := range w.failing {
		if _, still := v.failing[p]; !still {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		f, now := v.failing[p]
		switch was, before := w.failing[p]; {
		case now && (!before || was != f.err):
			w.println(fmt.Sprintf("partition %d: its next chunk failed (%s so far), retrying: %s", p, plural(f.tries, "attempt"), f.err))
		case !now && before:
			w.println(fmt.Sprintf("partition %d: its chunk went through; the snapshot goes on", p))
		}
	}
	w.failing = make(map[int]string, len(v.failing))
	for p, f := range v.failing {
		w.failing[p] = f.err
	}
}

// println prints a line, below the bar if one is drawn.
func (w *snapshotWait) println(s string) {
	if w.drawn {
		fmt.Fprintln(w.out)
		w.drawn = false
	}
	fmt.Fprintln(w.out, s)
}

// finish prints the outcome and returns the exit code.
func (w *snapshotWait) finish(v waitView) int {
	if v.finished == v.partitions {
		v.total = v.done // the estimate was one
	}
	if w.tty && v.finished == v.partitions {
		fmt.Fprintf(w.out, "\r\x1b[K%s", barLine(v, 0))
		w.drawn = true
	}
	took, avg := "", ""
	if !v.started.IsZero() && v.ended.After(v.started) {
		d := v.ended.Sub(v.started)
		took = " in " + d.Round(time.Millisecond).String()
		avg = fmt.Sprintf(" (%.0f documents/s)", float64(v.done)/d.Seconds())
	}
	name := fmt.Sprintf("snapshot %s of stream %s", w.id, w.stream.Name)
	switch {
	case len(v.failed) > 0:
		w.println(fmt.Sprintf("%s cannot finish: %s; %d documents delivered so far. It goes on when the partition runs again (ferry status says why it stopped).",
			name, strings.Join(v.failed, "; "), v.done))
		return 1
	case v.finished == v.partitions:
		w.println(fmt.Sprintf("%s finished: %d documents%s%s, %s", name, v.done, took, avg, plural(v.partitions, "partition")))
		return 0
	case v.replacedBy != "":
		w.println(fmt.Sprintf("%s was replaced by request %s: %d documents delivered (%d partitions finished, %d stopped)",
			name, v.replacedBy, v.done, v.finished, v.cancelled))
		return 1
	default:
		w.println(fmt.Sprintf("%s cancelled: %d documents delivered of about %d (%d partitions finished, %d cancelled)",
			name, v.done, v.total, v.finished, v.cancelled))
		return 1
	}
}

// percent is done out of total, 100 when every partition finished, and
// below 100 until then.
func (v waitView) percent() float64 {
	if v.partitions > 0 && v.finished == v.partitions {
		return 100
	}
	if v.total <= 0 {
		return 0
	}
	return min(100*float64(v.done)/float64(v.total), 99.9)
}

// eta is the time left at rate (0: unknown).
func (v waitView) eta(rate float64) time.Duration {
	if rate <= 0 || v.total <= v.done || v.terminal() {
		return 0
	}
	return time.Duration(float64(v.total-v.done) / rate * float64(time.Second))
}

// barLine is the terminal's progress line: a bar, the percentage,
// documents done of the estimate, the rate and the ETA (at most 79
// columns for counts below 10^10).
func barLine(v waitView, rate float64) string {
	const width = 20
	pc := v.percent()
	fill := int(pc / 100 * width)
	bar := "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]"
	return fmt.Sprintf("%s %5.1f%%  %d/%s docs  %s  ETA %s", bar, pc, v.done, totalText(v.total), rateText(rate), etaText(v.eta(rate)))
}

// progressText is a plain line's progress: percentage, documents, rate,
// ETA and the partitions' states.
func progressText(v waitView, rate float64) string {
	s := fmt.Sprintf("%.1f%%, %d of %s documents, %s, ETA %s; partitions:", v.percent(), v.done, totalText(v.total), rateText(rate), etaText(v.eta(rate)))
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{v.running, "running"}, {v.finished, "finished"}, {v.cancelled, "cancelled"}, {v.waiting, "not started (its owner takes the request up within snapshot.poll_interval)"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return s + " " + strings.Join(parts, ", ")
}

func totalText(total int64) string {
	if total <= 0 {
		return "?"
	}
	return fmt.Sprintf("~%d", total)
}

func rateText(rate float64) string {
	if rate <= 0 {
		return "-/s"
	}
	return fmt.Sprintf("%.0f/s", rate)
}

func etaText(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return "<1s"
	}
	return d.Round(time.Second).String()
}
