package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/metrics"
	ferryotel "github.com/ferry-io/ferry/otel"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// shutdownGrace is how much longer than the budget the daemon waits for
// its streams to stop before it gives up on them: it then exits without
// closing the sinks and stores they may still use.
const shutdownGrace = 20 * time.Second

// shutdownBudget is how long the daemon expects to take to stop after
// SIGTERM: a second less than the platform's grace period
// (shutdown.grace_period), which config.Parse checks the drain fits in.
func (d *daemon) shutdownBudget() time.Duration {
	return max(d.cfg.Shutdown.GracePeriod-time.Second, d.cfg.Shutdown.DrainTimeout)
}

// runValidate checks a configuration file without connecting to anything.
func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	cfg, code := loadFlags(fs, args, stderr)
	if cfg == nil {
		return code
	}
	fmt.Fprintf(stdout, "%s: ok (%d stream(s))\n", fs.Lookup("c").Value, len(cfg.Streams))
	return 0
}

// runDaemon runs every stream of the configuration until ctx ends. Its
// steps: open the streams (clients, sinks, stores, groups), register the
// metrics, serve the ops port, run everything; then, in reverse, stop.
func runDaemon(ctx context.Context, args []string, stdoutW, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "ferry.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	d := &daemon{cfg: cfg, cfgPath: *path, log: newLogger(cfg.Log, stderr), stdout: stdoutW, clients: map[clientKey]*mongo.Client{}}
	d.log.Info("starting", "config", *path, "streams", len(cfg.Streams))
	defer d.close()
	if err := d.setupTracing(ctx); err != nil {
		return err
	}
	if err := d.openStreams(ctx); err != nil {
		return err
	}
	d.registerMetrics()
	ops, err := d.serveOps()
	if err != nil {
		return err
	}
	return d.runAll(ctx, ops)
}

// daemon is one `ferry run`: its streams and what they use.
type daemon struct {
	cfg       *config.Config
	log       *slog.Logger
	stdout    io.Writer
	reg       *prometheus.Registry
	m         *metrics.Metrics
	clients   map[clientKey]*mongo.Client
	streams   []*stream
	purgers   []*tombstonePurger
	verifiers []*verifier
	// oplogWatchers report each stream's oplog window to the metrics.
	oplogWatchers []*oplogWatcher
	// cfgPath is the configuration file (the recovery commands of
	// /status name it); state and cps are the state store (state is nil
	// with bolt).
	cfgPath string
	state   *mongo.Database
	cps     checkpoint.Store
	// tracer is the OpenTelemetry hook, nil when tracing is off.
	tracer *ferryotel.Tracer
	// closers release sinks and stores, in reverse order, once every
	// stream stopped.
	closers []func()
	// abandoned: streams outlived the shutdown; their sinks and stores
	// are left open for the process exit.
	abandoned bool
}

// stream is one configured stream as the daemon runs it: a consumer group
// (MongoDB state store) or a single supervised consumer (bolt).
type stream struct {
	name   string
	path   string // streams[i], for messages in the configuration's terms
	cfg    *config.Stream
	run    func(context.Context) error
	status func() group.Status
	group  *group.Group     // nil with the bolt state store
	dlq    *mongo.Database  // the state database, nil with bolt
	proj   *mongoproj.Sink  // the mongodb sink, or nil
	cps    checkpoint.Store // the state store's checkpoints
	notes  *failureNotes
}

// openStreams connects the clients and sinks and builds every stream's
// group (or consumer). Nothing runs yet.
func (d *daemon) openStreams(ctx context.Context) error {
	d.reg = prometheus.NewRegistry()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.m = metrics.New(d.reg)
	var stateDB *mongo.Database
	var cps checkpoint.Store
	if d.cfg.State.Bolt == nil {
		sc, err := d.connect(roleState, d.cfg.StateURI(), d.cfg.StatePoolNeed())
		if err != nil {
			return err
		}
		stateDB = sc.Database(d.cfg.State.Database)
		ms, err := mongostore.New(stateDB)
		if err != nil {
			return err
		}
		cps = ms
	} else {
		store, err := boltstore.Open(d.cfg.State.Bolt.Path)
		if err != nil {
			return fmt.Errorf("state.bolt.path: %w", err)
		}
		d.closers = append(d.closers, func() { _ = store.Close() })
		cps = store
	}
	d.state, d.cps = stateDB, cps
	for i := range d.cfg.Streams {
		st, err := d.openStream(ctx, fmt.Sprintf("streams[%d]", i), &d.cfg.Streams[i], stateDB, cps)
		if err != nil {
			return err
		}
		d.streams = append(d.streams, st)
	}
	return nil
}

// openStream opens the stream at path (streams[i]); its errors name the
// path.
func (d *daemon) openStream(ctx context.Context, path string, sc *config.Stream, stateDB *mongo.Database, cps checkpoint.Store) (*stream, error) {
	client, err := d.connect(roleSource, sc.Source.URI, d.cfg.SourcePoolNeed(sc.Source.URI))
	if err != nil {
		return nil, fmt.Errorf("%s.source.uri: %w", path, err)
	}
	s, err := sc.NewSink(d.stdout, stateDB)
	if err != nil {
		return nil, fmt.Errorf("%s.sink: %w", path, err)
	}
	if err := s.Connect(ctx); err != nil {
		return nil, fmt.Errorf("%s.sink: %w", path, err)
	}
	d.closers = append(d.closers, func() { _ = s.Close(context.Background()) })
	copts, err := sc.GroupConsumerOptions(cps) // a single consumer adds ferry.Stream below
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st := &stream{name: sc.Name, path: path, cfg: sc, dlq: stateDB, cps: cps, notes: &failureNotes{}}
	probe, err := toolConsumer(sc, client, cps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.oplogWatchers = append(d.oplogWatchers, &oplogWatcher{stream: sc.Name, cons: probe, src: client, m: d.m, log: d.log.With("stream", sc.Name)})
	st.proj, _ = s.(*mongoproj.Sink)
	copts = append(copts, ferry.WithHooks(d.m), ferry.Logger(d.log))
	if d.tracer != nil {
		copts = append(copts, ferry.WithHooks(d.tracer))
	}
	// Every sink takes the batch a lane has ready in one Write: one bulk
	// write, one buffered write, every publish in flight before the first
	// ack; the delivery modes read and write the ledger once per batch.
	h := sink.BatchHandler(s)
	copts = append(copts, sc.BatchOptions()...)
	if stateDB == nil {
		if st.proj != nil {
			copts = append(copts, ferry.WithSweeper(st.proj.Sweep)) // a backfill removes what it did not touch
		}
		one := newSingle(sc.Name, d.log, func(s group.Status) { d.onState(st, s) })
		c, err := ferry.NewBatchConsumer(client, h, append(copts, ferry.Stream(sc.Name), ferry.Checkpoints(cps), ferry.WithHooks(one),
			ferry.LogStops(false), ferry.DrainTimeout(d.cfg.Shutdown.DrainTimeout))...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		one.c = c
		st.run, st.status = one.run, one.get
		return st, nil
	}
	gopts := append(sc.GroupOptions(), group.StateDatabase(stateDB), group.ConsumerOptions(copts...), group.Logger(d.log),
		group.DrainTimeout(d.cfg.Shutdown.DrainTimeout),
		group.OnStateChange(func(s group.Status) { d.onState(st, s) }))
	if st.proj != nil {
		// Each partition's backfill sweeps only its own documents.
		gopts = append(gopts, group.Sweeper(st.proj.SweepPartition))
	}
	g, err := group.NewBatch(client, h, gopts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st.group, st.run, st.status = g, g.Run, g.Status
	if sc.Verify.Interval > 0 {
		d.verifiers = append(d.verifiers, newVerifier(sc, client, stateDB, d.log))
	}
	if st.proj != nil && sc.Sink.MongoDB.TombstoneRetention > 0 {
		d.purgers = append(d.purgers, &tombstonePurger{stream: sc.Name, partitions: sc.Group.Partitions,
			retention: sc.Sink.MongoDB.TombstoneRetention, sink: st.proj, store: cps, state: stateDB, log: d.log})
	}
	return st, nil
}

// onState follows a stream's state changes: failures are counted, and a
// new failure reason is logged once with what the operator can do, in
// the configuration's terms.
func (d *daemon) onState(st *stream, s group.Status) {
	d.m.StreamState(st.name, string(s.State))
	if s.State != group.Failed || s.Failure == nil {
		return
	}
	d.m.StreamFailure(st.name, string(s.Failure.Class))
	if st.notes.first(s.Failure) {
		d.log.Warn("stream failed: what to do", "stream", st.name, "class", s.Failure.Class,
			"advice", advice(d.cfgPath, st.cfg, *s.Failure), "recheck", recheckText(s))
	}
}

// runAll runs every stream and purger until ctx ends (SIGTERM), then
// stops them: every stream drains, checkpoints and releases its leases
// before the ops server, the sinks and the stores are closed. It returns
// every stream's error.
func (d *daemon) runAll(ctx context.Context, ops *opsServer) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(d.streams))
	for i, st := range d.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.run(runCtx)
			if err == nil {
				return
			}
			var dup *lease.DuplicateMemberError
			if errors.As(err, &dup) {
				// This process cannot be a member: it stops, every stream,
				// and the process already running under the id goes on.
				errs[i] = duplicateMemberError(st, dup)
				d.log.Error("stopping: another live ferry run process uses this member id", "stream", st.name,
					"member_id", dup.Member, "err", errs[i])
				cancel()
				return
			}
			errs[i] = fmt.Errorf("stream %s: %w", st.name, err)
			d.log.Error("stream stopped", "stream", st.name, "err", err)
		}()
	}
	var pw sync.WaitGroup
	for _, p := range d.purgers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			p.run(runCtx)
		}()
	}
	for _, w := range d.oplogWatchers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			w.run(runCtx)
		}()
	}
	pw.Add(1)
	go func() {
		defer pw.Done()
		d.preflight(runCtx)
	}()
	for _, v := range d.verifiers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			v.run(runCtx)
		}()
	}
	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()
	ops.setReady(true)
	select {
	case <-ctx.Done():
		d.log.Info("shutting down: draining, checkpointing, releasing leases", "drain_timeout", d.cfg.Shutdown.DrainTimeout.String(),
			"grace_period", d.cfg.Shutdown.GracePeriod.String())
	case <-runCtx.Done(): // a stream cannot run in this process (duplicate member id)
		d.log.Info("shutting down: draining, checkpointing, releasing leases", "drain_timeout", d.cfg.Shutdown.DrainTimeout.String(),
			"grace_period", d.cfg.Shutdown.GracePeriod.String())
	case <-streamsDone:
		d.log.Error("every stream stopped")
	}
	ops.setReady(false)
	cancel()
	budget := d.shutdownBudget()
	budgetT := time.NewTimer(budget)
	defer budgetT.Stop()
	select {
	case <-streamsDone:
	case <-budgetT.C:
		d.log.Warn("shutdown budget exceeded; still waiting for the streams to stop", "budget", budget.String(),
			"grace_period", d.cfg.Shutdown.GracePeriod.String())
		select {
		case <-streamsDone:
		case <-time.After(shutdownGrace):
			d.abandoned = true
			d.log.Error("streams did not stop; exiting without closing their sinks and stores", "waited", (budget + shutdownGrace).String())
		}
	}
	pw.Wait()
	ops.shutdown()
	d.log.Info("stopped")
	return errors.Join(errs...)
}

// preflight logs what `ferry check` finds (without the oplog window,
// which the oplog watchers export), once, while the streams start: a warn
// at WARN, a fail at ERROR, and a summary. Nothing waits for it and no
// finding stops the daemon: a feature the deployment lacks fails its
// stream with the stream's own error, and the logged fix says what to do.
func (d *daemon) preflight(ctx context.Context) {
	p := &preflight{cfg: d.cfg, opts: preflightOptions{timeout: 5 * time.Second}, cps: d.cps,
		sources: map[config.MongoURI]*mongo.Client{}}
	if d.cfg.State.Bolt == nil {
		p.state = d.clients[clientKey{role: roleState, uri: d.cfg.StateURI().Reveal()}]
	}
	for _, st := range d.cfg.Streams {
		p.sources[st.Source.URI] = d.clients[clientKey{role: roleSource, uri: st.Source.URI.Reveal()}]
	}
	findings := p.run(ctx)
	if ctx.Err() != nil {
		return // stopped before it finished: what it found may be the stop's doing
	}
	logFindings(d.log, findings)
}

// duplicateMemberError says, in the configuration's terms, that another
// live process is a member of the stream's group under this process's
// group.member_id, and what to do.
func duplicateMemberError(st *stream, dup *lease.DuplicateMemberError) error {
	return fmt.Errorf("%s.group.member_id: %q is already used by another live ferry run process in stream %s "+
		"(it joined at %s and heartbeat at %s by the state store's clock, while this process watched it for %v); "+
		"this process stops and the other keeps running. Every process needs its own member_id: leave "+
		"group.member_id unset (the default, <host name or Cloud Run revision>:<random suffix>, is unique per process), "+
		"or give each process a distinct value (for example ${HOSTNAME})",
		st.path, dup.Member, st.name, dup.JoinedAt.Format(time.RFC3339Nano), dup.HeartbeatAt.Format(time.RFC3339Nano),
		dup.Waited.Round(time.Millisecond))
}

// close releases sinks and stores in reverse order, then the clients,
// unless streams were abandoned still running.
func (d *daemon) close() {
	if d.abandoned {
		return
	}
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	for _, c := range d.clients {
		_ = c.Disconnect(context.Background())
	}
}

// newLogger is the daemon's logger. Durations are written as Go writes
// them ("2.5s", "150ms"), not as slog's JSON default, a count of
// nanoseconds.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
