package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// TestFatalStopsAreAStateNotALoop: each fatal condition puts the stream
// into the failed state and keeps it there: /readyz answers 503 with the
// reason, `ferry status` says failed, a handful of log lines in the
// observation window, and no lease is taken again (the epochs stop). On
// the daemon before the failed state, each of these spun: 225 restarts/s
// for a ChangeStreamFatalError on getMore, 1,086 lease acquisitions in 7 s
// for a pipeline modifying _id, ~400/s for lost history.
func TestFatalStopsAreAStateNotALoop(t *testing.T) {
	cases := []struct {
		name, class string
		opts        []mongotest.Option
		// setup prepares the failure; start starts the member(s) whose
		// failure is observed.
		run func(t *testing.T, e *procEnv, rcv *receiver) *member
	}{
		{name: "pipeline modifies _id", class: "id-modified", run: func(t *testing.T, e *procEnv, rcv *receiver) *member {
			cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      pipeline: [{$project: {_id: 0}}]", ""))
			m := startMember(t, cfg, "m1")
			waitStartedIn(t, e, "orders", 2)
			e.insert("orders", bson.D{{Key: "_id", Value: "o-1"}}, bson.D{{Key: "_id", Value: "o-2"}})
			return m
		}},
		{name: "ChangeStreamFatalError on getMore", class: "server-error", run: func(t *testing.T, e *procEnv, rcv *receiver) *member {
			cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
			m := startMember(t, cfg, "m1")
			waitStartedIn(t, e, "orders", 2)
			failPoint(t, e, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 280},
				{Key: "namespace", Value: "shop.orders"}})
			return m
		}},
		{name: "changed pipeline", class: "identity-changed", run: func(t *testing.T, e *procEnv, rcv *receiver) *member {
			old := startMember(t, writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", "")), "m0")
			waitStartedIn(t, e, "orders", 2)
			old.stop(syscall.SIGTERM)
			cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      pipeline: [{$match: {operationType: insert}}]", ""))
			return startMember(t, cfg, "m1")
		}},
		{name: "required pre-image missing", class: "image-missing", run: func(t *testing.T, e *procEnv, rcv *receiver) *member {
			e.insert("orders", bson.D{{Key: "_id", Value: "o-1"}})
			cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      full_document_before_change: required", ""))
			m := startMember(t, cfg, "m1")
			waitStartedIn(t, e, "orders", 2)
			// The collection records no pre-images: the update has none.
			if _, err := e.client.Database("shop").Collection("orders").UpdateOne(context.Background(),
				bson.D{{Key: "_id", Value: "o-1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{name: "history lost under on_history_lost fail", class: "history-lost", opts: []mongotest.Option{mongotest.OplogMaxEntries(40)},
			run: func(t *testing.T, e *procEnv, rcv *receiver) *member {
				cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
				old := startMember(t, cfg, "m0")
				waitStartedIn(t, e, "orders", 2)
				old.stop(syscall.SIGTERM)
				for i := range 100 {
					e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
				}
				return startMember(t, cfg, "m1")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newProcEnv(t, tc.opts...)
			rcv := newReceiver(t)
			m := tc.run(t, e, rcv)
			poll.Until(t, 30*time.Second, func() error {
				if code, body := m.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "failed since") || !strings.Contains(body, tc.class) {
					return fmt.Errorf("/readyz: %d %s; want 503 saying failed since, %s", code, body, tc.class)
				}
				return nil
			})
			epochs, lines := e.epochs("orders"), len(m.logLines())
			// The observation window: long enough for hundreds of restarts
			// before the fix; ended by the state store's clock-free
			// evidence that the failed loop ran on (its record was
			// refreshed: every 2 s here).
			first := failureUpdatedAt(t, e, "orders")
			poll.Until(t, 20*time.Second, func() error {
				if d := failureUpdatedAt(t, e, "orders").Sub(first); d < 3*time.Second {
					return fmt.Errorf("the failure record was refreshed %v after its first write, want 3s (twice)", d)
				}
				return nil
			})
			code, body := m.get("/readyz")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "what to do") {
				t.Fatalf("/readyz after the window: %d %s", code, body)
			}
			if tc.class == "image-missing" && !strings.Contains(body, "changeStreamPreAndPostImages: {enabled: true}") {
				t.Errorf("/readyz does not say how to enable pre-images:\n%s", body)
			}
			if goAPIName.MatchString(body) || strings.Contains(body, "StartAt(") || strings.Contains(body, "OnHistoryLost(") {
				t.Errorf("/readyz names the Go API instead of YAML keys and ferry commands:\n%s", body)
			}
			if got := e.epochs("orders"); got != epochs {
				t.Errorf("lease epochs grew from %d to %d while failed", epochs, got)
			}
			if n := len(m.logLines()) - lines; n > 3 {
				t.Errorf("%d log lines while failed, want at most a handful:\n%s", n, strings.Join(m.logLines()[lines:], "\n"))
			}
			if v := m.metric(`ferry_stream_state{state="failed",stream="orders"}`); v != 1 {
				t.Errorf("ferry_stream_state{state=failed} = %v, want 1", v)
			}
			var st, stErr bytes.Buffer
			if code := run(context.Background(), []string{"status", "-c", m.cmd.Args[3]}, &st, &stErr); code != 0 {
				t.Fatalf("status: exit %d: %s", code, stErr.String())
			}
			if !strings.Contains(st.String(), "stream orders: failed") || !strings.Contains(st.String(), "failed since") ||
				!strings.Contains(st.String(), tc.class) || !strings.Contains(st.String(), "what to do:") {
				t.Errorf("ferry status does not say the stream failed and why:\n%s", st.String())
			}
			m.stop(syscall.SIGTERM)
			if m.err != nil {
				t.Errorf("a failed member exits cleanly on SIGTERM, got %v", m.err)
			}
		})
	}
}

// goAPIName is a name of package ferry's Go API (ferry.StartAt, …), not a
// file such as ferry.yaml.
var goAPIName = regexp.MustCompile(`\bferry\.[A-Z]`)

// startTwoMembers starts members a and b of the orders stream (two
// partitions) from cfg and waits until each owns one and both partitions
// recorded a position.
func startTwoMembers(t *testing.T, e *procEnv, cfg string) (a, b *member) {
	t.Helper()
	a, b = startMember(t, cfg, "a"), startMember(t, cfg, "b")
	waitStartedIn(t, e, "orders", 2)
	poll.Until(t, 30*time.Second, func() error {
		if na, nb := a.metric(`ferry_partitions_owned{stream="orders"}`), b.metric(`ferry_partitions_owned{stream="orders"}`); na != 1 || nb != 1 {
			return fmt.Errorf("partitions owned: a %v, b %v; want one each", na, nb)
		}
		return nil
	})
	return a, b
}

// waitStartedIn waits until n partitions of stream recorded a position.
func waitStartedIn(t *testing.T, e *procEnv, stream string, n int64) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		c, _ := e.client.Database("ferry").Collection("checkpoints").CountDocuments(context.Background(),
			bson.D{{Key: "stream", Value: stream}, {Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if c < n {
			return fmt.Errorf("%d of %d partitions of %s recorded a position", c, n, stream)
		}
		return nil
	})
}

func failPoint(t *testing.T, e *procEnv, data bson.D) {
	t.Helper()
	err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: data}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.client.Database("admin").RunCommand(context.Background(), bson.D{
			{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
	})
}

// failureUpdatedAt is when the stream's (first) failure record was last
// refreshed, by the server's clock (zero: none).
func failureUpdatedAt(t *testing.T, e *procEnv, stream string) time.Time {
	t.Helper()
	var rec struct {
		UpdatedAt time.Time `bson:"updatedAt"`
	}
	err := e.client.Database("ferry").Collection("failures").FindOne(context.Background(), bson.D{{Key: "stream", Value: stream}}).Decode(&rec)
	if err != nil {
		return time.Time{}
	}
	return rec.UpdatedAt
}

// writer inserts documents "<prefix>-<n>" every interval until stopped,
// recording when each insert was sent.
type writer struct {
	mu   sync.Mutex
	sent map[string]time.Time
	stop chan struct{}
	done chan struct{}
}

func startWriter(t *testing.T, e *procEnv, prefix string, every time.Duration, limit int) *writer {
	w := &writer{sent: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; limit == 0 || i < limit; i++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("%s-%04d", prefix, i)
			at := time.Now()
			if _, err := e.client.Database("shop").Collection("orders").InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}}); err != nil {
				t.Errorf("insert %s: %v", id, err)
				return
			}
			w.mu.Lock()
			w.sent[id] = at
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.halt)
	return w
}

// halt stops the writer and waits for it.
func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *writer) written() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.sent))
	for k, v := range w.sent {
		out[k] = v
	}
	return out
}

// wroteAtLeast is a poll.Until condition: n inserts or more sent.
func (w *writer) wroteAtLeast(n int) func() error {
	return func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.sent) < n {
			return fmt.Errorf("%d inserts written, want %d", len(w.sent), n)
		}
		return nil
	}
}

// TestCrashTakeoverWithinLeaseTTL: with lease_ttl 2s, a member SIGKILLed
// while documents are written: nothing is lost, and every document
// written after the kill arrives within 3.5 s of its insert (before, the
// fixed 10 s member timeout made it about 8 s whatever lease_ttl said).
func TestCrashTakeoverWithinLeaseTTL(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	a, b := startTwoMembers(t, e, cfg)
	w := startWriter(t, e, "o", 20*time.Millisecond, 0)
	poll.Until(t, 10*time.Second, rcv.deliveredAtLeast(20))
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	killed := time.Now()
	poll.Until(t, 20*time.Second, b.metricIs(`ferry_partitions_owned{stream="orders"}`, 2))
	time.Sleep(time.Second) // a second of writes under the new owner (the window observed, not synchronisation)
	w.halt()
	sent := w.written()
	poll.Until(t, 20*time.Second, rcv.deliveredAtLeast(len(sent)))
	var worst time.Duration
	var worstDoc string
	for id, at := range sent {
		got, ok := rcv.arrival(id)
		if !ok {
			t.Fatalf("document %s was never delivered", id)
		}
		if at.After(killed.Add(-100*time.Millisecond)) && got.Sub(at) > worst {
			worst, worstDoc = got.Sub(at), id
		}
	}
	t.Logf("%d documents, SIGKILL of a, worst delay after the kill %v (%s)", len(sent), worst.Round(time.Millisecond), worstDoc)
	if worst > 3500*time.Millisecond {
		t.Fatalf("worst delivery delay after the kill %v (document %s), want at most 3.5 s with lease_ttl 2s", worst, worstDoc)
	}
}

// TestReceiverOutageDeadLettersNothing: the receiver answers 503 for 20 s
// while 100 documents are written; afterwards all 100 are delivered and
// the DLQ is empty (before, 100 of 100 were dead-lettered). During the
// outage the member stays ready, shows the sink down and the lag growing.
func TestReceiverOutageDeadLettersNothing(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	rcv.setStatus(func(string) int { return http.StatusServiceUnavailable })
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	outage := time.Now()
	w := startWriter(t, e, "o", 100*time.Millisecond, 100)
	<-w.done
	poll.Until(t, 15*time.Second, func() error {
		if up0, up1 := m.metric(`ferry_sink_up{partition="0",stream="orders"}`), m.metric(`ferry_sink_up{partition="1",stream="orders"}`); up0 != 0 && up1 != 0 {
			return fmt.Errorf("ferry_sink_up: partition 0 %v, partition 1 %v; want the sink shown down", up0, up1)
		}
		return nil
	})
	if code, body := m.get("/readyz"); code != 200 {
		t.Fatalf("/readyz during a sink outage: %d %s; want ready (restarting ferry does not fix a receiver)", code, body)
	}
	if v := m.metric(`ferry_stream_state{state="waiting-for-sink",stream="orders"}`); v != 1 {
		t.Errorf("ferry_stream_state{state=waiting-for-sink} = %v, want 1", v)
	}
	lag1 := max(m.metric(`ferry_lag_seconds{partition="0",stream="orders"}`), m.metric(`ferry_lag_seconds{partition="1",stream="orders"}`))
	time.Sleep(time.Until(outage.Add(20 * time.Second))) // the outage lasts 20 s: the scenario, not synchronisation
	lag2 := max(m.metric(`ferry_lag_seconds{partition="0",stream="orders"}`), m.metric(`ferry_lag_seconds{partition="1",stream="orders"}`))
	if !(lag2 > lag1 && lag2 > 5) {
		t.Errorf("lag during the outage went from %v to %v, want it growing", lag1, lag2)
	}
	tries := rcv.attempts()
	rcv.setStatus(nil)
	poll.Until(t, 60*time.Second, rcv.deliveredIs(100)) // all, after the outage
	n, err := e.client.Database("ferry").Collection("dlq").CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d events dead-lettered by a 20 s outage, want 0", n)
	}
	t.Logf("outage: %d attempts refused in 20 s; all 100 delivered after it, DLQ empty", tries)
	poll.Until(t, 10*time.Second, m.metricIs(`ferry_stream_state{state="running",stream="orders"}`, 1)) // the sink up again
}

// TestPoisonStillGoesToTheDLQ: a document the receiver always refuses
// (500) while it accepts the others is poison: after max_attempts counted
// attempts it is dead-lettered, with the HTTP status in `ferry dlq list`,
// and the others flow.
func TestPoisonStillGoesToTheDLQ(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	rcv.setStatus(func(doc string) int {
		if doc == "poison" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", "    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 200ms}"))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	e.insert("orders", bson.D{{Key: "_id", Value: "poison"}})
	w := startWriter(t, e, "o", 20*time.Millisecond, 0)
	poll.Until(t, 30*time.Second, func() error {
		if n, _ := e.client.Database("ferry").Collection("dlq").CountDocuments(context.Background(), bson.D{}); n != 1 {
			return fmt.Errorf("%d dead letters, want the poison document's", n)
		}
		return nil
	})
	w.halt()
	sent := w.written()
	poll.Until(t, 20*time.Second, rcv.deliveredAtLeast(len(sent))) // the others
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"dlq", "list", "-c", cfg}, &out, &errOut); code != 0 {
		t.Fatalf("dlq list: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"poison"`) || !strings.Contains(out.String(), "500") {
		t.Fatalf("dlq list does not show the poison document and the HTTP status:\n%s", out.String())
	}
	m.stop(syscall.SIGTERM)
}

// TestDefinitionChangeLosesNothing: a stream moves to a new definition (a
// new pipeline and partition count, so a new name starting at the old
// one's checkpoints) while documents are written throughout: before the
// move, while no member runs, and after. Every document is delivered;
// whatever the old definition had delivered already is absorbed by the
// ledger. (Before, the only ways out were a new name starting "now", or
// `ferry reset` with start_at now: both silently skip the changes made
// while nothing ran; this test fails with start_at: now.)
func TestDefinitionChangeLosesNothing(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	v1 := startMember(t, writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      pipeline: [{$match: {operationType: insert}}]", "")), "v1")
	waitStartedIn(t, e, "orders", 2)
	w := startWriter(t, e, "o", 10*time.Millisecond, 0)
	poll.Until(t, 10*time.Second, rcv.deliveredAtLeast(30)) // v1 delivers
	v1.stop(syscall.SIGTERM)
	before := len(w.written())
	poll.Until(t, 10*time.Second, w.wroteAtLeast(before+30)) // while no member runs
	cfg2 := writeFile(t, strings.Replace(streamYAML(e.srv.URI(), "orders-v2", rcv.url(),
		"      pipeline: [{$match: {operationType: {$in: [insert, replace]}}}]\n      start_at: {checkpoints_of: orders}", ""),
		"partitions: 2", "partitions: 3", 1))
	v2 := startMember(t, cfg2, "v2")
	waitStartedIn(t, e, "orders-v2", 3)
	n := len(w.written())
	poll.Until(t, 10*time.Second, w.wroteAtLeast(n+30)) // under v2
	w.halt()
	sent := w.written()
	poll.Until(t, 30*time.Second, rcv.deliveredAtLeast(len(sent)))
	lost := 0
	for id := range sent {
		if _, ok := rcv.arrival(id); !ok {
			lost++
		}
	}
	dups := v2.metric(`ferry_ledger_duplicates_total{stream="orders-v2"}`)
	t.Logf("%d documents written across the move (%d while no member ran); lost %d; already delivered by the old definition, absorbed by the ledger: %v",
		len(sent), n-before, lost, dups)
	if lost != 0 {
		t.Fatalf("%d of %d documents lost across the definition change", lost, len(sent))
	}
}
