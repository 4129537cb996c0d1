package cli

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
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
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
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "print the /status JSON document (docs/status.md) instead of the table")
	cfg, code := loadFlags(fs, args, stderr)
	if cfg == nil {
		return code
	}
	return withState(ctx, "status", cfg, stderr, func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		if *asJSON {
			return printStatusJSON(ctx, fs.Lookup("c").Value.String(), cfg, db, ls, cps, stdout)
		}
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
		failures, err := group.Failures(ctx, db, st.Name)
		if err != nil {
			return err
		}
		state := "running"
		switch {
		case len(failures) > 0 && len(members) == 0:
			state = "failed"
		case len(failures) > 0:
			state = "running, failed on " + plural(len(failures), "member")
		case len(members) == 0:
			state = "stopped (no live member)"
		}
		fmt.Fprintf(w, "stream %s: %s; %d partition(s), %d live member(s)\n", st.Name, state, st.Group.Partitions, len(members))
		for _, m := range members {
			fmt.Fprintf(w, "  member\t%s\theartbeat %s ago\n", m.ID, ageOf(now, m.HeartbeatAt))
		}
		for _, f := range failures {
			fmt.Fprintf(w, "  member\t%s\tfailed since %s (%s, partition %d): %s\n", f.Member, f.Since.UTC().Format(time.RFC3339),
				f.Class, f.Partition, f.Message)
			fmt.Fprintf(w, "  \t\twhat to do: %s\n", advice(&st, ferry.Failure{Class: ferry.FailureClass(f.Class), Clears: f.Clears, Detail: f.Message}))
			if f.RetryAt.IsZero() {
				fmt.Fprintf(w, "  \t\tre-check: never by itself: a change of configuration (and a restart), ferry position set or ferry reset ends it\n")
			} else {
				fmt.Fprintf(w, "  \t\tre-check: at %s\n", f.RetryAt.UTC().Format(time.RFC3339))
			}
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
				age = ageOf(now, cp.UpdatedAt)
				// Lag, as in ferry_lag_seconds: 0 when nothing was pending at
				// the last checkpoint write, else now minus the clusterTime of
				// the oldest pending event.
				var oldest time.Time
				if !cp.Pending.IsZero() {
					oldest = time.Unix(int64(cp.Pending.T), 0)
				}
				lag = ferry.LagOf(now, oldest).Round(time.Second).String()
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

// ageOf is now minus t, never negative (the clocks of two servers).
func ageOf(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return d.Round(time.Millisecond).String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
