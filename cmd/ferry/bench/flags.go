package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// settings is the bench's command line.
type settings struct {
	n        int             // backlog size
	only     []configuration // the configurations to run, in table order
	runs     int             // repetitions; the table shows medians
	reads    int             // warm raw reads (the best one counts)
	json     bool            // print JSON instead of the table
	uri      string          // a real cluster instead of the emulator
	sweep    []int           // -rss-sweep backlog sizes, nil: no sweep
	timeout  time.Duration   // bound on one configuration's run
	logLevel string          // the daemon's log level
	profile  string          // a directory for CPU profiles, "" none
}

// defaultSweep is what -rss-sweep alone measures.
var defaultSweep = []int{25_000, 100_000, 250_000}

func parseOptions(args []string, stderr io.Writer) (*settings, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &settings{}
	fs.IntVar(&o.n, "n", 20_000, "backlog: this many 1 KiB inserts per configuration")
	only := fs.String("only", "", "run only these configurations, comma-separated ("+strings.Join(configurationNames(), ", ")+"); the raw loop always runs")
	fs.IntVar(&o.runs, "runs", 1, "run everything this many times, interleaved, and report each figure's median")
	fs.IntVar(&o.reads, "raw-reads", 3, "warm raw reads after the cold one; the best counts")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.uri, "uri", "", "a MongoDB replica set or sharded cluster (mongodb://…) to measure instead of the emulator; each configuration uses new databases, dropped afterwards")
	sweep := &sweepFlag{}
	fs.Var(sweep, "rss-sweep", "instead of the table, measure peak RSS over backlogs of these sizes (alone: "+joinInts(defaultSweep)+") for the -only configurations (default stdout,webhook)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on one configuration's run")
	fs.StringVar(&o.profile, "cpuprofile", "", "write CPU profiles of each configuration's run to this directory: <configuration>-ferry.pprof, -emulator.pprof, -receiver.pprof (go tool pprof reads them)")
	fs.StringVar(&o.logLevel, "log", "warn", "the daemon's log level (its log goes to stderr when a configuration fails)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./cmd/ferry/bench [flags]\n\nMeasures `ferry run` end to end per sink and delivery mode against a raw driver loop.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, &usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, &usageError{fmt.Errorf("unexpected argument %q: every setting is a flag (-h lists them)", fs.Arg(0))}
	}
	if o.n < 1 {
		return nil, &usageError{fmt.Errorf("-n must be at least 1, got %d", o.n)}
	}
	if o.runs < 1 {
		return nil, &usageError{fmt.Errorf("-runs must be at least 1, got %d", o.runs)}
	}
	if o.reads < 1 {
		return nil, &usageError{fmt.Errorf("-raw-reads must be at least 1, got %d", o.reads)}
	}
	if o.timeout <= 0 {
		return nil, &usageError{fmt.Errorf("-timeout must be positive, got %s", o.timeout)}
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, &usageError{fmt.Errorf("-log must be debug, info, warn or error, got %q", o.logLevel)}
	}
	if o.uri != "" && !strings.HasPrefix(o.uri, "mongodb://") && !strings.HasPrefix(o.uri, "mongodb+srv://") {
		return nil, &usageError{fmt.Errorf("-uri must be a mongodb:// or mongodb+srv:// connection string")}
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return nil, &usageError{fmt.Errorf("-cpuprofile: %w", err)}
		}
	}
	o.sweep = sweep.sizes
	var err error
	switch {
	case *only != "":
		o.only, err = selectConfigurations(*only)
	case o.sweep != nil:
		o.only, err = selectConfigurations("stdout,webhook")
	default:
		o.only = configurations
	}
	if err != nil {
		return nil, &usageError{err}
	}
	return o, nil
}

// sweepFlag is -rss-sweep: alone, the default sizes; with a value, a
// comma-separated list of backlog sizes.
type sweepFlag struct{ sizes []int }

func (f *sweepFlag) IsBoolFlag() bool { return true }

func (f *sweepFlag) String() string {
	if f == nil || f.sizes == nil {
		return ""
	}
	return joinInts(f.sizes)
}

func (f *sweepFlag) Set(v string) error {
	if v == "true" {
		f.sizes = defaultSweep
		return nil
	}
	if v == "false" {
		f.sizes = nil
		return nil
	}
	var sizes []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(s, "_", "")))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a backlog size: give positive counts, comma-separated (25000,250000)", s)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) < 2 {
		return fmt.Errorf("give at least two backlog sizes to compare (25000,250000)")
	}
	f.sizes = sizes
	return nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
