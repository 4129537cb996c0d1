package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
)

const checkDoc = `Checks the deployment a configuration runs against, before ` + "`ferry run`" + `:
it connects to the state store and to every stream's source (5 s
timeouts) and prints one row per check with pass, warn or fail, what it
found, and the fix:

  server    topology (a replica set or mongos; a standalone server fails),
            version (ferry targets 6.0+), featureCompatibilityVersion
            (where the user may read it), clock (server against this
            machine: warn over 1s, fail over 30s)
  state     the user's privileges on the state database (and on a
            mongodb sink's collection), the pool
  stream    the change stream, opened as ferry run opens it and closed;
            $toHashedIndexKey (the filter of a group's partitions) and
            $changeStreamSplitLargeEvent, each tried for real; pre- and
            post-images on the collections in scope when full_document or
            full_document_before_change need them (required: fail,
            whenAvailable: warn); the source user's privileges; the oplog
            window against -downtime (fail when shorter, warn when under
            twice as long); the pool

It only reads: change streams are opened at the current time and closed.
Exits 1 if any check fails (or the configuration is invalid, each problem
a row), 0 otherwise. ferry run logs the same findings when it starts
(without the oplog window).`

// runCheck is `ferry check`.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check")
	fs.SetOutput(stderr)
	path := fs.String("c", "ferry.yaml", "configuration file")
	downtime := fs.Duration("downtime", 0, "the longest stop of every member you plan for (e.g. 2h): the oplog window must hold it (0: only report the window)")
	asJSON := fs.Bool("json", false, "print the findings as JSON: {findings: [{subject, check, result, detail, fix}], pass, warn, fail}")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *downtime < 0 {
		fmt.Fprintln(stderr, "ferry check: -downtime must not be negative")
		return 2
	}
	cfg, err := config.Load(*path, readOnlyButProjection)
	var findings []finding
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		for _, pr := range cerr.Problems {
			findings = append(findings, finding{Subject: "config", Check: pr.Path, Result: checkFail, Detail: pr.Message,
				Fix: "correct " + *path + " (ferry validate -c " + *path + " checks it without connecting)"})
		}
	case err != nil:
		fmt.Fprintln(stderr, "ferry check:", err)
		return 1
	default:
		findings = checkDeployment(ctx, cfg, preflightOptions{downtime: *downtime, oplog: true, shards: true, timeout: 5 * time.Second})
	}
	if *asJSON {
		printFindingsJSON(stdout, findings)
	} else {
		printFindings(stdout, findings)
	}
	for _, f := range findings {
		if f.Result == checkFail {
			return 1
		}
	}
	return 0
}

// checkDeployment connects to the configuration's servers and runs the
// preflight.
func checkDeployment(ctx context.Context, cfg *config.Config, opts preflightOptions) []finding {
	connect := func(uri config.MongoURI) *mongo.Client {
		c, err := mongo.Connect(options.Client().ApplyURI(uri.Reveal()).
			SetServerSelectionTimeout(opts.timeout).SetConnectTimeout(opts.timeout).SetAppName("ferry check"))
		if err != nil {
			return nil // ApplyURI's errors: config.Parse checked the URI
		}
		return c
	}
	p := &preflight{cfg: cfg, opts: opts, sources: map[config.MongoURI]*mongo.Client{}}
	var clients []*mongo.Client
	defer func() {
		for _, c := range append(clients, p.extra...) {
			_ = c.Disconnect(context.WithoutCancel(ctx))
		}
	}()
	if cfg.State.Bolt == nil {
		if p.state = connect(cfg.StateURI()); p.state != nil {
			clients = append(clients, p.state)
		}
	}
	for _, st := range cfg.Streams {
		if _, ok := p.sources[st.Source.URI]; ok {
			continue
		}
		if c := connect(st.Source.URI); c != nil {
			p.sources[st.Source.URI] = c
			clients = append(clients, c)
		}
	}
	p.cps = checkStore(cfg, p)
	return p.run(ctx)
}

// checkStore is the checkpoint store the preflight's consumers are built
// with: the state store's, or, with state.bolt (whose file a running
// member holds locked), one on the first source that nothing reads (the
// preflight opens streams at the current time and never checkpoints).
func checkStore(cfg *config.Config, p *preflight) checkpoint.Store {
	db := cfg.State.Database
	client := p.state
	if client == nil {
		for _, c := range p.sources {
			client = c
			break
		}
	}
	if client == nil {
		return nil
	}
	s, err := mongostore.New(client.Database(db))
	if err != nil {
		return nil
	}
	return s
}

// printFindings writes the findings as a table, then a summary line.
func printFindings(w io.Writer, findings []finding) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL\tFIX")
	for _, f := range findings {
		fmt.Fprintf(tw, "%s: %s\t%s\t%s\t%s\n", f.Subject, f.Check, f.Result, f.Detail, f.Fix)
	}
	_ = tw.Flush()
	pass, warn, fail := countFindings(findings)
	fmt.Fprintf(w, "\n%d pass, %d warn, %d fail\n", pass, warn, fail)
}

// printFindingsJSON writes {findings, pass, warn, fail}.
func printFindingsJSON(w io.Writer, findings []finding) {
	pass, warn, fail := countFindings(findings)
	if findings == nil {
		findings = []finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Findings []finding `json:"findings"`
		Pass     int       `json:"pass"`
		Warn     int       `json:"warn"`
		Fail     int       `json:"fail"`
	}{findings, pass, warn, fail})
}

func countFindings(findings []finding) (pass, warn, fail int) {
	for _, f := range findings {
		switch f.Result {
		case checkPass:
			pass++
		case checkWarn:
			warn++
		case checkFail:
			fail++
		}
	}
	return pass, warn, fail
}

// logFindings logs what `ferry run` found at start: each warn at WARN,
// each fail at ERROR (the daemon runs on: a failing feature fails its
// stream, with its own error), and one summary at INFO.
func logFindings(log *slog.Logger, findings []finding) {
	for _, f := range findings {
		level := slog.LevelWarn
		switch f.Result {
		case checkPass:
			continue
		case checkFail:
			level = slog.LevelError
		}
		log.Log(context.Background(), level, "preflight: "+f.Subject+": "+f.Check, "result", string(f.Result), "detail", f.Detail, "fix", f.Fix)
	}
	pass, warn, fail := countFindings(findings)
	log.Info("preflight done (ferry check -c <config> prints every row)", "pass", pass, "warn", warn, "fail", fail)
}
