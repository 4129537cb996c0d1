package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// syncBuffer is a bytes.Buffer safe for concurrent use that counts the
// Write calls it took.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

// Writes returns how many Write calls it took.
func (s *syncBuffer) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// childEnv marks a member process a test started (see proc_test.go).
const childEnv = "FERRY_CLI_CHILD"

func TestMain(m *testing.M) {
	// The process tests re-execute their own binary as `ferry run` member
	// processes; under go test that binary is this test binary, which then
	// runs the command line it was given, as main does.
	if os.Getenv(childEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ferry.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	var out, errOut bytes.Buffer
	good := writeFile(t, `
state: {bolt: {path: x.db}}
streams:
  - name: s
    source: {uri: "mongodb://localhost/?replicaSet=rs0", scope: {database: shop}}
    on_poison: stall
    sink: {stdout: {}}
`)
	if code := run(context.Background(), []string{"validate", "-c", good}, &out, &errOut); code != 0 {
		t.Fatalf("validate good config: exit %d: %s", code, errOut.String())
	}
	bad := writeFile(t, `
streams:
  - name: s
    source: {uri: "http://nope", scope: {database: shop}}
    group: {partitions: 0}
    sink: {webhook: {url: "not a url", secret: "x"}}
    colour: blue
`)
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"validate", "-c", bad}, &out, &errOut); code != 1 {
		t.Fatalf("validate bad config: exit %d, want 1", code)
	}
	for _, path := range []string{"streams[0].source.uri", "streams[0].group.partitions", "streams[0].sink.webhook.url", "streams[0].colour"} {
		if !strings.Contains(errOut.String(), path) {
			t.Errorf("validate output does not name %s:\n%s", path, errOut.String())
		}
	}
}

// TestRunDeliversAndStops runs the daemon with the stdout sink against the
// emulator (two partitions, idempotent mode): events arrive as JSON lines,
// /metrics, /readyz and /healthz answer, and cancellation (SIGTERM) stops it
// within Cloud Run's budget.
func TestRunDeliversAndStops(t *testing.T) {
	srv, client := emulator(t)
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
log: {level: info, format: json}
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, start_at: now}
    group: {partitions: 2, lease_ttl: 2s}
    delivery: {mode: idempotent}
    sink: {stdout: {}}
`)
	d := startRun(t, cfgPath)
	addr := d.addr(t)
	// Wait until both partitions run, then write.
	poll.Until(t, 30*time.Second, func() error {
		if n := strings.Count(d.errOut.String(), `"msg":"partition assigned"`); n < 2 {
			return fmt.Errorf("%d partitions assigned, want 2", n)
		}
		return nil
	})
	// The consumers record their start position before reading: wait for
	// both partitions' checkpoints.
	d.waitStarted(t, client, "ferry_state", 2)
	for i := range 10 {
		if _, err := client.Database("shop").Collection("orders").InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := strings.Count(d.out.String(), `"operationType":"insert"`); n != 10 {
			return fmt.Errorf("%d inserts printed, want 10", n)
		}
		return nil
	})
	for _, p := range []string{"/metrics", "/readyz", "/healthz"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
		if p == "/metrics" && (!strings.Contains(string(body), `ferry_events_total{operation="insert",partition=`) ||
			!strings.Contains(string(body), `ferry_partitions_owned{stream="orders"} 2`) ||
			!strings.Contains(string(body), `ferry_dlq_size{stream="orders"} 0`) ||
			!strings.Contains(string(body), `ferry_ledger_duplicates_total{stream="orders"}`) ||
			!strings.Contains(string(body), `ferry_lease_renew_failures_total{stream="orders"}`)) {
			t.Fatalf("/metrics lacks ferry_events_total:\n%.2000s", body)
		}
	}
	// ferry status reads the state store: both partitions owned.
	var st, stErr bytes.Buffer
	if code := run(context.Background(), []string{"status", "-c", cfgPath}, &st, &stErr); code != 0 {
		t.Fatalf("status: exit %d: %s", code, stErr.String())
	}
	if !strings.Contains(st.String(), "stream orders: running; 2 partition(s), 1 live member(s)") || strings.Count(st.String(), "running") < 3 {
		t.Fatalf("status output:\n%s", st.String())
	}
	var dl, dlErr bytes.Buffer
	if code := run(context.Background(), []string{"dlq", "list", "-c", cfgPath}, &dl, &dlErr); code != 0 {
		t.Fatalf("dlq list: exit %d: %s", code, dlErr.String())
	}
	// ferry reset refuses while members are live.
	var rs, rsErr bytes.Buffer
	if code := run(context.Background(), []string{"reset", "-c", cfgPath, "-stream", "orders"}, &rs, &rsErr); code != 1 || !strings.Contains(rsErr.String(), "live member") {
		t.Fatalf("reset of a running stream: exit %d: %s", code, rsErr.String())
	}
	start := time.Now()
	d.stop(t)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %v, longer than Cloud Run's 10s", took)
	}
	// start_at is now: the reset would skip what was written since the
	// checkpoints, so it wants -yes and deletes nothing without it.
	rs.Reset()
	rsErr.Reset()
	if code := run(context.Background(), []string{"reset", "-c", cfgPath, "-stream", "orders"}, &rs, &rsErr); code != 1 ||
		!regexp.MustCompile(`start_at is now: the changes of the last \d+ s \(since `).MatchString(rsErr.String()) {
		t.Fatalf("reset without -yes: exit %d: %s%s", code, rs.String(), rsErr.String())
	}
	if n, _ := client.Database("ferry_state").Collection("checkpoints").CountDocuments(context.Background(), bson.D{}); n != 2 {
		t.Fatalf("reset without -yes left %d checkpoints, want 2", n)
	}
	rs.Reset()
	rsErr.Reset()
	if code := run(context.Background(), []string{"reset", "-c", cfgPath, "-stream", "orders", "-yes"}, &rs, &rsErr); code != 0 || !strings.Contains(rs.String(), "2 checkpoint(s) deleted") {
		t.Fatalf("reset after stopping: exit %d: %s%s", code, rs.String(), rsErr.String())
	}
}

// TestRunDeliversBatches: a backlog caught up by `ferry run` reaches the
// sink in batches (issue 15): 400 events written before the stream's
// start_at time, idempotent mode, two partitions, the stdout sink: every
// event is delivered exactly once, in far fewer writes than events (each
// write is one lane's batch), and each document's events in change order.
func TestRunDeliversBatches(t *testing.T) {
	srv, client := emulator(t)
	// The oplog's first entry, then a start time after it (whole seconds)
	// and before the backlog.
	if _, err := client.Database("shop").Collection("other").InsertOne(context.Background(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	srv.AdvanceClock(2 * time.Second)
	start := srv.Now().Truncate(time.Second).UTC()
	const docs, updates = 100, 3 // 400 events
	coll := client.Database("shop").Collection("orders")
	for i := range docs {
		if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= updates; n++ {
		if _, err := coll.UpdateMany(context.Background(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}}); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
log: {level: info, format: json}
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, start_at: `+start.Format(time.RFC3339)+`}
    group: {partitions: 2, lease_ttl: 2s}
    delivery: {mode: idempotent}
    batch: {events: 50, linger: 20ms}
    sink: {stdout: {}}
`)
	d := startRun(t, cfgPath)
	const events = docs * (1 + updates)
	poll.Until(t, 30*time.Second, func() error {
		d.alive(t)
		if n := strings.Count(d.out.String(), "\n"); n < events {
			return fmt.Errorf("%d of %d events delivered:\n%s", n, events, d.errOut.String())
		}
		return nil
	})
	d.stop(t)
	lines := strings.Split(strings.TrimSpace(d.out.String()), "\n")
	if len(lines) != events {
		t.Fatalf("%d lines, want %d (idempotent: each event once)", len(lines), events)
	}
	ids := map[string]bool{}
	last := map[int32]int32{} // document → the last n seen
	for _, ln := range lines {
		var rec struct {
			ID    string `json:"id"`
			Event struct {
				DocumentKey struct {
					ID int32 `json:"_id"`
				} `json:"documentKey"`
				FullDocument *struct {
					N int32 `json:"n"`
				} `json:"fullDocument"`
				Update *struct {
					Fields struct {
						N int32 `json:"n"`
					} `json:"updatedFields"`
				} `json:"updateDescription"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(ln), &rec); err != nil {
			t.Fatalf("line %q: %v", ln, err)
		}
		if ids[rec.ID] {
			t.Errorf("event %s delivered twice", rec.ID)
		}
		ids[rec.ID] = true
		doc, n := rec.Event.DocumentKey.ID, int32(-1)
		switch {
		case rec.Event.FullDocument != nil: // the insert
			n = rec.Event.FullDocument.N
		case rec.Event.Update != nil:
			n = rec.Event.Update.Fields.N
		}
		if prev, ok := last[doc]; (ok && n != prev+1) || (!ok && n != 0) {
			t.Errorf("document %d: n=%d after %d, want change order", doc, n, prev)
		}
		last[doc] = n
	}
	writes := d.out.Writes()
	t.Logf("%d events in %d writes", events, writes)
	if writes > events/4 {
		t.Errorf("%d events took %d writes, want batches (at most %d writes)", events, writes, events/4)
	}
}

// emulator starts an emulator for the test and connects a client to it;
// the client disconnects, then the emulator stops, when the test ends.
// The daemon's tests always run on the emulator, whatever
// $FERRY_TEST_MONGODB_URI says: they drive its clock and fail points.
func emulator(t *testing.T, opts ...mongotest.Option) (*mongotest.Server, *mongo.Client) {
	t.Helper()
	srv := mongotest.New(t, opts...)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return srv, client
}

// TestSecretsNeverShown: a password in the MongoDB URI and a webhook secret
// never appear in ferry's output — logs, errors, validate, status — even
// when connecting fails.
func TestSecretsNeverShown(t *testing.T) {
	srv := mongotest.New(t)
	const password, secret = "hunter2-pw-7731", "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	t.Setenv("FERRY_TEST_WEBHOOK_SECRET", secret)
	uri := strings.Replace(srv.URI(), "mongodb://", "mongodb://ferry:"+password+"@", 1) + "&serverSelectionTimeoutMS=1500"
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+uri+`"}
streams:
  - name: orders
    source: {uri: "`+uri+`", scope: {collection: shop.orders}}
    sink: {webhook: {url: "http://127.0.0.1:9/hook", secret: "${FERRY_TEST_WEBHOOK_SECRET}"}}
`)
	var all bytes.Buffer
	for _, args := range [][]string{{"validate", "-c", cfgPath}, {"run", "-c", cfgPath}, {"status", "-c", cfgPath}, {"dlq", "list", "-c", cfgPath}} {
		var out, errOut bytes.Buffer
		timeout := 20 * time.Second
		if args[0] == "run" {
			// The daemon retries the unreachable state store with backoff
			// (and says so) until stopped: 3 s of it.
			timeout = 3 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		run(ctx, args, &out, &errOut)
		cancel()
		all.WriteString(out.String())
		all.WriteString(errOut.String())
	}
	if strings.Contains(all.String(), password) || strings.Contains(all.String(), secret) || strings.Contains(all.String(), "c2VjcmV0") {
		t.Fatalf("a secret appeared in ferry's output:\n%s", all.String())
	}
	if !strings.Contains(all.String(), "ok (1 stream(s))") {
		t.Fatalf("validate did not accept the file:\n%s", all.String())
	}
}

// TestDLQReplay re-delivers a dead-lettered event through the stream's sink
// and removes it from the dead-letter store.
func TestDLQReplay(t *testing.T) {
	srv, client := emulator(t)
	ctx := context.Background()
	cs, err := client.Database("shop").Collection("orders").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: "o-1"}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	raw := append(bson.Raw(nil), cs.Current...)
	cs.Close(ctx)
	if _, err := client.Database("ferry").Collection("dlq").InsertOne(ctx, bson.D{
		{Key: "_id", Value: "orders/abc"}, {Key: "stream", Value: "orders"}, {Key: "eventId", Value: "abc"},
		{Key: "event", Value: raw}, {Key: "error", Value: "400 Bad Request"}, {Key: "attempts", Value: 1},
		{Key: "firstAttemptAt", Value: time.Now()}, {Key: "lastAttemptAt", Value: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeFile(t, `
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    sink: {stdout: {}}
`)
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"dlq", "replay", "-c", cfgPath, "-stream", "orders"}, &out, &errOut); code != 0 {
		t.Fatalf("dlq replay: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"o-1"`) || !strings.Contains(errOut.String(), "replayed 1, still failing 0") {
		t.Fatalf("replay output:\n%s\n%s", out.String(), errOut.String())
	}
	if n, _ := client.Database("ferry").Collection("dlq").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d dead letters left after a successful replay", n)
	}
}

// webhookRequest is one POST a test receiver got.
type webhookRequest struct {
	id, idempotencyKey, body string
	status                   int
}

// TestDLQReplayBackfill: backfill events (start_at: backfill) that the
// webhook receiver rejects with 400 are dead-lettered; `ferry dlq replay`
// re-delivers each as the same event — the scanned document as the body,
// the same webhook-id and Idempotency-Key as the rejected attempt — and
// clears the entries. One document has an ObjectId _id, one a document _id.
func TestDLQReplayBackfill(t *testing.T) {
	srv, client := emulator(t)
	ctx := context.Background()
	oid := bson.NewObjectID()
	if _, err := client.Database("shop").Collection("orders").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: oid}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "tenant", Value: "a"}, {Key: "n", Value: 1}}}, {Key: "v", Value: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []webhookRequest
	accept := false
	rejected := make(chan struct{}, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		status := http.StatusBadRequest
		if accept {
			status = http.StatusOK
		}
		got = append(got, webhookRequest{id: r.Header.Get("Webhook-Id"), idempotencyKey: r.Header.Get("Idempotency-Key"),
			body: string(body), status: status})
		mu.Unlock()
		w.WriteHeader(status)
		if status != http.StatusOK {
			rejected <- struct{}{}
		}
	}))
	defer hook.Close()
	t.Setenv("FERRY_TEST_WEBHOOK_SECRET", "whsec_"+base64.StdEncoding.EncodeToString([]byte("replay-secret-replay-secret-32by")))
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, start_at: backfill}
    sink: {webhook: {url: "`+hook.URL+`/hook", secret: "${FERRY_TEST_WEBHOOK_SECRET}"}}
`)
	daemon := startRun(t, cfgPath)
	for range 2 {
		select {
		case <-rejected:
		case err := <-daemon.done:
			t.Fatalf("ferry run stopped: %v\n%s", err, daemon.errOut.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("the backfill events did not reach the receiver\n%s", daemon.errOut.String())
		}
	}
	// A 400 is permanent: no retry, straight to the dead-letter store,
	// before the drain on stop ends.
	daemon.stop(t)
	dlq := client.Database("ferry_state").Collection("dlq")
	if n, _ := dlq.CountDocuments(ctx, bson.D{{Key: "operationType", Value: "backfill"}}); n != 2 {
		t.Fatalf("%d backfill dead letters, want 2\n%s", n, daemon.errOut.String())
	}
	mu.Lock()
	first := append([]webhookRequest(nil), got...)
	accept = true
	mu.Unlock()
	if len(first) != 2 {
		t.Fatalf("the receiver got %d requests before the replay, want 2: %+v", len(first), first)
	}

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"dlq", "replay", "-c", cfgPath, "-stream", "orders"}, &out, &errOut); code != 0 {
		t.Fatalf("dlq replay: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "replayed 2, still failing 0") {
		t.Fatalf("replay output:\n%s", errOut.String())
	}
	if n, _ := dlq.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d dead letters left after a successful replay", n)
	}
	mu.Lock()
	replays := append([]webhookRequest(nil), got[len(first):]...)
	mu.Unlock()
	if len(replays) != 2 {
		t.Fatalf("the receiver got %d replayed requests, want 2: %+v", len(replays), replays)
	}
	byID := map[string]webhookRequest{}
	for _, f := range first {
		if f.id == "" || f.idempotencyKey != f.id {
			t.Fatalf("original request: webhook-id %q, Idempotency-Key %q", f.id, f.idempotencyKey)
		}
		byID[f.id] = f
	}
	for _, r := range replays {
		f, ok := byID[r.id]
		if !ok {
			t.Fatalf("replay carries webhook-id %q, not one of the original attempts' %v", r.id, byID)
		}
		delete(byID, r.id)
		if r.idempotencyKey != f.idempotencyKey || r.body != f.body || r.status != http.StatusOK {
			t.Fatalf("replay %+v differs from the original attempt %+v", r, f)
		}
		// The body is the scanned document, not a change event.
		var doc bson.M
		if err := bson.UnmarshalExtJSON([]byte(r.body), false, &doc); err != nil {
			t.Fatalf("replayed body %s: %v", r.body, err)
		}
		if _, ok := doc["operationType"]; ok || doc["v"] == nil {
			t.Fatalf("replayed body %s is not the source document", r.body)
		}
	}
	if !strings.Contains(first[0].body+first[1].body, oid.Hex()) || !strings.Contains(first[0].body+first[1].body, `"tenant":"a"`) {
		t.Fatalf("bodies %s %s are not the two documents", first[0].body, first[1].body)
	}
}

// TestSecretsNotInMetrics runs the daemon with a webhook secret and reads
// /metrics while it runs: the secret is not there.
func TestSecretsNotInMetrics(t *testing.T) {
	srv := mongotest.New(t)
	const secret = "whsec_bWV0cmljcy1zZWNyZXQtbWV0cmljcy1zZWNyZXQtbWV0cmljcw=="
	t.Setenv("FERRY_TEST_WEBHOOK_SECRET", secret)
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    sink: {webhook: {url: "http://127.0.0.1:9/hook", secret: "${FERRY_TEST_WEBHOOK_SECRET}"}}
`)
	d := startRun(t, cfgPath)
	addr := d.addr(t)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d.cancel()
	<-d.done
	all := string(body) + d.out.String() + d.errOut.String()
	if !strings.Contains(string(body), "ferry_partitions_owned") {
		t.Fatalf("/metrics not served:\n%.500s", body)
	}
	if strings.Contains(all, secret) || strings.Contains(all, "bWV0cmljcy1zZWNyZXQ") {
		t.Fatal("the webhook secret appeared in /metrics or the logs")
	}
}

// TestRunMongoProjectionTransactional runs the daemon with the mongodb sink
// in transactional mode: the projection follows the source, each change
// applied once, inside the ledger's transaction.
func TestRunMongoProjectionTransactional(t *testing.T) {
	env := newProjectionEnv(t, "", "")
	cfgPath, client := env.cfgPath, env.client
	ctx := context.Background()
	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry_state", 2)
	src := env.src
	for i := range 20 {
		if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 100}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	proj := client.Database("readmodel").Collection("orders")
	poll.Until(t, 30*time.Second, func() error {
		live := bson.D{{Key: "_ferry.del", Value: bson.D{{Key: "$ne", Value: true}}}, {Key: "v", Value: bson.D{{Key: "$gte", Value: 100}}}}
		n, _ := proj.CountDocuments(ctx, live)
		dead, _ := proj.CountDocuments(ctx, bson.D{{Key: "_id", Value: 0}, {Key: "_ferry.del", Value: true}})
		if n != 19 || dead != 1 {
			return fmt.Errorf("projection: %d updated documents and %d tombstones, want 19 and 1", n, dead)
		}
		return nil
	})
	ledger, _ := client.Database("ferry_state").Collection("ledger").CountDocuments(ctx, bson.D{})
	if ledger != 41 { // 20 inserts, 20 updates, 1 delete
		t.Fatalf("ledger holds %d entries, want 41", ledger)
	}
	run.stop(t)
}
