package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/config"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/lease"
)

// stateDB connects to the configuration's state store (MongoDB only).
func stateDB(ctx context.Context, cfg *config.Config) (*mongo.Database, func(), error) {
	if cfg.State.Bolt != nil {
		return nil, nil, fmt.Errorf("state.bolt: status and dlq need a MongoDB state store (state.uri)")
	}
	client, err := mongo.Connect(options.Client().ApplyURI(cfg.StateURI().Reveal()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the state store %s: %w", cfg.StateURI(), err)
	}
	return client.Database(cfg.State.Database), func() { _ = client.Disconnect(context.Background()) }, nil
}

// loadFlags parses a subcommand's flags, whose -c names the configuration
// file, and loads it. The exit code is 0 on success, 2 for bad flags, 1 for
// a bad configuration (reported on stderr).
func loadFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (*config.Config, int) {
	fs.SetOutput(stderr)
	path := fs.String("c", "ferry.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, 1
	}
	return cfg, 0
}

// withState opens the configuration's state store (with a 15 s budget),
// runs fn and reports its error as "ferry <name>: ...", exit code 1.
func withState(ctx context.Context, name string, cfg *config.Config, stderr io.Writer,
	fn func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error) int {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := func() error {
		db, closeDB, err := stateDB(ctx, cfg)
		if err != nil {
			return err
		}
		defer closeDB()
		ls, err := lease.New(db)
		if err != nil {
			return err
		}
		cps, err := mongostore.New(db)
		if err != nil {
			return err
		}
		return fn(ctx, db, ls, cps)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "ferry %s: %v\n", name, err)
		return 1
	}
	return 0
}

// runStatus prints members, partitions, owners, epochs, checkpoint age and
// lag of every stream, from the state store.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code := loadFlags(flag.NewFlagSet("status", flag.ContinueOnError), args, stderr)
	if cfg == nil {
		return code
	}
	return withState(ctx, "status", cfg, stderr, func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		return printStatus(ctx, cfg, db, ls, cps, stdout)
	})
}

func printStatus(ctx context.Context, cfg *config.Config, db *mongo.Database, ls *lease.Store, cps *mongostore.Store, stdout io.Writer) error {
	now := time.Now()
	var hello struct {
		LocalTime time.Time `bson:"localTime"`
	}
	if err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err == nil {
		now = hello.LocalTime // ages by the server's clock
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, st := range cfg.Streams {
		members, err := ls.Members(ctx, st.Name)
		if err != nil {
			return err
		}
		leases, err := ls.List(ctx, st.Name)
		if err != nil {
			return err
		}
		checkpoints, err := cps.List(ctx, st.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "stream %s: %d partition(s), %d live member(s)\n", st.Name, st.Group.Partitions, len(members))
		for _, m := range members {
			fmt.Fprintf(w, "  member\t%s\theartbeat %s ago\n", m.ID, now.Sub(m.HeartbeatAt).Round(time.Millisecond))
		}
		fmt.Fprintln(w, "  partition\towner\tepoch\tcheckpoint age\tlag\tstate")
		byP := map[int]lease.Lease{}
		for _, l := range leases {
			byP[l.Partition] = l
		}
		cpByP := map[int]int{}
		for i, cp := range checkpoints {
			cpByP[cp.Partition] = i
		}
		for p := 0; p < st.Group.Partitions; p++ {
			owner, epoch := "-", "-"
			if l, ok := byP[p]; ok {
				epoch = fmt.Sprint(l.Epoch)
				if l.Owner != "" && !l.Expired {
					owner = l.Owner
				}
			}
			age, lag, state := "-", "-", "no checkpoint"
			if i, ok := cpByP[p]; ok {
				cp := checkpoints[i]
				age = now.Sub(cp.UpdatedAt).Round(time.Millisecond).String()
				if cp.ClusterTime.T > 0 {
					lag = now.Sub(time.Unix(int64(cp.ClusterTime.T), 0)).Round(time.Second).String()
				}
				state = string(cp.State)
				if state == "" {
					state = "running"
				}
				if cp.Note != "" {
					state += " (" + cp.Note + ")"
				}
			}
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\t%s\n", p, owner, epoch, age, lag, state)
		}
	}
	return w.Flush()
}

// runDLQ lists the dead-letter entries of a stream.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "replay" {
		return runDLQReplay(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintln(stderr, "usage: ferry dlq list|replay -c ferry.yaml [-stream name] [-n 50]")
		return 2
	}
	fs := flag.NewFlagSet("dlq list", flag.ContinueOnError)
	stream := fs.String("stream", "", "stream name (default: every stream)")
	n := fs.Int("n", 50, "at most this many entries per stream")
	cfg, code := loadFlags(fs, args[1:], stderr)
	if cfg == nil {
		return code
	}
	return withState(ctx, "dlq", cfg, stderr, func(ctx context.Context, db *mongo.Database, _ *lease.Store, _ *mongostore.Store) error {
		dlq := deadletter.NewMongo(db, "dlq")
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "stream\tpartition\tevent\toperation\tnamespace\tattempts\tlast attempt\terror")
		for _, st := range cfg.Streams {
			if *stream != "" && st.Name != *stream {
				continue
			}
			entries, err := dlq.List(ctx, st.Name, *n)
			if err != nil {
				return err
			}
			for _, e := range entries {
				id := e.EventID
				if len(id) > 16 {
					id = id[:16]
				}
				msg := e.Error
				if len(msg) > 120 {
					msg = msg[:120] + "…"
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Stream, e.Partition, id, e.Operation, e.Namespace, e.Attempts,
					e.LastAt.Format(time.RFC3339), msg)
			}
		}
		return w.Flush()
	})
}

// runDLQReplay re-delivers dead-lettered events through their stream's sink
// and removes each entry once its sink acknowledged it. Each entry is turned
// back into the event the handler saw (ferry.DeadLetterEvent): a change
// event or a backfill event (the scanned document), with its original event
// id, so receivers de-duplicate the replay.
func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dlq replay", flag.ContinueOnError)
	stream := fs.String("stream", "", "stream name (required)")
	cfg, code := loadFlags(fs, args, stderr)
	if cfg == nil {
		return code
	}
	st := cfg.Stream(*stream)
	if st == nil {
		fmt.Fprintf(stderr, "ferry dlq replay: -stream: no stream named %q in the configuration\n", *stream)
		return 2
	}
	db, closeDB, err := stateDB(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ferry dlq:", err)
		return 1
	}
	defer closeDB()
	s, err := buildSink(st, stdout, db)
	if err != nil {
		fmt.Fprintln(stderr, "ferry dlq replay:", err)
		return 1
	}
	if err := s.Connect(ctx); err != nil {
		fmt.Fprintln(stderr, "ferry dlq replay:", err)
		return 1
	}
	defer s.Close(context.Background())
	dlq := deadletter.NewMongo(db, "dlq")
	entries, err := dlq.List(ctx, st.Name, 0)
	if err != nil {
		fmt.Fprintln(stderr, "ferry dlq:", err)
		return 1
	}
	replayed, failed := 0, 0
	for _, e := range entries {
		// The event as the handler saw it, change or backfill event, with
		// its original event id (the receiver's idempotency key).
		ev, err := ferry.DeadLetterEvent(e)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "event %s: %v\n", shortEventID(e.EventID), err) // names the entry and the way out
			continue
		}
		if err := s.Write(ctx, []*ferry.Event{ev}); err != nil {
			failed++
			fmt.Fprintf(stderr, "event %s: still failing: %v\n", shortEventID(e.EventID), err)
			continue
		}
		if err := dlq.Delete(ctx, st.Name, e.EventID); err != nil {
			fmt.Fprintf(stderr, "event %s: delivered but not removed from the dead-letter store: %v\n", shortEventID(e.EventID), err)
			continue
		}
		replayed++
	}
	fmt.Fprintf(stderr, "replayed %d, still failing %d\n", replayed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func shortEventID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// runReset deletes a stream's checkpoints, so it starts again from its
// start_at position. The stream's group must be stopped.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reset", flag.ContinueOnError)
	stream := fs.String("stream", "", "stream name (required)")
	cfg, code := loadFlags(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if cfg.Stream(*stream) == nil {
		fmt.Fprintf(stderr, "ferry reset: -stream: no stream named %q in the configuration\n", *stream)
		return 2
	}
	return withState(ctx, "reset", cfg, stderr, func(ctx context.Context, _ *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		members, err := ls.Members(ctx, *stream)
		if err != nil {
			return err
		}
		if len(members) > 0 {
			return fmt.Errorf("stream %q still has %d live member(s); stop them first", *stream, len(members))
		}
		list, err := cps.List(ctx, *stream)
		if err != nil {
			return err
		}
		for _, cp := range list {
			if err := cps.Delete(ctx, cp.Stream, cp.Partition, cp.Version); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "stream %s: %d checkpoint(s) deleted; it starts again from its start_at position\n", *stream, len(list))
		return nil
	})
}
