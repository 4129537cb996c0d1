package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// ferryCmd runs a ferry command line in-process and returns its exit code
// and output.
func ferryCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// checkpointVersions is every partition's checkpoint version of a stream.
func checkpointVersions(t *testing.T, client *mongo.Client, stream string) []int64 {
	t.Helper()
	cps, err := mongostore.New(client.Database("ferry"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cps.List(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var v []int64
	for _, cp := range list {
		v = append(v, cp.Version)
	}
	return v
}

// TestPositionSetRoundTrip, as an operator runs it, with `ferry run`
// processes: a stream is stopped, changes are made, and its position is
// set back to a time inside the oplog window: the next run delivers
// everything since that time, and nothing twice (idempotent delivery: the
// ledger absorbs the changes delivered before). Refused: while a member is
// live; a position that skips changes without -yes; once the oplog rolled
// past the time, that time, with the gap in seconds — and nothing is
// written by a refusal.
func TestPositionSetRoundTrip(t *testing.T) {
	e := newProcEnv(t, mongotest.OplogMaxEntries(300))
	rcv := newReceiver(t)
	e.insert("orders", bson.D{{Key: "_id", Value: "before"}})
	e.srv.AdvanceClock(10 * time.Second) // no member runs yet: no lease expires
	t0 := e.srv.Now().UTC().Truncate(time.Second)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))

	m0 := startMember(t, cfg, "m0")
	waitStartedIn(t, e, "orders", 2)
	for i := range 10 {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	poll.Until(t, 30*time.Second, rcv.deliveredIs(10))
	m0.stop(syscall.SIGTERM)
	for i := 10; i < 20; i++ {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}

	code, out, errOut := ferryCmd("position", "show", "-c", cfg, "-stream", "orders")
	if code != 0 || !strings.Contains(out, "oplog window from") || !strings.Contains(out, "head-room") ||
		strings.Contains(out, "history lost") {
		t.Fatalf("position show: exit %d\n%s%s", code, out, errOut)
	}

	// Forward to now: it skips the 10 undelivered changes: -yes is needed.
	// (Now by the source's clock, moved on 5 s: a time after it is refused.)
	e.srv.AdvanceClock(5 * time.Second) // no member runs: no lease expires
	later := e.srv.Now().UTC().Format(time.RFC3339)
	before := checkpointVersions(t, e.client, "orders")
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", later)
	if code != 1 || !strings.Contains(errOut, "skips") || !strings.Contains(errOut, "-yes") || !strings.Contains(out, "skips") {
		t.Fatalf("position set forward without -yes: exit %d\n%s%s", code, out, errOut)
	}
	if got := checkpointVersions(t, e.client, "orders"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a refused position set wrote: versions %v → %v", before, got)
	}

	// Back to t0: every partition delivers again from there.
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", t0.Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "delivers") || !strings.Contains(out, "2 partition(s) set to") {
		t.Fatalf("position set -time t0: exit %d\n%s%s", code, out, errOut)
	}
	m1 := startMember(t, cfg, "m1")
	poll.Until(t, 30*time.Second, rcv.deliveredIs(20))
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", t0.Format(time.RFC3339))
	if code != 1 || !strings.Contains(errOut, "live member") || !strings.Contains(errOut, "m1") {
		t.Fatalf("position set while m1 runs: exit %d\n%s%s", code, out, errOut)
	}
	m1.stop(syscall.SIGTERM)
	rcv.mu.Lock()
	for id, n := range rcv.ids {
		if n != 1 {
			t.Errorf("webhook-id %s delivered %d times, want once (the ledger absorbs the replayed changes)", id, n)
		}
	}
	if len(rcv.ids) != 20 {
		t.Errorf("%d distinct deliveries, want 20", len(rcv.ids))
	}
	rcv.mu.Unlock()

	// The oplog rolls past t0: t0 is refused, with the gap.
	for i := range 350 {
		e.insert("roll", bson.D{{Key: "_id", Value: i}})
	}
	before = checkpointVersions(t, e.client, "orders")
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", t0.Format(time.RFC3339))
	if code != 1 || !regexp.MustCompile(`\d+ s before the oldest entry of the oplog`).MatchString(errOut) ||
		!strings.Contains(errOut, "-allow-gap") {
		t.Fatalf("position set to a time the oplog lost: exit %d\n%s%s", code, out, errOut)
	}
	if got := checkpointVersions(t, e.client, "orders"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a refused position set wrote: versions %v → %v", before, got)
	}
}

// TestPositionSetEndsLostHistory: a member failed with lost history
// (on_history_lost: fail) because its checkpoints fell off the oplog (a
// 30 s oplog, and a minute passed while the stream was stopped). ferry
// position show says how much history each partition lost; position set
// refuses the lost time with the gap, and with -allow-gap moves the
// stream to the start of the window: the failed member is asked to
// re-check and runs again without a restart — /readyz back to 200, the
// changes the oplog still holds and new ones delivered.
func TestPositionSetEndsLostHistory(t *testing.T) {
	e := newProcEnv(t, mongotest.OplogMaxAge(30*time.Second))
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	old := startMember(t, cfg, "m0")
	waitStartedIn(t, e, "orders", 2)
	old.stop(syscall.SIGTERM)
	lostFrom := e.srv.Now().UTC().Truncate(time.Second)
	e.srv.AdvanceClock(time.Minute) // no member runs: no lease expires
	for i := range 5 {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	m := startMember(t, cfg, "m1")
	poll.Until(t, 30*time.Second, func() error {
		if code, body := m.get("/readyz"); code != 503 || !strings.Contains(body, "history-lost") {
			return fmt.Errorf("/readyz: %d %s; want 503 saying history-lost", code, body)
		}
		return nil
	})
	code, out, errOut := ferryCmd("position", "show", "-c", cfg)
	if code != 0 || !regexp.MustCompile(`history lost \(\d+ s before the window\)`).MatchString(out) {
		t.Fatalf("position show: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", lostFrom.Format(time.RFC3339))
	if code != 1 || !regexp.MustCompile(`(5\d|6\d) s before the oldest entry of the oplog`).MatchString(errOut) {
		t.Fatalf("position set into lost history: exit %d, want the ~60 s gap\n%s%s", code, out, errOut)
	}
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-time", lostFrom.Format(time.RFC3339), "-allow-gap")
	if code != 0 || !strings.Contains(out, "-allow-gap:") || !strings.Contains(out, "not delivered") ||
		!strings.Contains(out, "1 failed member(s) asked to re-check") {
		t.Fatalf("position set -allow-gap: exit %d\n%s%s", code, out, errOut)
	}
	poll.Until(t, 30*time.Second, func() error {
		if code, body := m.get("/readyz"); code != 200 {
			return fmt.Errorf("/readyz: %d %s; want ready again", code, body)
		}
		return nil
	})
	e.insert("orders", bson.D{{Key: "_id", Value: "after"}})
	// The held changes and the one after the new position.
	poll.Until(t, 30*time.Second, rcv.deliveredIs(6))
}

// TestPositionSetFromDLQAndCheckpoints: -token-from-dlq resumes the
// partition that dead-lettered the event after its token, and the other
// partitions at its cluster time (a token is only valid on the stream that
// returned it); -at-checkpoint-of takes the oldest position of another
// stream's checkpoints. The checkpoints carry the configured definition,
// are running, and their versions moved by one. Unknown and ambiguous ids
// are refused, naming the flag.
func TestPositionSetFromDLQAndCheckpoints(t *testing.T) {
	env := newResetEnv(t, 300*time.Second)
	cfg := env.config(t, "now")
	client := env.client
	ctx := context.Background()
	coll := client.Database("shop").Collection("orders")
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "poison"}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	tok := append(bson.Raw(nil), cs.ResumeToken()...)
	sec, inc := cs.Current.Lookup("clusterTime").Timestamp()
	evTS := bson.Timestamp{T: sec, I: inc}
	raw := append(bson.Raw(nil), cs.Current...)
	cs.Close(ctx)
	dlq := deadletter.NewMongo(client.Database("ferry_state"), "dlq")
	id := ferry.EventID(tok)
	now := time.Now().UTC()
	for _, e := range []deadletter.Entry{
		{Stream: "orders", Partition: 1, EventID: id, Kind: deadletter.KindChange, Operation: "insert", Namespace: "shop.orders",
			Event: raw, ResumeAfter: tok, Error: "HTTP 422", Attempts: 3, FirstAt: now, LastAt: now},
		{Stream: "orders", EventID: "abc1", Kind: deadletter.KindBackfill, Operation: "backfill", Error: "x", FirstAt: now, LastAt: now},
		{Stream: "orders", EventID: "abc2", Kind: deadletter.KindBackfill, Operation: "backfill", Error: "x", FirstAt: now, LastAt: now},
	} {
		if err := dlq.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ id, want string }{
		{"zzz", "-token-from-dlq: stream orders has no dead-letter entry"},
		{"abc", "starts 2 entries' event ids"},
		{"abc1", "a backfill event"},
	} {
		code, out, errOut := ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-token-from-dlq", tc.id)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("-token-from-dlq %s: exit %d, want 1 and %q\n%s%s", tc.id, code, tc.want, out, errOut)
		}
	}
	if v := env.versions(t); fmt.Sprint(v) != "[1 1]" {
		t.Fatalf("refusals wrote: versions %v", v)
	}

	code, out, errOut := ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-token-from-dlq", id[:12])
	if code != 0 || !strings.Contains(out, "after dead-lettered insert") {
		t.Fatalf("-token-from-dlq: exit %d\n%s%s", code, out, errOut)
	}
	list, err := env.cps.List(ctx, "orders")
	if err != nil || len(list) != 2 {
		t.Fatalf("checkpoints %+v, %v", list, err)
	}
	if list[0].Token != nil || list[0].ClusterTime != evTS {
		t.Errorf("partition 0: token %v, cluster time %v; want no token and the event's time %v", list[0].Token, list[0].ClusterTime, evTS)
	}
	if !bytes.Equal(list[1].Token, tok) || list[1].ClusterTime != evTS {
		t.Errorf("partition 1 (the event's): want its token and time %v, got %v", evTS, list[1].ClusterTime)
	}
	for _, cp := range list {
		if cp.Identity == "" || cp.Identity != list[0].Identity || cp.Definition == nil || cp.State != checkpoint.StateRunning || cp.Version != 2 {
			t.Errorf("partition %d: identity %q, state %q, version %d; want the configured definition, running, version 2",
				cp.Partition, cp.Identity, cp.State, cp.Version)
		}
	}

	// Another stream's checkpoints, inside the window: the oldest wins.
	env.srv.AdvanceClock(100 * time.Second)
	base := env.srv.Now()
	for p, ago := range []time.Duration{20 * time.Second, 50 * time.Second} {
		ts := bson.Timestamp{T: uint32(base.Add(-ago).Unix()), I: 1}
		if _, err := env.cps.Save(ctx, checkpoint.Checkpoint{Stream: "legacy", Partition: p, Epoch: 1, Token: hwmToken(t, ts), ClusterTime: ts}); err != nil {
			t.Fatal(err)
		}
	}
	oldest := bson.Timestamp{T: uint32(base.Add(-50 * time.Second).Unix()), I: 1}
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-at-checkpoint-of", "nosuch")
	if code != 1 || !strings.Contains(errOut, "stream nosuch has no checkpoint") {
		t.Errorf("-at-checkpoint-of nosuch: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-at-checkpoint-of", "legacy")
	if code != 1 || !strings.Contains(errOut, "-yes") {
		t.Fatalf("-at-checkpoint-of legacy skips changes: exit %d, want a refusal without -yes\n%s%s", code, out, errOut)
	}
	code, out, errOut = ferryCmd("position", "set", "-c", cfg, "-stream", "orders", "-at-checkpoint-of", "legacy", "-yes")
	if code != 0 {
		t.Fatalf("-at-checkpoint-of legacy -yes: exit %d\n%s%s", code, out, errOut)
	}
	list, _ = env.cps.List(ctx, "orders")
	for _, cp := range list {
		if cp.Token != nil || cp.ClusterTime != oldest || cp.Version != 3 {
			t.Errorf("partition %d: token %v, time %v, version %d; want a start time %v, version 3", cp.Partition, cp.Token != nil, cp.ClusterTime, cp.Version, oldest)
		}
	}
}

// TestPositionSetRefusesAFutureTime: a -time after the source's clock is
// refused, -yes or not, saying how far ahead it is and the latest time it
// can be; nothing is written. (It was accepted with -yes, reporting
// "skips 97058940 s of changes" of a 2.5-minute oplog.)
func TestPositionSetRefusesAFutureTime(t *testing.T) {
	env := newResetEnv(t, 60*time.Second)
	cfgPath := env.config(t, "now")
	before := env.versions(t)
	now := env.srv.Now().UTC().Truncate(time.Second)
	future := now.Add(3 * 365 * 24 * time.Hour)
	for _, yes := range []bool{false, true} {
		args := []string{"position", "set", "-c", cfgPath, "-stream", "orders", "-time", future.Format(time.RFC3339)}
		if yes {
			args = append(args, "-yes")
		}
		code, out, errOut := ferryCmd(args...)
		m := regexp.MustCompile(`ferry position set: -time \S+ is (\d+) days after the source's current time \((\S+), by its clock\): ` +
			`a stream cannot resume from the future\. Choose a time at or before (\S+)\. Nothing was written`).FindStringSubmatch(errOut)
		if code != 1 || m == nil || strings.Contains(out, "skips") {
			t.Fatalf("ferry %s: exit %d:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if m[1] != "1094" && m[1] != "1095" {
			t.Errorf("it says the time is %s days ahead, want 1095 (less the seconds the test took)", m[1])
		}
		if at, err := time.Parse(time.RFC3339, m[2]); err != nil || at.Before(now) || at.After(now.Add(time.Minute)) || m[3] != m[2] {
			t.Errorf("it names the source's time as %s and %s, want %s", m[2], m[3], now.Format(time.RFC3339))
		}
	}
	if after := env.versions(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("checkpoint versions %v → %v: a refusal wrote", before, after)
	}
}

// versions is every partition's checkpoint version of stream orders.
func (e *resetEnv) versions(t *testing.T) []int64 {
	t.Helper()
	list, err := e.cps.List(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	var v []int64
	for _, cp := range list {
		v = append(v, cp.Version)
	}
	return v
}

// TestDaemonReportsOplogHeadroom: a running member exports the oplog
// window of its stream's source and each partition's head-room in it,
// and, under full_document_before_change whenAvailable on a collection
// without pre-images, counts each change delivered without its pre-image.
func TestDaemonReportsOplogHeadroom(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	e.insert("orders", bson.D{{Key: "_id", Value: "o-1"}})
	e.srv.AdvanceClock(time.Minute) // no member runs yet: a window of a minute at least
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      full_document_before_change: whenAvailable", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	for _, op := range []bson.D{{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, {{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}} {
		if _, err := e.client.Database("shop").Collection("orders").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "o-1"}}, op); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := m.metricSum(`ferry_events_without_image_total{image="pre"`); n != 2 {
			return fmt.Errorf("%v updates without a pre-image counted, want 2", n)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		if n := m.metricCount(`ferry_oplog_headroom_seconds{`); n != 2 {
			return fmt.Errorf("head-room for %d partitions, want both", n)
		}
		return nil
	})
	if w := m.metric(`ferry_oplog_window_seconds{stream="orders"}`); w < 60 {
		t.Errorf("ferry_oplog_window_seconds = %v, want at least the minute the clock moved", w)
	}
	for p := range 2 {
		if h := m.metric(fmt.Sprintf(`ferry_oplog_headroom_seconds{partition="%d",stream="orders"}`, p)); h < 60 {
			t.Errorf("partition %d: head-room %v s, want at least 60 (its position is after the minute)", p, h)
		}
	}
	// Every ferry_ metric the member serves is documented.
	doc, err := os.ReadFile("../../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body := m.get("/metrics")
	for _, name := range regexp.MustCompile(`(?m)^# TYPE (ferry_[a-z_]+) `).FindAllStringSubmatch(body, -1) {
		if !strings.Contains(string(doc), "`"+name[1]+"`") {
			t.Errorf("%s is served but not in docs/metrics.md", name[1])
		}
	}
}
