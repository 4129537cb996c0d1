package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// runBench runs the bench command line args and prints the report on
// stdout; progress goes to stderr.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "snapshot" {
		return runSnapshotBench(ctx, args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	// The daemon listens on :$PORT when PORT is set; the bench's daemons
	// listen on a free port of their own.
	_ = os.Unsetenv("PORT")
	b := &bench{o: o, stderr: stderr, runID: newRunID()}
	r := newReport(o)
	r.noteLoad()
	if o.sweep != nil {
		err = b.sweep(ctx, r)
	} else {
		err = b.table(ctx, r)
	}
	if err != nil {
		return err
	}
	r.noteLoad()
	r.MethodNotes = methodNotes(r, o)
	if o.json {
		err = r.writeJSON(stdout)
	} else {
		r.writeTable(stdout)
	}
	return errors.Join(err, r.failures())
}

// table measures the raw loop and every selected configuration, o.runs
// times, interleaved (raw, then each configuration, then again), so that
// a drift of the machine's speed touches all of them alike.
func (b *bench) table(ctx context.Context, r *report) error {
	var colds, warms []*measurement
	per := make([][]*measurement, len(b.o.only))
	failed := make([]error, len(b.o.only))
	for run := range b.o.runs {
		cold, warm, err := b.runRaw(ctx, b.o.n)
		if err != nil {
			return fmt.Errorf("raw loop: %w", err)
		}
		colds, warms = append(colds, cold), append(warms, warm)
		b.progress(run, "raw loop: cold %s events/s, warm %s events/s", rateText(cold.rate()), rateText(warm.rate()))
		for i, cfg := range b.o.only {
			if failed[i] != nil {
				continue // it failed in an earlier run: a hang would cost -timeout again
			}
			m, err := b.runConfiguration(ctx, cfg, b.o.n)
			if err != nil {
				if ctx.Err() != nil {
					return err // interrupted
				}
				// One configuration failing (or hanging until -timeout)
				// does not cost the others their figures: the table marks
				// it and the bench exits non-zero.
				failed[i] = fmt.Errorf("run %d: %w", run+1, err)
				b.progress(run, "%s FAILED: %v", cfg.name, err)
				continue
			}
			per[i] = append(per[i], m)
			b.progress(run, "%s: %s events/s, %.1f µs Ferry CPU per event", cfg.name, rateText(m.rate()), m.perEvent(m.FerryCPU))
		}
	}
	r.Rows = append(r.Rows, summarize("raw-cold", "raw driver loop, cold first read", colds, warms))
	r.Rows = append(r.Rows, summarize("raw-warm", fmt.Sprintf("raw driver loop, warm (best of %d)", b.o.reads), warms, warms))
	for i, cfg := range b.o.only {
		title := cfg.title
		if cfg.library {
			title += fmt.Sprintf(" (best of %d)", b.o.reads)
		}
		x := summarize(cfg.name, title, per[i], warms)
		x.Sink, x.Mode, x.Partitions = cfg.sink, cfg.mode, cfg.partitions
		if failed[i] != nil {
			x.Error = failed[i].Error()
		}
		r.Rows = append(r.Rows, x)
	}
	return nil
}

// sweep measures the selected configurations' peak RSS over the sweep's
// backlog sizes.
func (b *bench) sweep(ctx context.Context, r *report) error {
	r.SweepSizes = b.o.sweep
	for _, cfg := range b.o.only {
		s := sweepRow{Name: cfg.name, Title: cfg.title}
		lo, hi := int64(0), int64(0)
		for _, n := range b.o.sweep {
			var rss, rates, start []float64
			for run := range b.o.runs {
				m, err := b.runConfiguration(ctx, cfg, n)
				if err != nil {
					return err
				}
				rss, rates, start = append(rss, float64(m.PeakRSS)), append(rates, m.rate()), append(start, float64(m.StartRSS))
				b.progress(run, "%s, %d events: peak RSS %.1f MiB, %s events/s", cfg.name, n, float64(m.PeakRSS)/(1<<20), rateText(m.rate()))
			}
			peak := int64(median(rss))
			s.PeakRSSBytes, s.EventsPerS = append(s.PeakRSSBytes, peak), append(s.EventsPerS, median(rates))
			s.StartRSS = append(s.StartRSS, int64(median(start)))
			if lo == 0 || peak < lo {
				lo = peak
			}
			hi = max(hi, peak)
		}
		if lo > 0 {
			s.MaxOverMin = float64(hi) / float64(lo)
		}
		r.Sweep = append(r.Sweep, s)
	}
	return nil
}

func (b *bench) progress(run int, format string, args ...any) {
	prefix := "bench: "
	if b.o.runs > 1 {
		prefix = fmt.Sprintf("bench: run %d/%d: ", run+1, b.o.runs)
	}
	fmt.Fprintf(b.stderr, prefix+format+"\n", args...)
}

// methodNotes say how the figures were made, printed under the table.
func methodNotes(r *report, o *settings) []string {
	src := "a new MongoDB emulator (mongotest) in a child process"
	if o.uri != "" {
		src = "the -uri cluster (new databases, dropped afterwards; no emulator CPU figure)"
	}
	notes := []string{
		"Each row is measured on " + src + " with the backlog loaded into a new collection. The raw rows read it with a driver `for stream.Next()` loop in this process (startAtOperationTime before the backlog): the cold first read, then the best of -raw-reads more.",
		"Each configuration first reads the backlog once with the raw loop, untimed (the emulator's per-event encodings are then built, as for the warm raw read), then runs `ferry run` in this process (cli.Run with a generated file: start_at before the backlog, every other setting the default) until the receiver has every event, and stops it as SIGTERM would.",
		"events/s and CPU per event cover the window from the first event the receiver counts to the last (the daemon's startup is outside it: startup_ms in -json). vs warm raw is a configuration's rate over the same run's warm raw rate.",
		"Ferry CPU: getrusage of this process over the window; it runs nothing but the daemon then (the bench's own client is disconnected, its goroutines wait on pipes). For the raw rows it is the loop's. Emulator and receiver CPU: each child process's own getrusage over the same window.",
		"The library row is the Go library without the daemon, as BenchmarkConsumerVsRawStream in the root module measures it: a ferry.Consumer in this process with a no-op handler (it marks each event's _id seen), bolt checkpoints and every other option the default, from its first handler call to the last event's; no receiver. It is the fastest of as many passes as the raw loop's warm reads (-raw-reads), on one new cluster, as the warm raw figure is the fastest of its reads.",
		"Receivers, all in the receiver child: stdout is a pipe the child reads lines from (the sink's writes are real write syscalls); webhook is an HTTP server answering 200 without checking signatures; Kafka is kfake (4 partitions), NATS an embedded nats-server (JetStream, file storage), Pub/Sub pstest. The MongoDB projection writes to the emulator itself; the child polls its count (collStats) every 5 ms, as it polls Kafka's high watermarks and the JetStream stream's count.",
	}
	if r.RSSPerRun {
		notes = append(notes, "peak RSS: this process's VmHWM during the configuration, reset (clear_refs) before it starts, after freed memory is returned to the OS.")
	} else {
		notes = append(notes, "peak RSS: this process's lifetime peak (getrusage): the kernel's peak cannot be reset here, so later rows include earlier ones.")
	}
	notes = append(notes, "delivered: the fewest distinct events a run delivered, out of the backlog, and the most duplicates (each receiver counts distinct event ids, or the destination de-duplicates: JetStream by Nats-Msg-Id, the projection by _id; Kafka's are read back after the run).")
	return notes
}
