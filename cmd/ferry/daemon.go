package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/api/option"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/metrics"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/stdout"
	"github.com/ferry-io/ferry/sink/webhook"
)

// shutdownBudget is how long the daemon takes to stop after SIGTERM: Cloud
// Run allows 10 s.
const shutdownBudget = 9 * time.Second

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

// runDaemon runs every stream of the configuration until ctx ends.
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
	log := newLogger(cfg.Log, stderr)
	log.Info("starting", "config", *path, "streams", len(cfg.Streams))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)

	clients := map[string]*mongo.Client{}
	defer func() {
		for _, c := range clients {
			_ = c.Disconnect(context.Background())
		}
	}()
	connect := func(uri config.MongoURI) (*mongo.Client, error) {
		if c := clients[uri.Reveal()]; c != nil {
			return c, nil
		}
		c, err := mongo.Connect(options.Client().ApplyURI(uri.Reveal()))
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", uri, err)
		}
		clients[uri.Reveal()] = c
		return c, nil
	}

	type runner struct {
		name string
		run  func(context.Context) error
	}
	var runners []runner
	var purgers []*tombstonePurger
	for i := range cfg.Streams {
		st := &cfg.Streams[i]
		client, err := connect(st.Source.URI)
		if err != nil {
			return err
		}
		var stateDBForSink *mongo.Database
		if cfg.State.Bolt == nil {
			sc, err := connect(cfg.StateURI())
			if err != nil {
				return err
			}
			stateDBForSink = sc.Database(cfg.State.Database)
		}
		s, err := buildSink(st, stdoutW, stateDBForSink)
		if err != nil {
			return fmt.Errorf("streams[%d].sink: %w", i, err)
		}
		if err := s.Connect(ctx); err != nil {
			return fmt.Errorf("streams[%d].sink: %w", i, err)
		}
		defer s.Close(context.Background())
		copts, err := st.ConsumerOptions()
		if err != nil {
			return fmt.Errorf("streams[%d]: %w", i, err)
		}
		copts = append(copts, ferry.WithHooks(m), ferry.Logger(log))
		proj, _ := s.(*mongoproj.Sink)
		h := sink.Handler(s)
		if cfg.State.Bolt != nil {
			if proj != nil {
				copts = append(copts, ferry.WithSweeper(proj.Sweep)) // a backfill removes what it did not touch
			}
			store, err := boltstore.Open(cfg.State.Bolt.Path)
			if err != nil {
				return fmt.Errorf("state.bolt.path: %w", err)
			}
			defer store.Close()
			c, err := ferry.NewConsumer(client, h, append(copts, ferry.Checkpoints(store))...)
			if err != nil {
				return fmt.Errorf("streams[%d]: %w", i, err)
			}
			runners = append(runners, runner{st.Name, c.Run})
			continue
		}
		stateClient, err := connect(cfg.StateURI())
		if err != nil {
			return err
		}
		gopts := append(st.GroupOptions(), group.StateDatabase(stateClient.Database(cfg.State.Database)),
			group.Consumer(copts...), group.Logger(log))
		if proj != nil {
			// Each partition's backfill sweeps only its own documents.
			gopts = append(gopts, group.Sweeper(proj.SweepPartition))
		}
		g, err := group.New(client, h, gopts...)
		if err != nil {
			return fmt.Errorf("streams[%d]: %w", i, err)
		}
		labels := prometheus.Labels{"stream": st.Name}
		dlq := stateClient.Database(cfg.State.Database).Collection("dlq")
		name := st.Name
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_partitions_owned",
				Help: "Partitions of the stream this member runs.", ConstLabels: labels},
				func() float64 { return float64(len(g.Owned())) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_ledger_duplicates_total",
				Help: "Events the ledger recognised as already applied (replays absorbed).", ConstLabels: labels},
				func() float64 { return float64(g.LedgerDuplicates()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_lease_renew_failures_total",
				Help: "Failed partition lease renewals.", ConstLabels: labels},
				func() float64 { return float64(g.LeaseRenewFailures()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_dlq_size",
				Help: "Events in the dead-letter store (read at scrape time).", ConstLabels: labels},
				func() float64 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					n, err := dlq.CountDocuments(ctx, bson.D{{Key: "stream", Value: name}})
					if err != nil {
						return -1
					}
					return float64(n)
				}),
		)
		if proj != nil && st.Sink.MongoDB.TombstoneRetention > 0 {
			cps, err := mongostore.New(stateClient.Database(cfg.State.Database))
			if err != nil {
				return fmt.Errorf("streams[%d]: %w", i, err)
			}
			defer cps.Close()
			p := &tombstonePurger{stream: st.Name, partitions: st.Group.Partitions,
				retention: st.Sink.MongoDB.TombstoneRetention, sink: proj, store: cps,
				state: stateClient.Database(cfg.State.Database), log: log}
			purgers = append(purgers, p)
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_tombstones_purged_total",
				Help: "Tombstones of the mongodb sink's projection purged by this member.", ConstLabels: labels},
				func() float64 { return float64(p.purged.Load()) }))
		}
		runners = append(runners, runner{st.Name, g.Run})
	}

	// The operating surface.
	var mu sync.Mutex
	var failed []string
	ready := false
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		pctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for _, c := range clients {
			if err := c.Database("admin").RunCommand(pctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
				http.Error(w, "mongodb unreachable", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !ready || len(failed) > 0 {
			http.Error(w, fmt.Sprintf("not ready; stopped streams: %v", failed), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	addr := cfg.Listen
	if port := os.Getenv("PORT"); port != "" {
		addr = ":" + port
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	var wg sync.WaitGroup
	errs := make(chan error, len(runners))
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.run(runCtx); err != nil {
				mu.Lock()
				failed = append(failed, r.name)
				mu.Unlock()
				log.Error("stream stopped", "stream", r.name, "err", err)
				errs <- fmt.Errorf("stream %s: %w", r.name, err)
			}
		}()
	}
	for _, p := range purgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(runCtx)
		}()
	}
	mu.Lock()
	ready = true
	mu.Unlock()

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining, checkpointing, releasing leases")
	case runErr = <-errs:
	}
	cancelRun()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownBudget):
		log.Warn("shutdown budget exceeded", "budget", shutdownBudget)
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	log.Info("stopped")
	return runErr
}

func buildSink(st *config.Stream, stdoutW io.Writer, state *mongo.Database) (sink.Sink, error) {
	switch {
	case st.Sink.MongoDB != nil:
		if state == nil {
			return nil, errors.New("the mongodb sink needs a MongoDB state store")
		}
		// The projection lives in the state store's cluster; with the same
		// client as the group, transactional effects share its transaction.
		return mongoproj.New(state.Client().Database(st.Sink.MongoDB.Database).Collection(st.Sink.MongoDB.Collection))
	case st.Sink.Webhook != nil:
		w := st.Sink.Webhook
		opts := []webhook.Option{webhook.Secret(w.Secret.Reveal()), webhook.Timeout(w.Timeout)}
		if w.Encoding == "canonical" {
			opts = append(opts, webhook.Canonical())
		}
		for k, v := range w.Headers {
			opts = append(opts, webhook.Header(k, v))
		}
		return webhook.New(w.URL, opts...)
	case st.Sink.NATS != nil:
		n := st.Sink.NATS
		opts := []natsjs.Option{natsjs.Subject(n.Subject), natsjs.Timeout(n.Timeout)}
		if n.Encoding == "canonical" {
			opts = append(opts, natsjs.Canonical())
		}
		return natsjs.New(n.URL, opts...)
	case st.Sink.Kafka != nil:
		k := st.Sink.Kafka
		copts := []kgo.Opt{kgo.ClientID(k.ClientID)}
		if k.TLS {
			copts = append(copts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
		if k.SASL != nil {
			m, err := kafkaSASL(k.SASL)
			if err != nil {
				return nil, err
			}
			copts = append(copts, kgo.SASL(m))
		}
		opts := []kafka.Option{kafka.Topic(k.Topic), kafka.Timeout(k.Timeout), kafka.ClientOptions(copts...)}
		if k.Encoding == "canonical" {
			opts = append(opts, kafka.Canonical())
		}
		return kafka.New(k.Brokers, opts...)
	case st.Sink.PubSub != nil:
		ps := st.Sink.PubSub
		opts := []pubsub.Option{pubsub.Timeout(ps.Timeout)}
		if ps.Emulator != "" {
			opts = append(opts, pubsub.Emulator(ps.Emulator))
		}
		if ps.Endpoint != "" {
			opts = append(opts, pubsub.ClientOptions(option.WithEndpoint(ps.Endpoint)))
		}
		if ps.Encoding == "canonical" {
			opts = append(opts, pubsub.Canonical())
		}
		return pubsub.New(ps.Project, ps.Topic, opts...)
	case st.Sink.Stdout != nil:
		opts := []stdout.Option{stdout.Writer(stdoutW)}
		if st.Sink.Stdout.Encoding == "canonical" {
			opts = append(opts, stdout.Canonical())
		}
		return stdout.New(opts...)
	}
	return nil, errors.New("no sink configured")
}

// kafkaSASL returns the SASL mechanism of the kafka sink's configuration.
func kafkaSASL(c *config.KafkaSASL) (sasl.Mechanism, error) {
	switch c.Mechanism {
	case config.KafkaSASLPlain:
		return plain.Auth{User: c.User, Pass: c.Password.Reveal()}.AsMechanism(), nil
	case config.KafkaSASLScramSHA256:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha256Mechanism(), nil
	case config.KafkaSASLScramSHA512:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unknown SASL mechanism %q", c.Mechanism)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
