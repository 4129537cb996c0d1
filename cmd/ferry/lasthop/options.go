package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The faults and the dedupe modes.
const (
	faultKill         = "kill"
	faultRedeploy     = "redeploy"
	faultReceiverDown = "receiver-down"
	faultScaleIn      = "scale-in"

	dedupeLibrary = "library"
	dedupeMemory  = "memory"
)

// settings is the command line.
type settings struct {
	fault       string
	runs        int
	n           int
	effectDelay time.Duration
	dedupe      string
	leaseTTL    time.Duration
	down        time.Duration
	txnLifetime time.Duration
	expireOver  time.Duration
	timeout     time.Duration
	server      string
	keep        bool
}

func parseFlags(args []string) (*settings, error) {
	o := &settings{}
	fs := flag.NewFlagSet("lasthop", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&o.fault, "fault", faultKill, "the fault of every run: kill (SIGKILL a sidecar), redeploy (SIGTERM every sidecar and receiver, start new ones), receiver-down (SIGKILL a receiver, restart it after -down) or scale-in (SIGTERM one instance's sidecar and receiver, for good, and time its partitions' hand-off)")
	fs.IntVar(&o.runs, "runs", 1, "number of runs, each on a fresh emulator")
	fs.IntVar(&o.n, "n", 300, "TTL deletes per run")
	fs.DurationVar(&o.effectDelay, "effect-delay", time.Second, "how long each side effect takes (the receivers' EFFECT_DELAY_MS)")
	fs.StringVar(&o.dedupe, "dedupe", dedupeLibrary, "library (@ferry-io/receiver: record and effect in one transaction) or memory (ids in process memory, the pattern the library replaces; expected to show duplicates)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 10*time.Second, "the sidecars' group.lease_ttl")
	fs.DurationVar(&o.down, "down", 20*time.Second, "receiver-down: how long the receiver stays down")
	fs.DurationVar(&o.txnLifetime, "txn-lifetime", 60*time.Second, "the emulator's transactionLifetimeLimitSeconds (MongoDB's default 60 s): how long a SIGKILLed receiver's open transactions hold their records")
	fs.DurationVar(&o.expireOver, "expire-over", 10*time.Second, "the documents' expiry times are spread over this long")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long one run may take before it fails")
	fs.StringVar(&o.server, "server", "", "the receiver's server.js (default: examples/node-receiver/server.js of the repository holding the working directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep each run's directory (configuration and process logs); a failed run's is always kept")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &usageError{err}
	}
	var problems []string
	switch o.fault {
	case faultKill, faultRedeploy, faultReceiverDown, faultScaleIn:
	default:
		problems = append(problems, fmt.Sprintf("-fault must be kill, redeploy, receiver-down or scale-in, got %q", o.fault))
	}
	switch o.dedupe {
	case dedupeLibrary, dedupeMemory:
	default:
		problems = append(problems, fmt.Sprintf("-dedupe must be library or memory, got %q", o.dedupe))
	}
	if o.runs < 1 {
		problems = append(problems, fmt.Sprintf("-runs must be at least 1, got %d", o.runs))
	}
	if o.n < 20 {
		problems = append(problems, fmt.Sprintf("-n must be at least 20 (the fault lands once a quarter of the effects are done), got %d", o.n))
	}
	if o.effectDelay < 0 {
		problems = append(problems, fmt.Sprintf("-effect-delay must not be negative, got %s", o.effectDelay))
	}
	if o.leaseTTL < 100*time.Millisecond {
		problems = append(problems, fmt.Sprintf("-lease-ttl must be at least 100ms (ferry's minimum), got %s", o.leaseTTL))
	}
	if o.down <= 0 {
		problems = append(problems, fmt.Sprintf("-down must be positive, got %s", o.down))
	}
	if o.txnLifetime < time.Second || o.txnLifetime%time.Second != 0 {
		problems = append(problems, fmt.Sprintf("-txn-lifetime must be a whole number of seconds, at least 1s, got %s", o.txnLifetime))
	}
	if o.expireOver < 0 {
		problems = append(problems, fmt.Sprintf("-expire-over must not be negative, got %s", o.expireOver))
	}
	if o.timeout <= 0 {
		problems = append(problems, fmt.Sprintf("-timeout must be positive, got %s", o.timeout))
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q (every setting is a flag; -h lists them)", fs.Args()))
	}
	if len(problems) > 0 {
		return nil, &usageError{errors.New(strings.Join(problems, "; "))}
	}
	return o, nil
}

// nodeRuntime is the node binary that runs the receivers.
type nodeRuntime struct {
	path    string
	version string
}

// findNode finds node and the receiver (o.server, defaulted here), and
// checks that the receiver's modules load.
func findNode(ctx context.Context, o *settings) (*nodeRuntime, error) {
	path, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH: the receivers are Node.js processes (node 20 or later)")
	}
	v, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", path, err)
	}
	if o.server == "" {
		o.server, err = findServer()
		if err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(o.server); err != nil {
		return nil, fmt.Errorf("-server: %w", err)
	}
	dir := filepath.Dir(o.server)
	// server.js only exports when required: loading it loads every module
	// it needs (mongodb, @ferry-io/receiver and the library's own).
	check := exec.CommandContext(ctx, path, "-e", "require(process.argv[1])", o.server)
	check.Dir = dir
	if msg, err := check.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the receiver %s does not load (%s): its node_modules are missing or stale; run `npm ci` in %s (and in receivers/node, the library it links)", o.server, nodeError(string(msg), err), dir)
	}
	return &nodeRuntime{path: path, version: strings.TrimSpace(string(v))}, nil
}

// findServer returns examples/node-receiver/server.js of the repository
// holding the working directory.
func findServer() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "examples", "node-receiver", "server.js")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("examples/node-receiver/server.js not found above the working directory: run lasthop from the ferry repository, or give -server")
		}
		dir = parent
	}
}

// nodeError returns the line of node's output that says what failed
// ("Error: Cannot find module 'mongodb'"), or err.
func nodeError(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Error") && !strings.HasPrefix(strings.TrimSpace(l), "at ") {
			return strings.TrimSpace(l)
		}
	}
	return err.Error()
}
