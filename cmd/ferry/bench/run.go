package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

// measurement is one run of one configuration (or of the raw loop).
type measurement struct {
	Events      int            `json:"events"`             // the backlog
	Delivered   int64          `json:"delivered"`          // what the destination received, duplicates included
	Distinct    int64          `json:"distinct"`           // distinct events; -1 unknown
	CountedHow  string         `json:"counted_how"`        // how the destination counted
	Window      time.Duration  `json:"window_ns"`          // what the rate and CPU figures cover
	WindowFrom  string         `json:"window_from"`        // first-event (the first event counted) or start
	WindowCount int64          `json:"window_events"`      // events delivered in the window
	Startup     *time.Duration `json:"startup_ns"`         // daemon start to the first event counted
	FerryCPU    time.Duration  `json:"ferry_cpu_ns"`       // this process, in the window
	EmulatorCPU *time.Duration `json:"emulator_cpu_ns"`    // the emulator child, in the window; nil with -uri
	ReceiverCPU *time.Duration `json:"receiver_cpu_ns"`    // the receiver child, in the window
	PeakRSS     int64          `json:"peak_rss_bytes"`     // this process
	StartRSS    int64          `json:"start_rss_bytes"`    // this process's RSS when the daemon started (Linux), for what the bench itself holds
	Duplicates  int64          `json:"duplicates"`         // Delivered - Distinct when both are known
	DaemonExit  int            `json:"daemon_exit_status"` // cli.Run's status after SIGTERM's equivalent
	// PassRates: the events/s of each pass when the measurement is the
	// fastest of several (the warm raw reads, the library's passes).
	PassRates []float64 `json:"pass_events_per_s,omitempty"`
}

func (m *measurement) rate() float64 {
	if m.Window <= 0 {
		return 0
	}
	return float64(m.WindowCount) / m.Window.Seconds()
}

// perEvent is d per event of the window, in µs.
func (m *measurement) perEvent(d time.Duration) float64 {
	if m.WindowCount == 0 {
		return 0
	}
	return float64(d) / 1e3 / float64(m.WindowCount)
}

// bench runs measurements with its options.
type bench struct {
	o      *settings
	stderr io.Writer
	runID  string
	seq    int
}

// names returns fresh database names for one measurement.
func (b *bench) names() (backlog, state, proj string) {
	b.seq++
	base := fmt.Sprintf("ferrybench_%s_%d", b.runID, b.seq)
	return base, base + "_state", base + "_proj"
}

// runRaw measures the raw driver loop on a new cluster with a backlog of
// n: a cold first read, then o.reads warm reads of which the fastest
// counts.
func (b *bench) runRaw(ctx context.Context, n int) (cold, warm *measurement, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	cl, err := newCluster(b.o.uri, n)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	dbName, _, _ := b.names()
	if b.o.uri != "" {
		cl.drop = append(cl.drop, dbName)
	}
	coll := cl.client.Database(dbName).Collection("events")
	at, err := loadBacklog(ctx, coll, n)
	if err != nil {
		return nil, nil, err
	}
	read := func() (*measurement, error) {
		_ = resetPeakRSS()
		startRSS := currentRSS()
		emu0, err := cl.usage()
		if err != nil {
			return nil, err
		}
		self0 := selfUsage()
		d, err := rawRead(ctx, coll, at, n)
		if err != nil {
			return nil, err
		}
		self1 := selfUsage()
		emu1, err := cl.usage()
		if err != nil {
			return nil, err
		}
		return &measurement{Events: n, Delivered: int64(n), Distinct: int64(n), CountedHow: "events read by the loop",
			Window: d, WindowFrom: "start", WindowCount: int64(n), FerryCPU: self1.cpu() - self0.cpu(),
			EmulatorCPU: cpuDelta(emu0, emu1), PeakRSS: self1.PeakRSS, StartRSS: startRSS}, nil
	}
	if cold, err = read(); err != nil {
		return nil, nil, err
	}
	var rates []float64
	for range b.o.reads {
		m, err := read()
		if err != nil {
			return nil, nil, err
		}
		rates = append(rates, m.rate())
		if warm == nil || m.rate() > warm.rate() {
			warm = m
		}
	}
	warm.PassRates = rates
	return cold, warm, nil
}

func cpuDelta(a, b *usage) *time.Duration {
	if a == nil || b == nil {
		return nil
	}
	d := b.cpu() - a.cpu()
	return &d
}

// runConfiguration measures cfg on a new cluster with a backlog of n: the
// backlog loaded and read once raw (untimed, so the emulator's per-event
// encodings are built as for the warm raw figure), a receiver started,
// then `ferry run` in this process until the receiver has every event.
func (b *bench) runConfiguration(ctx context.Context, cfg configuration, n int) (m *measurement, err error) {
	if cfg.library {
		return b.runLibrary(ctx, cfg, n)
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	cl, err := newCluster(b.o.uri, n)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	dbName, stateDB, projDB := b.names()
	if b.o.uri != "" {
		cl.drop = append(cl.drop, dbName, stateDB, projDB)
	}
	coll := cl.client.Database(dbName).Collection("events")
	at, err := loadBacklog(ctx, coll, n)
	if err != nil {
		return nil, err
	}
	if _, err := rawRead(ctx, coll, at, n); err != nil {
		return nil, err
	}
	cl.disconnect() // nothing but the daemon talks to the cluster from here on

	var pipeR, pipeW *os.File
	if cfg.sink == "stdout" {
		if pipeR, pipeW, err = os.Pipe(); err != nil {
			return nil, err
		}
		defer pipeW.Close()
	}
	rcv, err := startReceiver(cfg.sink, n, cl.uri, projDB+"."+projCollection, pipeR)
	if pipeR != nil {
		pipeR.Close() // the receiver has its own copy
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rcv.close()) }()

	dir, err := os.MkdirTemp("", "ferry-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	body, err := cfg.yaml(place{uri: cl.uri, db: dbName, coll: "events", stateDB: stateDB, projDB: projDB,
		boltPath: filepath.Join(dir, "state.db"), startAt: time.Unix(int64(at.T), 0), logLevel: b.o.logLevel,
		receiver: rcv.ready, secret: "whsec_" + base64.StdEncoding.EncodeToString(secret)})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "ferry.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return nil, err
	}
	var stdout io.Writer = io.Discard
	if pipeW != nil {
		stdout = pipeW
	}

	emuStart, err := cl.usage()
	if err != nil {
		return nil, err
	}
	rcvStart, err := rcv.usage()
	if err != nil {
		return nil, err
	}
	if b.o.profile != "" {
		stopProfiles, err := b.startProfiles(cfg.name, cl, rcv)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, stopProfiles()) }()
	}
	_ = resetPeakRSS()
	startRSS := currentRSS()
	logs := &lockedBuffer{}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	exited := make(chan struct{})
	var code int // cli.Run's, once exited is closed
	start := time.Now()
	self0 := selfUsage()
	go func() {
		defer close(exited)
		code = cli.Run(dctx, []string{"run", "-c", path}, stdout, logs)
	}()
	fail := func(err error) (*measurement, error) {
		stop()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
		if c, cerr := rcv.call("counts"); cerr == nil {
			err = fmt.Errorf("%w (the receiver had %d events, %d distinct)", err, c.Counts.Delivered, c.Counts.Distinct)
		}
		return nil, fmt.Errorf("%s: %w\n--- the daemon's log (its last 4000 bytes):\n%s", cfg.name, err, logs.tail(4000))
	}
	first, err := waitNote(ctx, rcv, "first", exited, &code)
	if err != nil {
		return fail(err)
	}
	emuFirst, err := cl.usage()
	if err != nil {
		return fail(err)
	}
	rcvFirst, err := rcv.usage()
	if err != nil {
		return fail(err)
	}
	done, err := waitNote(ctx, rcv, "done", exited, &code)
	if err != nil {
		return fail(err)
	}
	emuDone, err := cl.usage()
	if err != nil {
		return fail(err)
	}
	rcvDone, err := rcv.usage()
	if err != nil {
		return fail(err)
	}
	stop() // as SIGTERM: drain, checkpoint, release the leases
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s: the daemon did not stop within 60 s of its context ending\n%s", cfg.name, logs.tail(4000))
	}
	if code != 0 {
		return nil, fmt.Errorf("%s: ferry run exited with status %d\n--- its log:\n%s", cfg.name, code, logs.tail(4000))
	}
	if pipeW != nil {
		pipeW.Close() // the receiver reads to the end of the pipe
	}
	got, err := rcv.call("verify")
	if err != nil {
		return nil, err
	}
	startup := first.at.Sub(start)
	m = &measurement{Events: n, Delivered: got.Counts.Delivered, Distinct: got.Counts.Distinct, CountedHow: got.Counts.How,
		Window: done.at.Sub(first.at), WindowFrom: "first-event", WindowCount: done.count - first.count, Startup: &startup,
		FerryCPU: done.self.cpu() - first.self.cpu(), EmulatorCPU: cpuDelta(emuFirst, emuDone),
		ReceiverCPU: cpuDelta(&rcvFirst, &rcvDone), PeakRSS: done.self.PeakRSS, StartRSS: startRSS, DaemonExit: code}
	if m.WindowCount <= 0 || m.Window <= 0 {
		// Every event arrived at once: measure from the daemon's start.
		m.Window, m.WindowFrom, m.WindowCount = done.at.Sub(start), "start", done.count
		m.FerryCPU = done.self.cpu() - self0.cpu()
		m.EmulatorCPU, m.ReceiverCPU = cpuDelta(emuStart, emuDone), cpuDelta(&rcvStart, &rcvDone)
	}
	if m.Distinct >= 0 {
		m.Duplicates = m.Delivered - m.Distinct
	}
	return m, nil
}

// startProfiles starts CPU profiles of this process, the emulator and the
// receiver into the -cpuprofile directory, named after the configuration.
func (b *bench) startProfiles(name string, cl *cluster, rcv *child) (stop func() error, err error) {
	base := filepath.Join(b.o.profile, name)
	if err := startProfile(base + "-ferry.pprof"); err != nil {
		return nil, err
	}
	paths := map[*child]string{rcv: base + "-" + rcv.role + ".pprof"}
	if cl.emu != nil {
		paths[cl.emu] = base + "-" + cl.emu.role + ".pprof"
	}
	stopKids, err := profileChildren(paths)
	if err != nil {
		return nil, errors.Join(err, stopProfile())
	}
	return func() error { return errors.Join(stopProfile(), stopKids()) }, nil
}

// waitNote waits for the receiver's note want; the daemon exiting (with
// *code) or ctx ending first is an error.
func waitNote(ctx context.Context, rcv *child, want string, exited <-chan struct{}, code *int) (stampedNote, error) {
	for {
		select {
		case n := <-rcv.notes:
			if n.note == want {
				return n, nil
			}
		case <-exited:
			return stampedNote{}, fmt.Errorf("ferry run exited (status %d) before the receiver's %q", *code, want)
		case <-rcv.exited:
			return stampedNote{}, fmt.Errorf("the receiver exited before its %q: %s", want, rcv.stderr.tail(2000))
		case <-ctx.Done():
			return stampedNote{}, fmt.Errorf("waiting for the receiver's %q: %w (-timeout)", want, ctx.Err())
		}
	}
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
