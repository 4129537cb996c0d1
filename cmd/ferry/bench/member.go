package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// The member child is one member of the snapshot bench's consumer group:
// the group `ferry run` builds from the same configuration file (the
// config package's sink, group and consumer options, a MongoDB state
// store), with the snapshot settings the file has no keys for yet from
// its environment. It tells the bench, on its stdout, the _id of every
// snapshot row its sink took (a rows message per batch, written before
// the handler returns: a row the bench never heard of was not delivered,
// and its chunk is not finished), and answers status with the partitions
// it owns and their lag.

// The member's environment.
const (
	memberConfigEnv = "FERRY_BENCH_MEMBER_CONFIG" // the ferry.yaml path
	memberSinkEnv   = "FERRY_BENCH_MEMBER_SINK"   // "none": a no-op handler instead of the file's sink
	memberChunkEnv  = "FERRY_BENCH_SNAPSHOT_CHUNK"
	memberRateEnv   = "FERRY_BENCH_SNAPSHOT_RATE" // documents per second per partition, 0 none
	memberPollEnv   = "FERRY_BENCH_SNAPSHOT_POLL" // how often a request is looked for
	memberLogEnv    = "FERRY_BENCH_MEMBER_LOG"    // debug, info, warn, error
)

// memberStatus is a member's answer to status.
type memberStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Owned: the partitions it runs; Lag their lag in seconds (as
	// ferry_lag_seconds: now minus the oldest pending event's cluster
	// time, 0 when none is pending), in the same order.
	Owned []int     `json:"owned"`
	Lag   []float64 `json:"lag_s"`
	// Failure: why the stream failed on this member (group.Status), ""
	// when it did not.
	Failure string `json:"failure,omitempty"`
}

// lagHook keeps each partition's oldest pending cluster time, as the
// consumer reports it (ferry.HookQueue), the metric's source.
type lagHook struct {
	mu     sync.Mutex
	oldest map[int]time.Time
}

func (h *lagHook) OnQueue(q ferry.QueueInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldest == nil {
		h.oldest = map[int]time.Time{}
	}
	h.oldest[q.Partition] = q.OldestPending
}

func (h *lagHook) lag(p int, now time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ferry.LagOf(now, h.oldest[p]).Seconds()
}

// reportRows wraps h: after each call, the _ids of the batch's snapshot
// rows the sink took go to the bench.
func reportRows(h ferry.BatchHandler, out *childOut) ferry.BatchHandler {
	return func(ctx context.Context, batch []*ferry.Event) error {
		err := h(ctx, batch)
		var be *ferry.BatchError
		partial := err != nil && errors.As(err, &be) && len(be.Errs) == len(batch)
		if err != nil && !partial {
			return err
		}
		var rows []byte
		for i, ev := range batch {
			if ev.OperationType != ferry.OperationBackfill || partial && be.Errs[i] != nil {
				continue
			}
			if id, ok := ev.DocumentKey.Lookup("_id").AsInt64OK(); ok {
				rows = appendRowIDs(rows, id)
			}
		}
		if len(rows) > 0 {
			out.send(message{Kind: "rows", Rows: rows})
		}
		return err
	}
}

func envInt(name string, def int) (int, error) {
	s := os.Getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, s, err)
	}
	return v, nil
}

func runMember(out *childOut) error {
	cfg, err := config.Load(os.Getenv(memberConfigEnv))
	if err != nil {
		return err
	}
	if len(cfg.Streams) != 1 || cfg.State.Bolt != nil {
		return errors.New("a member runs one stream with a MongoDB state store")
	}
	sc := &cfg.Streams[0]
	chunk, err := envInt(memberChunkEnv, ferry.DefaultSnapshotChunk)
	if err != nil {
		return err
	}
	rate, err := strconv.ParseFloat(orDefault(os.Getenv(memberRateEnv), "0"), 64)
	if err != nil {
		return fmt.Errorf("%s: %w", memberRateEnv, err)
	}
	poll, err := time.ParseDuration(orDefault(os.Getenv(memberPollEnv), "2s"))
	if err != nil {
		return fmt.Errorf("%s: %w", memberPollEnv, err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(os.Getenv(memberLogEnv), "info"))); err != nil {
		return fmt.Errorf("%s: %w", memberLogEnv, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	connect := func(uri config.MongoURI, need uint64) (*mongo.Client, error) {
		opts := options.Client().ApplyURI(uri.Reveal())
		if size, explicit := config.PoolSize(uri, need); !explicit {
			opts.SetMaxPoolSize(size)
		}
		return mongo.Connect(opts)
	}
	src, err := connect(sc.Source.URI, cfg.SourcePoolNeed(sc.Source.URI))
	if err != nil {
		return err
	}
	defer src.Disconnect(context.Background())
	stateClient, err := connect(cfg.StateURI(), cfg.StatePoolNeed())
	if err != nil {
		return err
	}
	defer stateClient.Disconnect(context.Background())
	stateDB := stateClient.Database(cfg.State.Database)
	cps, err := mongostore.New(stateDB)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := func(context.Context, []*ferry.Event) error { return nil }
	var proj *mongoproj.Sink
	if os.Getenv(memberSinkEnv) != "none" {
		s, err := sc.NewSink(io.Discard, stateDB)
		if err != nil {
			return err
		}
		if err := s.Connect(ctx); err != nil {
			return err
		}
		defer s.Close(context.Background())
		h, proj = sink.BatchHandler(s), s.(*mongoproj.Sink)
	}
	copts, err := sc.GroupConsumerOptions(cps)
	if err != nil {
		return err
	}
	lag := &lagHook{}
	copts = append(copts, sc.BatchOptions()...)
	copts = append(copts, ferry.WithHooks(lag), ferry.Logger(log), ferry.SnapshotChunkSize(chunk),
		ferry.SnapshotMaxRate(rate), ferry.SnapshotPollInterval(poll))
	gopts := append(sc.GroupOptions(), group.StateDatabase(stateDB), group.ConsumerOptions(copts...), group.Logger(log))
	if proj != nil {
		gopts = append(gopts, group.Sweeper(proj.SweepPartition))
	}
	g, err := group.NewBatch(src, reportRows(h, out), gopts...)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- g.Run(ctx) }()
	out.send(message{Kind: "ready", Ready: &ready{MemberID: g.MemberID()}})
	out.serve(os.Stdin, func(cmd string) message {
		switch cmd {
		case "sync": // every rows message before this reply has been written
			return message{}
		case "status":
			gs := g.Status()
			st := memberStatus{ID: g.MemberID(), State: string(gs.State)}
			if gs.Failure != nil {
				st.Failure = fmt.Sprintf("partition %d: %s: %v", gs.FailedPartition, gs.Failure.Class, gs.Failure.Err)
			}
			now := time.Now()
			for p := range g.Owned() {
				st.Owned = append(st.Owned, p)
			}
			slices.Sort(st.Owned)
			for _, p := range st.Owned {
				st.Lag = append(st.Lag, lag.lag(p, now))
			}
			return message{Member: &st}
		}
		return message{Error: fmt.Sprintf("unknown command %q", cmd)}
	})
	cancel() // stdin closed: stop as SIGTERM would
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
