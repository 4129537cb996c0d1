package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

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
func loadFlags(fs *flag.FlagSet, args []string, stderr io.Writer, opts ...config.LoadOption) (*config.Config, int) {
	fs.SetOutput(stderr)
	path := fs.String("c", "ferry.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	cfg, err := config.Load(*path, opts...)
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

// runStatus prints members, partitions, owners, epochs, checkpoint age,
// lag and read delay of every stream, from the state store.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "print the /status JSON document (docs/status.md) instead of the table")
	cfg, code := loadFlags(fs, args, stderr, readOnly)
	if cfg == nil {
		return code
	}
	return withState(ctx, "status", cfg, stderr, func(ctx context.Context, db *mongo.Database, ls *lease.Store, cps *mongostore.Store) error {
		if *asJSON {
			return printStatusJSON(ctx, fs.Lookup("c").Value.String(), cfg, db, ls, cps, stdout)
		}
		return printStatus(ctx, fs.Lookup("c").Value.String(), cfg, db, ls, cps, stdout)
	})
}

// printStatus prints the status document (the one /status serves) as
// text: per stream its state, members, failures and partitions.
func printStatus(ctx context.Context, cfgPath string, cfg *config.Config, db *mongo.Database, ls *lease.Store, cps *mongostore.Store, stdout io.Writer) error {
	doc, err := statusSource{cfg: cfg, cfgPath: cfgPath, db: db, ls: ls, cps: cps}.build(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, sd := range doc.Streams {
		state := sd.State
		switch {
		case sd.State == "degraded" && len(sd.Failures) > 0:
			state = "running, failed on " + plural(len(sd.Failures), "member")
		case sd.State == "degraded":
			state = "degraded (running over a corrupt record)"
		case sd.State == "stopped":
			state = "stopped (no live member)"
		}
		fmt.Fprintf(w, "stream %s: %s; %d partition(s), %d live member(s)\n", sd.Name, state, sd.PartitionCount, len(sd.Members))
		if sd.Reason != "" && len(sd.Failures) == 0 {
			fmt.Fprintf(w, "  why: %s\n", sd.Reason)
		}
		for _, c := range sd.CorruptRecords {
			fmt.Fprintf(w, "  corrupt record %s: %s\n    what is done: %s\n", c.Record, c.Problem, c.Action)
		}
		for _, m := range sd.Members {
			fmt.Fprintf(w, "  member\t%s\theartbeat %s ago\n", m.ID, secondsText(m.HeartbeatAgeSeconds, time.Millisecond))
		}
		for _, f := range sd.Failures {
			where := f.Class
			if f.Partition >= 0 { // -1: the stream's start, no partition
				where += fmt.Sprintf(", partition %d", f.Partition)
			}
			fmt.Fprintf(w, "  member\t%s\tfailed since %s (%s): %s\n", f.Member, f.Since.Format(time.RFC3339), where, f.Message)
			fmt.Fprintf(w, "  \t\twhat to do: %s\n", f.Advice)
			if f.RetryAt == nil {
				fmt.Fprintf(w, "  \t\tre-check: never by itself: a change of configuration (and a restart), ferry position set or ferry reset ends it\n")
			} else {
				fmt.Fprintf(w, "  \t\tre-check: at %s\n", f.RetryAt.Format(time.RFC3339))
			}
		}
		fmt.Fprintln(w, "  partition\towner\tepoch\tcheckpoint age\tlag\tread delay\tstate")
		for _, p := range sd.Partitions {
			owner, epoch := "-", "-"
			if p.Owner != "" {
				owner = p.Owner
			}
			if p.Epoch > 0 {
				epoch = fmt.Sprint(p.Epoch)
			}
			age, lag, delay, state := "-", "-", "-", p.State
			if p.CheckpointAgeSeconds != nil {
				age = secondsText(*p.CheckpointAgeSeconds, time.Millisecond)
			}
			if p.LagSeconds != nil {
				lag = secondsText(*p.LagSeconds, time.Second)
			}
			if p.ReadDelaySeconds != nil {
				delay = secondsText(*p.ReadDelaySeconds, time.Millisecond)
			}
			switch {
			case p.State == "no-checkpoint":
				state = "no checkpoint"
			case p.State == string(group.WaitingForSink) && p.LastError != "":
				state += " (" + p.LastError + ")"
			case p.Note != "":
				state += " (" + p.Note + ")"
			}
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Partition, owner, epoch, age, lag, delay, state)
		}
		for _, p := range sd.Partitions {
			if p.Snapshot != nil {
				fmt.Fprintf(w, "  partition %d: %s\n", p.Partition, snapshotText(p.Snapshot))
			}
		}
	}
	return w.Flush()
}

// snapshotText is a partition's snapshot in one line: while it runs,
// "snapshot running (start): 42% — 420,000 / 1,000,000 documents,
// 12,000/s, ETA 48s, 420 chunks"; once over, when it finished and how
// many documents it delivered.
func snapshotText(s *snapshotProgressDoc) string {
	why := s.Reason
	if s.Filtered {
		why += ", filtered"
	}
	switch s.State {
	case snapshotRunning:
		var b strings.Builder
		fmt.Fprintf(&b, "snapshot running (%s): ", why)
		if s.DocumentsEstimated != nil && s.Percent != nil {
			fmt.Fprintf(&b, "%d%% — %s / %s documents", int(*s.Percent), thousands(s.DocumentsDone), thousands(*s.DocumentsEstimated))
		} else {
			fmt.Fprintf(&b, "%s documents (total unknown)", thousands(s.DocumentsDone))
		}
		if r := s.DocumentsPerSecond; r != nil && *r < 10 {
			fmt.Fprintf(&b, ", %.1f/s", *r)
		} else if r != nil {
			fmt.Fprintf(&b, ", %s/s", thousands(int64(math.Round(*r))))
		}
		if s.ETASeconds != nil && s.ChunkFailures == 0 { // no ETA while a chunk fails
			fmt.Fprintf(&b, ", ETA %s", shortDuration(*s.ETASeconds))
		}
		fmt.Fprintf(&b, ", %s done", plural(int(s.ChunksDone), "chunk"))
		if s.Namespace != "" {
			fmt.Fprintf(&b, ", reading %s (%s)", s.Namespace, s.Mode)
		}
		if s.ChunkFailures > 0 {
			fmt.Fprintf(&b, "; its next chunk failed %s, retrying: %s", plural(s.ChunkFailures, "time"), s.LastError)
		}
		return b.String()
	case snapshotCancelled:
		at := ""
		if s.FinishedAt != nil {
			at = " at " + s.FinishedAt.Format(time.RFC3339)
		}
		return fmt.Sprintf("last snapshot (%s) cancelled%s: %s documents delivered", why, at, thousands(s.DocumentsDone))
	}
	at, took := "", ""
	if s.FinishedAt != nil {
		at = " at " + s.FinishedAt.Format(time.RFC3339)
		if d := s.FinishedAt.Sub(s.StartedAt); d > 0 {
			took = " in " + shortDuration(d.Seconds())
		}
	}
	return fmt.Sprintf("last snapshot (%s) finished%s: %s documents%s", why, at, thousands(s.DocumentsDone), took)
}

// shortDuration is a number of seconds as a duration: to 0.1 s below 10 s,
// to the second above.
func shortDuration(sec float64) string {
	if sec < 10 {
		return secondsText(sec, 100*time.Millisecond)
	}
	return secondsText(sec, time.Second)
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// secondsText is a number of seconds as a duration, rounded to round.
func secondsText(sec float64, round time.Duration) string {
	return time.Duration(sec * float64(time.Second)).Round(round).String()
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
