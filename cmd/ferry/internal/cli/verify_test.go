package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// TestVerify: after a transactional run into the mongodb projection, ferry
// verify finds every change applied and the projection equal to the
// source (exit 0). With two ledger entries deleted it reports exactly
// missing=2 and lists them; with one projection document edited, stale=1
// (exit 1 both times).
func TestVerify(t *testing.T) {
	e := newProjectionEnv(t, "", "")
	daemon := startRun(t, e.cfgPath)
	daemon.waitStarted(t, e.client, "ferry_state", 2)
	ctx := context.Background()
	// The window starts with the writes (the emulator's oplog starts with
	// it: a window reaching further back cannot be read).
	raw, err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	opT, _ := raw.Lookup("operationTime").Timestamp()
	from := time.Unix(int64(opT), 0).UTC().Format(time.RFC3339)
	for i := range 20 {
		if _, err := e.src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.src.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 33}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.src.DeleteOne(ctx, bson.D{{Key: "_id", Value: 4}}); err != nil {
		t.Fatal(err)
	}
	ledgerColl := e.client.Database("ferry_state").Collection("ledger")
	poll.Until(t, 30*time.Second, func() error {
		daemon.alive(t)
		n, _ := ledgerColl.CountDocuments(ctx, bson.D{})
		live, _ := e.proj.CountDocuments(ctx, mongoproj.Live())
		if n != 22 || live != 19 {
			return fmt.Errorf("%d ledger entries and %d live documents, want 22 and 19", n, live)
		}
		return nil
	})
	daemon.stop(t) // final checkpoints: nothing pending
	verifyRun := func() (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"verify", "-c", e.cfgPath, "-stream", "orders", "-from", from}, &out, &errOut)
		if errOut.Len() > 0 {
			t.Logf("verify stderr: %s", errOut.String())
		}
		return code, out.String()
	}
	code, out := verifyRun()
	if code != 0 || !strings.Contains(out, "verify: events=22 applied=22 dead-lettered=0 pending=0 missing=0") ||
		!strings.Contains(out, "projection: source=19 target=19 missing=0 extra=0 stale=0") {
		t.Fatalf("verify after a clean run: exit %d\n%s", code, out)
	}

	// Two ledger entries deleted: exactly two changes count as missing.
	var gone []string
	cur, err := ledgerColl.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) && len(gone) < 2 {
		gone = append(gone, cur.Current.Lookup("event").StringValue())
	}
	cur.Close(ctx)
	for _, id := range gone {
		if _, err := ledgerColl.DeleteOne(ctx, bson.D{{Key: "event", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	// And one projection document edited behind Ferry's back.
	if _, err := e.proj.UpdateOne(ctx, bson.D{{Key: "_id", Value: 7}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: -1}}}}); err != nil {
		t.Fatal(err)
	}
	code, out = verifyRun()
	if code != 1 || !strings.Contains(out, "applied=20 dead-lettered=0 pending=0 missing=2") {
		t.Fatalf("verify with two ledger entries deleted: exit %d\n%s", code, out)
	}
	listed := regexp.MustCompile(`(?m)^missing: ([0-9a-f]{16}) `).FindAllStringSubmatch(out, -1)
	if len(listed) != 2 {
		t.Fatalf("want the 2 missing events listed:\n%s", out)
	}
	for _, l := range listed {
		if !strings.HasPrefix(gone[0], l[1]) && !strings.HasPrefix(gone[1], l[1]) {
			t.Fatalf("listed %s, which is not one of the deleted entries %v", l[1], gone)
		}
	}
	if !strings.Contains(out, "stale=1") || !strings.Contains(out, `projection stale: {"_id":7}`) {
		t.Fatalf("verify does not report the edited projection document:\n%s", out)
	}
}

// TestDaemonVerifies: with verify.interval set, ferry run verifies the
// stream periodically and exports the missing count: 0 after a clean run,
// 1 once a ledger entry is deleted.
func TestDaemonVerifies(t *testing.T) {
	every := 100 * time.Millisecond
	verifierTestHook.Store(&every)
	t.Cleanup(func() { verifierTestHook.Store(nil) })
	e := newProjectionEnv(t, "verify: {interval: 1m, window: 1m}", "")
	daemon := startRun(t, e.cfgPath)
	daemon.waitStarted(t, e.client, "ferry_state", 2)
	ctx := context.Background()
	for i := range 10 {
		if _, err := e.src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	addr := daemon.addr(t)
	metric := func(name string) string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{stream="orders"\} (\S+)$`).FindStringSubmatch(string(body))
		if m == nil {
			return ""
		}
		return m[1]
	}
	ledgerColl := e.client.Database("ferry_state").Collection("ledger")
	poll.Until(t, 30*time.Second, func() error {
		daemon.alive(t)
		n, _ := ledgerColl.CountDocuments(ctx, bson.D{})
		if missing, last := metric("ferry_verify_missing"), metric("ferry_verify_last_run_timestamp"); n != 10 || missing != "0" || last == "0" {
			return fmt.Errorf("%d ledger entries, ferry_verify_missing %q, ferry_verify_last_run_timestamp %q; want 10, 0 and a run", n, missing, last)
		}
		return nil
	})
	if _, err := ledgerColl.DeleteOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		daemon.alive(t)
		if missing := metric("ferry_verify_missing"); missing != "1" {
			return fmt.Errorf("ferry_verify_missing = %q, want 1", missing)
		}
		return nil
	})
	if !strings.Contains(daemon.errOut.String(), `"msg":"verify found missing changes"`) {
		t.Fatalf("no warning logged:\n%s", daemon.errOut.String())
	}
}

// TestDaemonVerifierChecksNothing: the daemon's periodic verify, once the
// oplog no longer holds any change of the stream it applied in the window
// (writes to another collection rolled it), logs "verify checked
// nothing" with the reason, and ferry_verify_last_run_timestamp stays
// where the last run that checked something left it.
func TestDaemonVerifierChecksNothing(t *testing.T) {
	every := 100 * time.Millisecond
	verifierTestHook.Store(&every)
	t.Cleanup(func() { verifierTestHook.Store(nil) })
	e := newProjectionEnv(t, "verify: {interval: 1m, window: 1h}", "", mongotest.OplogMaxEntries(300))
	daemon := startRun(t, e.cfgPath)
	daemon.waitStarted(t, e.client, "ferry_state", 2)
	ctx := context.Background()
	for i := range 10 {
		if _, err := e.src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	addr := daemon.addr(t)
	metric := func(name string) string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{stream="orders"\} (\S+)$`).FindStringSubmatch(string(body))
		if m == nil {
			return ""
		}
		return m[1]
	}
	ledgerColl := e.client.Database("ferry_state").Collection("ledger")
	poll.Until(t, 30*time.Second, func() error {
		daemon.alive(t)
		n, _ := ledgerColl.CountDocuments(ctx, bson.D{})
		if missing, last := metric("ferry_verify_missing"), metric("ferry_verify_last_run_timestamp"); n != 10 || missing != "0" || last == "0" {
			return fmt.Errorf("%d ledger entries, ferry_verify_missing %q, ferry_verify_last_run_timestamp %q; want 10, 0 and a run", n, missing, last)
		}
		return nil
	})
	docs := make([]any, 400)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := e.client.Database("shop").Collection("other").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	const line = `"msg":"verify checked nothing"`
	checkedNothing := func(n int) func() error {
		return func() error {
			daemon.alive(t)
			if got := strings.Count(daemon.errOut.String(), line); got < n {
				return fmt.Errorf("%d runs logged %s, want %d", got, line, n)
			}
			return nil
		}
	}
	poll.Until(t, 30*time.Second, checkedNothing(1))
	last := metric("ferry_verify_last_run_timestamp")
	seen := strings.Count(daemon.errOut.String(), line)
	poll.Until(t, 30*time.Second, checkedNothing(seen+1))
	if now := metric("ferry_verify_last_run_timestamp"); now != last {
		t.Fatalf("ferry_verify_last_run_timestamp moved from %s to %s between two runs that checked nothing", last, now)
	}
	if log := daemon.errOut.String(); !strings.Contains(log, "10 ledger entries applied in it") || !strings.Contains(log, "nothing was checked") {
		t.Fatalf("the log does not say why:\n%s", tail(log, 4000))
	}
}
