package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// slowReceiver answers each POST after delay, unless the request is
// cancelled first (ferry's drain cancelling it): then it is in flight, not
// acknowledged. It records which event ids it acknowledged and which were
// cut off.
type slowReceiver struct {
	srv       *httptest.Server
	mu        sync.Mutex
	delay     time.Duration
	acked     map[string]int // webhook-id → 2xx answers
	cutOff    map[string]int // webhook-id → requests cancelled before the answer
	requested map[string]int // webhook-id → requests received
}

func newSlowReceiver(t *testing.T, delay time.Duration) *slowReceiver {
	r := &slowReceiver{delay: delay, acked: map[string]int{}, cutOff: map[string]int{}, requested: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.requested[id]++
		d := r.delay
		r.mu.Unlock()
		// The receiver's work: it takes d, and ends with the answer unless
		// the client gave up first.
		select {
		case <-time.After(d):
		case <-req.Context().Done():
			r.mu.Lock()
			r.cutOff[id]++
			r.mu.Unlock()
			return
		}
		r.mu.Lock()
		r.acked[id]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// snapshot returns copies of the three maps and clears them.
func (r *slowReceiver) snapshot() (acked, cutOff, requested map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acked, cutOff, requested = r.acked, r.cutOff, r.requested
	r.acked, r.cutOff, r.requested = map[string]int{}, map[string]int{}, map[string]int{}
	return
}

func (r *slowReceiver) setDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

func (r *slowReceiver) ackedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked)
}

// TestDrainKeepsAcknowledgedDeliveries: a member stopped by SIGTERM while
// a slow receiver works through a full queue, in idempotent mode, is
// restarted; the restarted member re-sends only the requests the drain cut
// off, never one the receiver had acknowledged. Before, the ledger write
// after each batch used the handler's context, which the drain had
// cancelled: it failed, so every event acknowledged in the last batch
// window was neither recorded nor checkpointed, and all were sent again.
func TestDrainKeepsAcknowledgedDeliveries(t *testing.T) {
	e := newProcEnv(t)
	rcv := newSlowReceiver(t, 1500*time.Millisecond)
	// One partition, a drain of 1 s (shutdown.drain_timeout), shorter than
	// a request (1.5 s), so the requests in flight at SIGTERM are cut off. The
	// webhook timeout (5 s) leaves room in a batch's handler_timeout (30 s)
	// for several requests, so a lane's batch holds acknowledged events
	// when the drain cuts its request off.
	cfg := writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
shutdown: {drain_timeout: 1s}
state: {uri: %q}
streams:
  - name: orders
    source: {uri: %q, scope: {collection: shop.orders}}
    group: {partitions: 1, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: idempotent}
    sink: {webhook: {url: %q, secret: %q, timeout: 5s}}
`, e.srv.URI(), e.srv.URI(), rcv.srv.URL+"/hook", procSecret))
	a := startMember(t, cfg, "a")
	poll.Until(t, 30*time.Second, a.metricIs(`ferry_partitions_owned{stream="orders"}`, 1))
	const docs = 300
	for i := range docs {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%03d", i)}})
	}
	// Some batches acknowledged, the queue still full behind them.
	poll.Until(t, 60*time.Second, func() error {
		if n := rcv.ackedCount(); n < 24 {
			return fmt.Errorf("%d deliveries acknowledged, waiting for 24", n)
		}
		return nil
	})
	a.stop(syscall.SIGTERM)
	acked1, cutOff1, _ := rcv.snapshot()
	if len(cutOff1) == 0 {
		t.Fatalf("no request was in flight at SIGTERM (acknowledged %d): the test proves nothing", len(acked1))
	}

	rcv.setDelay(0)
	b := startMember(t, cfg, "b")
	poll.Until(t, 90*time.Second, func() error {
		r := rcv.ackedCount()
		if r+len(acked1) < docs {
			return fmt.Errorf("%d + %d of %d documents acknowledged", len(acked1), r, docs)
		}
		return nil
	})
	_, _, requested2 := rcv.snapshot()
	var resent, resentCutOff []string
	for id := range requested2 {
		if acked1[id] > 0 {
			resent = append(resent, id[:16])
		}
		if cutOff1[id] > 0 {
			resentCutOff = append(resentCutOff, id[:16])
		}
	}
	sort.Strings(resent)
	t.Logf("before SIGTERM: %d acknowledged, %d cut off in flight; after the restart: %d of the acknowledged re-sent, %d of the %d cut off re-sent",
		len(acked1), len(cutOff1), len(resent), len(resentCutOff), len(cutOff1))
	if len(resent) > 0 {
		t.Errorf("the restarted member re-sent %d of the %d deliveries acknowledged before SIGTERM (%v): the drain lost their ledger entries", len(resent), len(acked1), resent)
	}
	if len(resentCutOff) != len(cutOff1) {
		t.Errorf("%d of the %d requests cut off by the drain were re-sent; want all", len(resentCutOff), len(cutOff1))
	}
	b.stop(syscall.SIGTERM)
}
