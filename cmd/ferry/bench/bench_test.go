package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/mongotest"
)

func TestMain(m *testing.M) {
	// The bench re-executes its own binary as the emulator and receiver
	// children; under go test that binary is this test binary.
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// benchJSON runs the bench with args and -json and returns its report.
func benchJSON(t *testing.T, args ...string) *report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	if err := runBench(ctx, append(args, "-json"), &out, &progress); err != nil {
		t.Fatalf("bench %v: %v\nprogress:\n%s", args, err, progress.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("the -json output does not parse: %v\n%s", err, out.String())
	}
	return &r
}

// checkDelivered fails unless every measurement of every row counted the
// whole backlog, each event once, and has its figures.
func checkDelivered(t *testing.T, r *report, n int) {
	t.Helper()
	for _, x := range r.Rows {
		if len(x.Measurements) != r.Runs {
			t.Errorf("%s: %d measurements, want %d", x.Name, len(x.Measurements), r.Runs)
		}
		for _, m := range x.Measurements {
			if m.Events != n || m.Delivered != int64(n) || m.Distinct != int64(n) || m.Duplicates != 0 {
				t.Errorf("%s: backlog %d, delivered %d, distinct %d, duplicates %d; want %d, %d, %d, 0 (%s)",
					x.Name, m.Events, m.Delivered, m.Distinct, m.Duplicates, n, n, n, m.CountedHow)
			}
			if m.WindowCount < 1 || m.Window <= 0 || m.FerryCPU <= 0 || m.PeakRSS <= 0 {
				t.Errorf("%s: window %d events in %s, Ferry CPU %s, peak RSS %d: each must be positive",
					x.Name, m.WindowCount, m.Window, m.FerryCPU, m.PeakRSS)
			}
			if m.EmulatorCPU == nil {
				t.Errorf("%s: no emulator CPU figure", x.Name)
			}
			if strings.HasPrefix(x.Name, "raw-") {
				continue
			}
			if x.Name == "library" { // no receiver, no daemon
				if m.ReceiverCPU != nil || m.Startup == nil {
					t.Errorf("library: receiver CPU %v, startup %v: want none and a startup", m.ReceiverCPU, m.Startup)
				}
				continue
			}
			if m.ReceiverCPU == nil || m.Startup == nil || m.DaemonExit != 0 {
				t.Errorf("%s: receiver CPU %v, startup %v, daemon exit %d: want both figures and exit 0",
					x.Name, m.ReceiverCPU, m.Startup, m.DaemonExit)
			}
		}
		if x.EventsPerS <= 0 || x.VsWarmRaw <= 0 || x.MinDistinct != int64(n) || x.MaxDuplicates != 0 {
			t.Errorf("%s: %.0f events/s, %.3f of warm raw, min distinct %d, max duplicates %d", x.Name,
				x.EventsPerS, x.VsWarmRaw, x.MinDistinct, x.MaxDuplicates)
		}
	}
}

// TestBench runs the bench on a tiny backlog with two configurations: the
// report has the raw rows and one row per configuration, in table order,
// every event was delivered exactly once as the receivers counted, and the
// table has its columns and rows. Timings are not asserted.
func TestBench(t *testing.T) {
	const n = 300
	r := benchJSON(t, "-n", "300", "-only", "webhook-idempotent,stdout", "-raw-reads", "2")
	var names []string
	for _, x := range r.Rows {
		names = append(names, x.Name)
	}
	if got, want := strings.Join(names, ","), "raw-cold,raw-warm,stdout,webhook-idempotent"; got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
	checkDelivered(t, r, n)
	if r.Rows[1].VsWarmRaw != 1 {
		t.Errorf("the warm raw row's ratio to itself is %v", r.Rows[1].VsWarmRaw)
	}
	if !strings.Contains(r.Rows[2].CountedHow, "pipe") || !strings.Contains(r.Rows[3].CountedHow, "webhook-id") {
		t.Errorf("counted how: stdout %q, webhook %q", r.Rows[2].CountedHow, r.Rows[3].CountedHow)
	}
	if r.Backlog != n || r.Machine.CPUs < 1 || r.Source != "emulator" || len(r.MethodNotes) == 0 {
		t.Errorf("report header: backlog %d, %d CPUs, source %q, %d method notes", r.Backlog, r.Machine.CPUs, r.Source, len(r.MethodNotes))
	}

	var table bytes.Buffer
	r.writeTable(&table)
	lines := strings.Split(table.String(), "\n")
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "configuration ") {
			header = i
			break
		}
	}
	if header < 0 {
		t.Fatalf("no header line in the table:\n%s", table.String())
	}
	for _, col := range tableColumns {
		if !strings.Contains(lines[header], col) {
			t.Errorf("the header lacks %q:\n%s", col, lines[header])
		}
	}
	for i, title := range []string{"raw driver loop, cold first read", "raw driver loop, warm (best of 2)",
		"stdout, at-least-once, bolt state", "webhook, idempotent, 1 partition"} {
		l := lines[header+1+i]
		if !strings.HasPrefix(l, title) || !strings.HasSuffix(l, "300/300") {
			t.Errorf("table line %d: %q, want %q … 300/300", i+1, l, title)
		}
		if len(strings.Fields(strings.TrimPrefix(l, title))) != len(tableColumns)-1 {
			t.Errorf("table line %q: want a value in each of the %d columns", l, len(tableColumns)-1)
		}
	}
}

// TestBenchEveryConfiguration runs every configuration once on a tiny
// backlog: each receiver (the stdout pipe, HTTP, kfake, JetStream, pstest,
// the projection's count) counts every event exactly once.
func TestBenchEveryConfiguration(t *testing.T) {
	const n = 120
	r := benchJSON(t, "-n", "120", "-raw-reads", "1")
	if len(r.Rows) != 2+len(configurations) {
		t.Fatalf("%d rows, want the 2 raw rows and %d configurations", len(r.Rows), len(configurations))
	}
	checkDelivered(t, r, n)
}

// TestLibraryIsTheBestOfItsPasses: the library row, like the warm raw
// row, is the fastest of -raw-reads passes, so that the ratio between the
// two compares the same statistic.
func TestLibraryIsTheBestOfItsPasses(t *testing.T) {
	r := benchJSON(t, "-n", "200", "-only", "library", "-raw-reads", "3")
	checkDelivered(t, r, 200)
	for _, x := range r.Rows {
		if x.Name != "library" && x.Name != "raw-warm" {
			continue
		}
		if x.Name == "library" && x.Title != "library, no-op handler, bolt checkpoints (best of 3)" {
			t.Errorf("library row titled %q, want it to say best of 3", x.Title)
		}
		m := x.Measurements[0]
		if len(m.PassRates) != 3 {
			t.Fatalf("%s: %d pass rates %v, want 3", x.Name, len(m.PassRates), m.PassRates)
		}
		if best := slices.Max(m.PassRates); m.rate() != best {
			t.Errorf("%s: the row's rate %.0f is not the fastest pass's, %.0f (passes %v)", x.Name, m.rate(), best, m.PassRates)
		}
	}
}

// TestBadCommandLines: every bad flag is a usage error naming the flag
// and what it takes.
func TestBadCommandLines(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-only", "stdout,kafka2"}, `unknown configuration "kafka2"; the configurations are stdout, webhook,`},
		{[]string{"-n", "0"}, "-n must be at least 1"},
		{[]string{"-runs", "0"}, "-runs must be at least 1"},
		{[]string{"-rss-sweep=25000"}, "at least two backlog sizes"},
		{[]string{"-rss-sweep=25000,lots"}, `"lots" is not a backlog size`},
		{[]string{"-uri", "localhost:27017"}, "-uri must be a mongodb://"},
		{[]string{"-log", "loud"}, "-log must be debug, info, warn or error"},
		{[]string{"stdout"}, `unexpected argument "stdout"`},
	} {
		err := runBench(context.Background(), c.args, &bytes.Buffer{}, &bytes.Buffer{})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
}

// TestSweepFlag: -rss-sweep alone takes the default sizes and the stdout
// and webhook configurations; with sizes, those.
func TestSweepFlag(t *testing.T) {
	o, err := parseOptions([]string{"-rss-sweep"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if joinInts(o.sweep) != joinInts(defaultSweep) || len(o.only) != 2 || o.only[0].name != "stdout" || o.only[1].name != "webhook" {
		t.Errorf("-rss-sweep: sizes %v, configurations %v", o.sweep, o.only)
	}
	o, err = parseOptions([]string{"-rss-sweep=1_000,2000", "-only", "kafka"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if joinInts(o.sweep) != "1000,2000" || len(o.only) != 1 || o.only[0].name != "kafka" {
		t.Errorf("-rss-sweep=1_000,2000 -only kafka: sizes %v, configurations %v", o.sweep, o.only)
	}
}

// TestCounter: the receiver's counter notes the first event and, once,
// the moment every distinct event has arrived; duplicates count as
// deliveries only.
func TestCounter(t *testing.T) {
	var notes []string
	c := &counter{target: 3, notify: func(note string, count int64) {
		notes = append(notes, note+":"+strings.Repeat("x", int(count)))
	}}
	for _, id := range []string{"a", "a", "b", "c", "c", "d"} {
		c.add(id)
	}
	if got := strings.Join(notes, " "); got != "first:x done:xxx" {
		t.Errorf("notes %q, want first at 1 and done at 3 distinct", got)
	}
	if total, distinct := c.get(); total != 6 || distinct != 4 {
		t.Errorf("total %d, distinct %d; want 6, 4", total, distinct)
	}
	// A destination that cannot tell distinct events: the total decides.
	notes = nil
	k := &counter{target: 5, notify: func(note string, count int64) { notes = append(notes, note) }}
	k.set(2, -1)
	k.set(5, -1)
	k.set(7, -1)
	if got := strings.Join(notes, " "); got != "first done" {
		t.Errorf("notes %q, want first, done", got)
	}
}

// TestBenchAgainstURI runs the bench against a cluster given by -uri (an
// emulator of the test's own, or $FERRY_TEST_MONGODB_URI) twice: both runs are reported, with no
// emulator CPU figure, and the databases each measurement made are gone
// afterwards.
func TestBenchAgainstURI(t *testing.T) {
	client, srv := mongotest.Client(t)
	uri := os.Getenv(mongotest.EnvURI) // a real replica set, if the tests run against one
	if srv != nil {
		uri = srv.URI()
	}
	r := benchJSON(t, "-uri", uri, "-n", "100", "-only", "webhook", "-raw-reads", "1", "-runs", "2")
	if r.Source != "cluster" || r.Runs != 2 || len(r.Rows) != 3 {
		t.Fatalf("source %q, %d runs, %d rows; want cluster, 2, 3", r.Source, r.Runs, len(r.Rows))
	}
	for _, x := range r.Rows {
		if x.EmulatorCPUUS != nil {
			t.Errorf("%s: an emulator CPU figure against a cluster", x.Name)
		}
		for i := range x.Measurements {
			x.Measurements[i].EmulatorCPU = new(time.Duration) // checked above
		}
	}
	checkDelivered(t, r, 100)
	names, err := client.ListDatabaseNames(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "ferrybench_") {
			t.Errorf("database %s left behind", name)
		}
	}
}

// TestRSSSweep: -rss-sweep measures each configuration at each size and
// reports the ratio of the largest peak RSS to the smallest.
func TestRSSSweep(t *testing.T) {
	r := benchJSON(t, "-rss-sweep=100,200", "-only", "stdout")
	if len(r.Rows) != 0 || len(r.Sweep) != 1 || joinInts(r.SweepSizes) != "100,200" {
		t.Fatalf("rows %d, sweep %+v, sizes %v", len(r.Rows), r.Sweep, r.SweepSizes)
	}
	s := r.Sweep[0]
	if s.Name != "stdout" || len(s.PeakRSSBytes) != 2 || s.PeakRSSBytes[0] <= 0 || s.PeakRSSBytes[1] <= 0 || s.MaxOverMin < 1 {
		t.Fatalf("sweep row %+v", s)
	}
	if runtime.GOOS == "linux" && (len(s.StartRSS) != 2 || s.StartRSS[0] <= 0 || s.StartRSS[0] > s.PeakRSSBytes[0]) {
		t.Errorf("the RSS when each daemon started: %v (peaks %v)", s.StartRSS, s.PeakRSSBytes)
	}
	var table bytes.Buffer
	r.writeTable(&table)
	if !strings.Contains(table.String(), "100 events") || !strings.Contains(table.String(), "largest/smallest") ||
		!strings.Contains(table.String(), "backlogs of 100, 200 ×") {
		t.Errorf("the sweep table:\n%s", table.String())
	}
}

func TestRatioText(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want string
	}{{0, "—"}, {1, "1"}, {0.9999, "1"}, {1.5, "1.50"}, {0.12, "0.12"}, {0.0794, "0.079"}, {0.00033, "0.00033"}} {
		if got := ratioText(c.r); got != c.want {
			t.Errorf("ratioText(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}

// TestFailedConfiguration: a configuration that fails (here its receiver
// cannot start) is marked in the report with its error, the others are
// still measured, and the bench returns an error naming it.
func TestFailedConfiguration(t *testing.T) {
	saved := configurations
	t.Cleanup(func() { configurations = saved })
	configurations = append(append([]configuration{}, saved...),
		configuration{name: "broken", title: "a sink nothing receives", sink: "nowhere", mode: "at-least-once", partitions: 1})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	err := runBench(ctx, []string{"-n", "100", "-only", "broken,stdout", "-raw-reads", "1", "-json"}, &out, &progress)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 configurations failed (broken)") {
		t.Fatalf("bench: %v, want the failure of broken\nprogress:\n%s", err, progress.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("the -json output does not parse: %v\n%s", err, out.String())
	}
	if len(r.Rows) != 4 || r.Rows[2].Name != "stdout" || r.Rows[3].Name != "broken" {
		t.Fatalf("rows %+v", r.Rows)
	}
	if x := r.Rows[3]; !strings.Contains(x.Error, `"nowhere" names no destination`) || len(x.Measurements) != 0 {
		t.Errorf("the broken row: error %q, %d measurements", x.Error, len(x.Measurements))
	}
	r.Rows = r.Rows[:3]
	checkDelivered(t, &r, 100)
	if !strings.Contains(progress.String(), "broken FAILED") {
		t.Errorf("progress:\n%s", progress.String())
	}

	r = report{Backlog: 100, Rows: []row{{Name: "broken", Title: "a sink nothing receives", Error: "run 1: no receiver\n--- log"}}}
	var table bytes.Buffer
	r.writeTable(&table)
	if !strings.Contains(table.String(), "FAILED broken: run 1: no receiver\n") || strings.Contains(table.String(), "--- log") {
		t.Errorf("the table:\n%s", table.String())
	}
}

// snapshotKeys are the figures `bench snapshot` reports, every scenario
// selected.
var snapshotKeys = []string{
	"reads.raw", "reads.id.rate", "reads.id.returned", "reads.id.examined", "reads.id.delivered",
	"reads.hashed.rate", "reads.hashed.returned", "reads.hashed.examined", "reads.hashed.delivered",
	"reads.rss.members", "reads.rss.source", "reads.rss.target",
	"filter.exact", "filter.examined",
	"kill.at", "kill.resumed", "kill.again", "kill.server.again", "kill.once", "kill.projection",
	"kill.rss.members", "kill.rss.source", "kill.rss.target",
	"writes.writes", "writes.rate", "writes.projection", "writes.lag", "writes.leases",
	"writes.rss.members", "writes.rss.source", "writes.rss.target",
	"oplog.writes", "oplog.outlasts", "oplog.projection", "oplog.lag",
	"oplog.rss.members", "oplog.rss.source", "oplog.rss.target",
}

// TestBenchSnapshot runs every scenario of `bench snapshot` at a small
// size (5,000 documents, chunks of 100, a snapshot rate cap so that the
// kill lands mid-snapshot and writes overlap it, a 300-entry oplog) and
// checks the verdicts the report computes: every judged figure passes but
// the rate ratio, which a snapshot of 5,000 documents (about 100 ms, the
// request's pick-up by each partition included) cannot reach; its verdict
// must still be the one its value gives.
//
// The oplog scenario runs on its own, with the default lease_ttl (10 s)
// and the full bench's 300-entry oplog (3 s at 100 writes/s): with a 1 s
// lease and a 1 s oplog, a lease lost under a loaded machine (a renewal
// timing out) handed a partition over from a checkpoint already off the
// oplog, and the stream failed with lost history, as it must.
func TestBenchSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	err := runBench(ctx, []string{"snapshot", "-docs", "5000", "-chunk", "100", "-lease-ttl", "1s", "-snapshot-rate", "500",
		"-scenarios", "reads,filter,kill,writes", "-poll", "50ms", "-json"}, &out, &progress)
	var r snapReport
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("bench snapshot: %v; the -json output does not parse: %v\n%s\nprogress:\n%s", err, jerr, out.String(), progress.String())
	}
	var oplogOut bytes.Buffer
	oplogErr := runBench(ctx, []string{"snapshot", "-chunk", "100", "-scenarios", "oplog",
		"-oplog-docs", "5000", "-oplog-entries", "300", "-poll", "50ms", "-json"}, &oplogOut, &progress)
	var ro snapReport
	if jerr := json.Unmarshal(oplogOut.Bytes(), &ro); jerr != nil {
		t.Fatalf("bench snapshot -scenarios oplog: %v; the -json output does not parse: %v\n%s\nprogress:\n%s", oplogErr, jerr, oplogOut.String(), progress.String())
	}
	if oplogErr != nil && len(ro.Errors) == 0 {
		t.Errorf("bench snapshot -scenarios oplog: %v", oplogErr)
	}
	r.Figures, r.Errors = append(r.Figures, ro.Figures...), append(r.Errors, ro.Errors...)
	for _, e := range r.Errors {
		t.Errorf("scenario %s did not finish: %s", e.Scenario, e.Error)
	}
	for _, key := range snapshotKeys {
		f, ok := r.figure(key)
		if !ok {
			t.Errorf("no figure %s", key)
			continue
		}
		if f.Text == "" {
			t.Errorf("%s: no value text", key)
		}
		if f.Pass == nil {
			continue
		}
		if key == "reads.hashed.rate" {
			if f.Value <= 0 || *f.Pass != (f.Value >= 0.5) {
				t.Errorf("%s: value %v, verdict %s: want a positive ratio judged against 0.5", key, f.Value, f.verdict())
			}
			continue
		}
		if !*f.Pass {
			t.Errorf("%s FAIL: %s: %s (target %s)", key, f.Title, f.Text, f.Target)
		}
	}
	if len(r.Figures) != len(snapshotKeys) {
		t.Errorf("%d figures, want %d", len(r.Figures), len(snapshotKeys))
	}
	// The bench fails exactly when a verdict does.
	if f, _ := r.figure("reads.hashed.rate"); f.Pass != nil && *f.Pass != (err == nil) && !t.Failed() {
		t.Errorf("bench snapshot returned %v with the rate ratio %s", err, f.verdict())
	}
	if t.Failed() {
		t.Logf("progress:\n%s", progress.String())
	}
	var table bytes.Buffer
	r.writeTable(&table)
	for _, want := range []string{"scenario  figure", "the projection equals the source after the writes", "PASS", "verdicts: "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestCompareProjection: the comparison finds every kind of difference a
// snapshot could leave (a stale copy, a resurrected document, a missing
// one), ignores the sink's own field and remembers tombstones, and its
// verdict fails for each.
func TestCompareProjection(t *testing.T) {
	client, _ := mongotest.Client(t)
	ctx := context.Background()
	src, proj := client.Database("s").Collection("docs"), client.Database("p").Collection("docs")
	stamp := bson.D{{Key: "ct", Value: int64(1)}}
	insert := func(c *mongo.Collection, docs ...bson.D) {
		t.Helper()
		for _, d := range docs {
			if _, err := c.InsertOne(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(src, newDoc(1, 100), newDoc(2, 100), newDoc(3, 100), newDoc(5, 100))
	// 1: equal, fields in another order, with the stamp; 2: stale;
	// 3: missing (a tombstone); 4: resurrected; 5: missing.
	d1 := newDoc(1, 100)
	insert(proj, append(bson.D{d1[3], d1[0], {Key: "_ferry", Value: stamp}}, d1[1:3]...))
	d2 := newDoc(2, 100)
	d2[2].Value = int32(7)
	insert(proj, d2, bson.D{{Key: "_id", Value: int64(3)}, {Key: "_ferry", Value: bson.D{{Key: "del", Value: true}}}}, newDoc(4, 100))

	d, err := compareProjection(ctx, src, proj)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != 4 || d.Live != 3 || d.Tombstones != 1 || d.Missing != 2 || d.Resurrected != 1 || d.Stale != 1 || d.equal() {
		t.Errorf("diff %s, want 4 source, 3 live, 1 tombstone, 2 missing, 1 resurrected, 1 stale", d)
	}
	if !strings.Contains(d.String(), "stale _id 2") || !strings.Contains(d.String(), "resurrected _id 4") {
		t.Errorf("examples: %s", d)
	}
	// The same projection repaired compares equal.
	if _, err := proj.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int64(2), int64(3), int64(4)}}}}}); err != nil {
		t.Fatal(err)
	}
	insert(proj, newDoc(2, 100), newDoc(3, 100), newDoc(5, 100))
	if d, err = compareProjection(ctx, src, proj); err != nil || !d.equal() || d.Live != 4 {
		t.Errorf("repaired: %s, %v; want equal", d, err)
	}
}

// TestSnapshotBadCommandLines: every bad flag of bench snapshot is a usage
// error naming the flag.
func TestSnapshotBadCommandLines(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-docs", "0"}, "-docs must be at least 1"},
		{[]string{"-doc-size", "10"}, "-doc-size must be at least 64"},
		{[]string{"-partitions", "1"}, "-partitions must be at least 2"},
		{[]string{"-chunk", "0"}, "-chunk must be 1 to 1000000"},
		{[]string{"-scenarios", "reads,crash"}, `unknown scenario "crash"; the scenarios are reads, filter, kill, writes, oplog`},
		{[]string{"-lease-ttl", "10ms"}, "-lease-ttl must be at least 100ms"},
		{[]string{"-snapshot-rate", "-1"}, "-snapshot-rate must be 0"},
		{[]string{"-log", "loud"}, "-log must be debug, info, warn or error"},
		{[]string{"kill"}, `unexpected argument "kill"`},
	} {
		err := runBench(context.Background(), append([]string{"snapshot"}, c.args...), &bytes.Buffer{}, &bytes.Buffer{})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
	o, err := parseSnapOptions([]string{"-scenarios", "oplog, reads,oplog"}, &bytes.Buffer{})
	if err != nil || strings.Join(o.scenarios, ",") != "reads,oplog" {
		t.Errorf("-scenarios oplog, reads,oplog: %v, %v; want reads,oplog in the run's order", o, err)
	}
}

// TestRowIDsRoundTrip: the _ids a member reports come back as sent, in
// order, negative ones included, through the message's JSON.
func TestRowIDsRoundTrip(t *testing.T) {
	ids := []int64{0, 1, 127, 128, -1, -129, 999_999, 1 << 40, -(1 << 62)}
	b, err := json.Marshal(message{Kind: "rows", Rows: appendRowIDs(nil, ids...)})
	if err != nil {
		t.Fatal(err)
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got, err := rowIDs(m.Rows)
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("rows %v (%v), want %v", got, err, ids)
	}
	if _, err := rowIDs([]byte{0x80}); err == nil {
		t.Fatal("a truncated varint read as an id")
	}
}
