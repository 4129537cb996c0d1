package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// The tests in this file run `ferry snapshot` against two `ferry run`
// member processes (one partition each) keeping a mongodb projection,
// as an operator would: the request is picked up without a restart, the
// re-delivered documents are counted in the projection (each snapshot row
// stamps its document bf: true) and in the members' /metrics
// (ferry_events_total{operation="backfill",result="applied"}).

// snapshotEnv is an emulator, a two-partition stream of shop.orders into
// the projection readmodel.orders, and its two members.
type snapshotEnv struct {
	*procEnv
	cfg       string
	members   []*member
	src, proj *mongo.Collection
}

// newSnapshotEnv starts the members with the stream's snapshot block
// snapshotYAML, waits until each owns one partition, then inserts docs
// documents {_id: i, k: i} and waits until the projection has them all
// (streamed as inserts: none of them is a snapshot row).
func newSnapshotEnv(t *testing.T, snapshotYAML string, docs int) *snapshotEnv {
	t.Helper()
	e := &snapshotEnv{procEnv: newProcEnv(t)}
	uri := e.srv.URI()
	// A long lease: a takeover during the snapshot (a loaded machine's
	// slow renewal) would deliver a chunk again, which is not what these
	// tests are about.
	e.cfg = writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
state: {uri: %q}
streams:
  - name: orders
    source: {uri: %q, scope: {collection: shop.orders}, full_document: updateLookup}
    group: {partitions: 2, lease_ttl: 15s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: transactional}
    %s
    sink: {mongodb: {database: readmodel, collection: orders}}
`, uri, uri, snapshotYAML))
	ctx := context.Background()
	_ = e.client.Database("readmodel").CreateCollection(ctx, "orders") // written in transactions
	e.src = e.client.Database("shop").Collection("orders")
	e.proj = e.client.Database("readmodel").Collection("orders")
	e.members = []*member{startMember(t, e.cfg, "m1")}
	poll.Until(t, 30*time.Second, e.members[0].metricIs(`ferry_partitions_owned{stream="orders"}`, 2))
	e.members = append(e.members, startMember(t, e.cfg, "m2"))
	for _, m := range e.members {
		poll.Until(t, 60*time.Second, m.metricIs(`ferry_partitions_owned{stream="orders"}`, 1))
	}
	batch := make([]any, docs)
	for i := range batch {
		batch[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}}
	}
	if _, err := e.src.InsertMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, func() error {
		n, err := e.proj.CountDocuments(ctx, mongoproj.Live())
		if err != nil || n != int64(docs) {
			return fmt.Errorf("the projection has %d of %d documents (%v)", n, docs, err)
		}
		return nil
	})
	return e
}

// backfillApplied sums the snapshot rows the members applied.
func (e *snapshotEnv) backfillApplied() int {
	n := 0
	for _, m := range e.members {
		_, body := m.get("/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, `ferry_events_total{operation="backfill"`) && strings.Contains(line, `result="applied"`) {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
					n += int(v)
				}
			}
		}
	}
	return n
}

// snapshotted returns the _ids of the projection's documents whose last
// write was a snapshot row, sorted.
func (e *snapshotEnv) snapshotted(t *testing.T) []int {
	t.Helper()
	ctx := context.Background()
	cur, err := e.proj.Find(ctx, bson.D{{Key: mongoproj.Field + ".bf", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	sort.Ints(ids)
	return ids
}

// status runs `ferry snapshot status -json` in-process.
func (e *snapshotEnv) status(t *testing.T) streamSnapshotsJSON {
	t.Helper()
	code, out, errOut := runCLI("snapshot", "status", "-c", e.cfg, "-stream", "orders", "-json")
	if code != 0 {
		t.Fatalf("ferry snapshot status -json: exit %d\n%s%s", code, out, errOut)
	}
	var doc snapshotStatusJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Streams) != 1 {
		t.Fatalf("ferry snapshot status -json: %v\n%s", err, out)
	}
	return doc.Streams[0]
}

// cliProc is a ferry command other than run, as its own process, its
// standard output a pipe (not a terminal).
type cliProc struct {
	cmd         *exec.Cmd
	out, errOut syncBuffer
	done        chan struct{}
}

func startCLI(t *testing.T, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), childEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exit waits for the process and returns its exit code.
func (p *cliProc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("ferry %s did not exit within %v:\n%s%s", strings.Join(p.cmd.Args[1:], " "), within, p.out.String(), p.errOut.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

var requestLine = regexp.MustCompile(`snapshot requested: stream orders, request ([0-9a-f]{24})`)

// requestID waits until the command printed its request's id.
func (p *cliProc) requestID(t *testing.T) string {
	t.Helper()
	var id string
	poll.Until(t, 20*time.Second, func() error {
		m := requestLine.FindStringSubmatch(p.out.String())
		if m == nil {
			return fmt.Errorf("no request id printed yet:\n%s%s", p.out.String(), p.errOut.String())
		}
		id = m[1]
		return nil
	})
	return id
}

// TestSnapshotRequestDeliversTheFilteredDocuments: against a live
// two-member stream of 900 documents, `ferry snapshot -filter '{"k":
// {"$lt": 300}}' -wait` is picked up without a restart and re-delivers
// exactly the 300 matching documents, each once; -wait, its output not a
// terminal, prints progress lines and ends with the finished line, exit
// 0. snapshot.chunk_size (25) reached the members: each partition
// finished n/25+1 chunks (the default, 1000, would be one each).
// `ferry snapshot status` shows the numbers.
func TestSnapshotRequestDeliversTheFilteredDocuments(t *testing.T) {
	e := newSnapshotEnv(t, "snapshot: {chunk_size: 25, max_rate: 200, poll_interval: 200ms}", 900)
	if n := e.backfillApplied(); n != 0 {
		t.Fatalf("%d snapshot rows before the request", n)
	}
	p := startCLI(t, "snapshot", "-c", e.cfg, "-stream", "orders", "-filter", `{"k": {"$lt": 300}}`,
		"-note", "receiver bug 42", "-wait", "-interval", "100ms")
	code := p.exit(t, 60*time.Second)
	out := p.out.String()
	t.Logf("ferry snapshot -wait:\n%s", out)
	if code != 0 {
		t.Fatalf("ferry snapshot -wait: exit %d, want 0\n%s%s", code, out, p.errOut.String())
	}
	id := p.requestID(t)
	progress := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+ snapshot ` + id + `: \d+\.\d%, \d+ of \S+ documents, \S+/s, ETA \S+; partitions: .+$`)
	if lines := progress.FindAllString(out, -1); len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), " running") {
		t.Errorf("no progress line in the output, or none while partitions ran")
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b[") {
		t.Errorf("the output, not a terminal, has a redrawn bar:\n%q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^snapshot ` + id + ` of stream orders finished: 300 documents in \S+ \(\d+ documents/s\), 2 partitions$`).MatchString(last) {
		t.Errorf("the last line is %q, want the finished line with 300 documents", last)
	}

	// Exactly the matching documents, each once.
	want := make([]int, 300)
	for i := range want {
		want[i] = i
	}
	if got := e.snapshotted(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the projection's snapshotted documents are %d (%v...), want _id 0 to 299", len(got), got[:min(len(got), 10)])
	}
	poll.Until(t, 10*time.Second, func() error {
		if n := e.backfillApplied(); n < 300 {
			return fmt.Errorf("the members applied %d snapshot rows, want 300", n)
		}
		return nil
	})
	if n := e.backfillApplied(); n != 300 {
		t.Errorf("the members applied %d snapshot rows, want 300 (each matching document once)", n)
	}

	// The chunk size, and the status.
	st := e.status(t)
	if st.Request == nil || st.Request.ID != id || st.Request.Filter != `{"k":{"$lt":300}}` || st.Request.Note != "receiver bug 42" ||
		st.Request.Cancelled || len(st.Request.NotTakenUp) != 0 {
		t.Errorf("status request = %+v", st.Request)
	}
	var done int64
	_, table, _ := runCLI("snapshot", "status", "-c", e.cfg)
	t.Logf("ferry snapshot status:\n%s", table)
	for _, p := range st.Partitions {
		s := p.Snapshot
		if s == nil || s.Request != id || s.Reason != "request" || s.State != "finished" || s.Filter == "" || s.Percent != 100 {
			t.Fatalf("partition %d: snapshot %+v", p.Partition, s)
		}
		if wantChunks := s.Done/25 + 1; s.Chunks != wantChunks {
			t.Errorf("partition %d: %d chunks for %d documents, want %d (chunk_size 25)", p.Partition, s.Chunks, s.Done, wantChunks)
		}
		done += s.Done
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^  %d +%s +request +finished +%d/%d +100\.0%% +\d+/s +- +%d +yes$`,
			p.Partition, regexp.QuoteMeta(s.ID), s.Done, s.Estimated, s.Chunks))
		if !row.MatchString(table) {
			t.Errorf("ferry snapshot status has no row %s", row)
		}
	}
	if done != 300 {
		t.Errorf("the partitions record %d documents done, want 300", done)
	}
	for _, want := range []string{"request " + id + " (", "): taken up by every partition", `filter: {"k":{"$lt":300}}`, "note: receiver bug 42"} {
		if !strings.Contains(table, want) {
			t.Errorf("ferry snapshot status lacks %q", want)
		}
	}
}

// TestSnapshotCancel: a throttled snapshot (snapshot.max_rate 40
// documents/s per partition, 450 documents each) runs for seconds.
// Ctrl-C stops `ferry snapshot -wait` (exit 130) and not the snapshot,
// which goes on; `ferry snapshot cancel` stops it at the members' next
// chunk: `ferry snapshot status` shows both partitions cancelled, the
// members log "snapshot cancelled", and no snapshot row is delivered
// beyond what the partitions recorded.
func TestSnapshotCancel(t *testing.T) {
	e := newSnapshotEnv(t, "snapshot: {chunk_size: 10, max_rate: 40, poll_interval: 200ms}", 900)
	p := startCLI(t, "snapshot", "-c", e.cfg, "-stream", "orders", "-wait", "-interval", "100ms")
	id := p.requestID(t)
	doneOf := func(st streamSnapshotsJSON, state string) (int64, error) {
		var done int64
		for _, p := range st.Partitions {
			if p.Snapshot == nil || p.Snapshot.Request != id || p.Snapshot.State != state {
				return 0, fmt.Errorf("partition %d: %+v, want %s", p.Partition, p.Snapshot, state)
			}
			done += p.Snapshot.Done
		}
		return done, nil
	}
	var before int64
	poll.Until(t, 30*time.Second, func() error {
		done, err := doneOf(e.status(t), "running")
		if err == nil && done < 20 {
			err = fmt.Errorf("%d documents done", done)
		}
		before = done
		return err
	})

	// Ctrl-C stops the waiting, not the snapshot.
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t, 10*time.Second); code != 130 {
		t.Fatalf("ferry snapshot -wait after Ctrl-C: exit %d, want 130\n%s%s", code, p.out.String(), p.errOut.String())
	}
	if out := p.out.String(); !strings.Contains(out, "The snapshot was NOT cancelled: it goes on.") ||
		!strings.Contains(out, "ferry snapshot cancel -c "+e.cfg+" -stream orders -id "+id) {
		t.Errorf("ferry snapshot -wait after Ctrl-C does not say the snapshot goes on and how to cancel it:\n%s", out)
	}
	poll.Until(t, 30*time.Second, func() error {
		st := e.status(t)
		done, err := doneOf(st, "running")
		if err == nil && done <= before+20 {
			err = fmt.Errorf("%d documents done, %d at Ctrl-C", done, before)
		}
		for _, p := range st.Partitions {
			if err == nil && p.Snapshot.Done < 60 {
				err = fmt.Errorf("partition %d: %d documents done", p.Partition, p.Snapshot.Done)
			}
		}
		return err
	})

	code, out, errOut := runCLI("snapshot", "cancel", "-c", e.cfg, "-stream", "orders")
	if code != 0 || !strings.Contains(out, "request "+id+" of stream orders cancelled") {
		t.Fatalf("ferry snapshot cancel: exit %d\n%s%s", code, out, errOut)
	}
	var total int64
	poll.Until(t, 20*time.Second, func() error {
		var err error
		total, err = doneOf(e.status(t), "cancelled")
		return err
	})
	if total >= 900 {
		t.Fatalf("the snapshot finished (%d documents) before the cancellation: the test proves nothing", total)
	}
	st := e.status(t)
	for _, p := range st.Partitions {
		// Chunks of 10 read at most 40/s once the first is done: 60
		// documents or more take 1.25 s at least.
		if s := p.Snapshot; s.Done < 60 || s.Rate > 60 {
			t.Errorf("partition %d read %d documents at %.0f documents/s; want 60 or more, at most about snapshot.max_rate 40", p.Partition, s.Done, s.Rate)
		}
	}
	_, table, _ := runCLI("snapshot", "status", "-c", e.cfg, "-stream", "orders")
	t.Logf("ferry snapshot status:\n%s", table)
	if n := len(regexp.MustCompile(`(?m)^  [01] +\S+ +request +cancelled +\d+/\d+ `).FindAllString(table, -1)); n != 2 ||
		!strings.Contains(table, "request "+id+" (") || !strings.Contains(table, "): cancelled") {
		t.Errorf("ferry snapshot status does not show both partitions and the request cancelled")
	}
	for _, m := range e.members {
		poll.Until(t, 10*time.Second, func() error {
			for _, l := range m.logLines() {
				if strings.Contains(l, `"msg":"snapshot cancelled"`) {
					return nil
				}
			}
			return fmt.Errorf("%s does not log that the snapshot was cancelled", m.name)
		})
	}

	// No snapshot row after the cancellation: changes streamed after it
	// reach the projection through both partitions, and the rows applied
	// are still those the partitions recorded.
	markers := make([]any, 20)
	for i := range markers {
		markers[i] = bson.D{{Key: "_id", Value: 1000 + i}, {Key: "k", Value: 1000 + i}}
	}
	if _, err := e.src.InsertMany(context.Background(), markers); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		n, err := e.proj.CountDocuments(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 1000}}}})
		if err != nil || n != 20 {
			return fmt.Errorf("%d of 20 markers projected (%v)", n, err)
		}
		return nil
	})
	if n := e.backfillApplied(); int64(n) != total {
		t.Errorf("the members applied %d snapshot rows, the partitions recorded %d: rows were delivered after the cancellation", n, total)
	}
	if got := len(e.snapshotted(t)); int64(got) != total {
		t.Errorf("%d documents snapshotted in the projection, the partitions recorded %d", got, total)
	}
	if after, err := doneOf(e.status(t), "cancelled"); err != nil || after != total {
		t.Errorf("after the markers: %d documents done (%v), %d at the cancellation", after, err, total)
	}
}

// TestSnapshotBadFlags: the command line's problems are named by flag,
// exit 2, before anything is written.
func TestSnapshotBadFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, `
state: {bolt: {path: `+filepath.Join(dir, "ferry.db")+`}}
streams:
  - name: orders
    source: {uri: "mongodb://127.0.0.1:1/?replicaSet=rs0", scope: {collection: shop.orders}}
    on_poison: stall
    sink: {stdout: {}}
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-filter", `{"k": `}, "-filter: not a JSON document"},
		{[]string{"-filter", `[1, 2]`}, "-filter: not a JSON document"},
		{[]string{"-filter", `k < 3`}, `write a query filter in Extended JSON, such as '{"status": "open"}'`},
		{[]string{"-note", strings.Repeat("n", 1001)}, "-note: at most 1000 bytes"},
		{[]string{"-wait", "-interval", "1ms"}, "-interval: at least 100ms"},
		{[]string{"-wait"}, "-wait needs a MongoDB state store (state.uri)"},
		{[]string{"-stream", "nope"}, `-stream: no stream named "nope" in the configuration (streams: orders)`},
	} {
		args := append([]string{"snapshot", "-c", cfg}, tc.args...)
		if !strings.Contains(strings.Join(tc.args, " "), "-stream") {
			args = append(args, "-stream", "orders")
		}
		code, out, errOut := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("ferry %s: exit %d, stdout %q, stderr %q; want 2 and %q", strings.Join(args, " "), code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI("snapshot", "-c", cfg); code != 2 || !strings.Contains(errOut, "-stream: required") {
		t.Errorf("ferry snapshot without -stream: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI("snapshot", "cancel", "-c", cfg); code != 2 || !strings.Contains(errOut, "-stream: required") {
		t.Errorf("ferry snapshot cancel without -stream: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "ferry.db")); !os.IsNotExist(err) {
		t.Errorf("a refused command line created the state file (%v)", err)
	}
}

// TestSnapshotBoltState: with state.bolt, requests are written while
// ferry run is stopped (it takes them up when it starts); while it runs
// the file is locked, and the command says so and what to do. The file
// is never created by the snapshot commands.
func TestSnapshotBoltState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferry.db")
	cfg := writeFile(t, `
state: {bolt: {path: `+path+`}}
streams:
  - name: orders
    source: {uri: "mongodb://127.0.0.1:1/?replicaSet=rs0", scope: {database: shop}}
    group: {partitions: 1}
    on_poison: stall
    sink: {stdout: {}}
`)
	if code, _, errOut := runCLI("snapshot", "status", "-c", cfg); code != 1 || !strings.Contains(errOut, "ferry run creates it") {
		t.Errorf("status without the state file: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("ferry snapshot status created the state file (%v)", err)
	}
	store, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	code, out, errOut := runCLI("snapshot", "-c", cfg, "-stream", "orders", "-filter", `{"status": "open"}`)
	m := requestLine.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, `the documents matching {"status":"open"}`) {
		t.Fatalf("ferry snapshot: exit %d\n%s%s", code, out, errOut)
	}
	id := m[1]
	_, table, _ := runCLI("snapshot", "status", "-c", cfg)
	if !strings.Contains(table, "request "+id+" (") || !strings.Contains(table, "pending; not taken up yet by partition(s) 0") ||
		!regexp.MustCompile(`(?m)^  0 +- +- +no snapshot`).MatchString(table) {
		t.Errorf("ferry snapshot status:\n%s", table)
	}

	// ferry run holds the file.
	held, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("snapshot", "cancel", "-c", cfg, "-stream", "orders")
	if code != 1 || !strings.Contains(errOut, "is locked by the ferry run that uses it") || !strings.Contains(errOut, "stop it") {
		t.Errorf("cancel while the file is locked: exit %d, %q", code, errOut)
	}
	held.Close()
	if code, out, errOut := runCLI("snapshot", "cancel", "-c", cfg, "-stream", "orders", "-id", "0123"); code != 1 ||
		!strings.Contains(errOut, "-id: request 0123 is not the stream's current request ("+id+")") {
		t.Errorf("cancel of another id: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("snapshot", "cancel", "-c", cfg, "-stream", "orders"); code != 0 || !strings.Contains(out, "request "+id+" of stream orders cancelled") {
		t.Errorf("cancel: exit %d\n%s%s", code, out, errOut)
	}
	store, err = boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if req, err := store.SnapshotRequest(context.Background(), "orders"); err != nil || req.ID != id || !req.Cancelled || req.Filter.String() != `{"status": "open"}` {
		t.Errorf("stored request %+v, %v", req, err)
	}
}

// TestSnapshotStoreWithoutRequests: a state store that keeps no snapshot
// requests is named with the way out.
func TestSnapshotStoreWithoutRequests(t *testing.T) {
	_, err := snapshotRequests(struct{ checkpoint.Store }{}, "state.uri")
	if err == nil || !strings.Contains(err.Error(), "state.uri: this state store") ||
		!strings.Contains(err.Error(), "does not keep snapshot requests") || !strings.Contains(err.Error(), "use a MongoDB state store (state.uri) or state.bolt") {
		t.Errorf("err = %v", err)
	}
}

// TestSnapshotProgressLines: the terminal's bar and the plain line.
func TestSnapshotProgressLines(t *testing.T) {
	v := waitView{done: 150_000, total: 600_000, partitions: 4, running: 3, waiting: 1}
	if got, want := barLine(v, 5000), "[#####...............]  25.0%  150000/~600000 docs  5000/s  ETA 1m30s"; got != want {
		t.Errorf("bar %q, want %q", got, want)
	}
	if got, want := progressText(v, 5000), "25.0%, 150000 of ~600000 documents, 5000/s, ETA 1m30s; partitions: 3 running, 1 not started (its owner takes the request up within snapshot.poll_interval)"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := barLine(waitView{partitions: 2, waiting: 2}, 0); got != "[....................]   0.0%  0/? docs  -/s  ETA -" {
		t.Errorf("bar before any progress: %q", got)
	}
	if got := barLine(waitView{done: 10, total: 8, partitions: 1, finished: 1}, 0); !strings.HasPrefix(got, "[####################] 100.0%") {
		t.Errorf("finished bar: %q", got)
	}
	if n := len(barLine(waitView{done: 9_999_999_999, total: 9_999_999_999, partitions: 8, running: 8}, 99_999_999)); n > 79 {
		t.Errorf("the bar is %d columns wide", n)
	}
}

// TestSnapshotWaitShowsAFailingChunk: -wait prints a line when a
// partition's next chunk starts failing or fails otherwise, not at every
// retry, and one when it goes through again.
func TestSnapshotWaitShowsAFailingChunk(t *testing.T) {
	var out strings.Builder
	w := &snapshotWait{out: &out}
	views := []map[int]chunkFailure{
		nil,
		{1: {1, "(AtlasError) 8000 refused"}},
		{1: {2, "(AtlasError) 8000 refused"}},
		{1: {3, "connection reset"}, 3: {1, "connection reset"}},
		{3: {2, "connection reset"}},
		nil,
	}
	for _, f := range views {
		w.showFailing(waitView{failing: f})
	}
	want := "partition 1: its next chunk failed (1 attempt so far), retrying: (AtlasError) 8000 refused\n" +
		"partition 1: its next chunk failed (3 attempts so far), retrying: connection reset\n" +
		"partition 3: its next chunk failed (1 attempt so far), retrying: connection reset\n" +
		"partition 1: its chunk went through; the snapshot goes on\n" +
		"partition 3: its chunk went through; the snapshot goes on\n"
	if out.String() != want {
		t.Errorf("-wait printed\n%s\nwant\n%s", out.String(), want)
	}
}
