package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// The tests in this file run `ferry run` as operators do: each member is
// its own process (this test binary re-executed as the ferry command, see
// TestMain), against the emulator, sent real signals; the tests read
// /readyz, /metrics, `ferry status` and the logs.

// member is one `ferry run` process.
type member struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	errOut syncBuffer
	done   chan struct{}
	err    error
}

// startMember runs `ferry run -c cfg` as a process with FERRY_MEMBER_ID
// set to name (configurations here use member_id: ${FERRY_MEMBER_ID}).
// The test's cleanup kills it if the test did not stop it.
func startMember(t *testing.T, cfg, name string) *member {
	t.Helper()
	m := &member{t: t, name: name, done: make(chan struct{})}
	m.cmd = exec.Command(os.Args[0], "run", "-c", cfg)
	m.cmd.Env = append(os.Environ(), childEnv+"=1", "FERRY_MEMBER_ID="+name)
	m.cmd.Stdout, m.cmd.Stderr = io.Discard, &m.errOut
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.err = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("--- %s's log (last 4000 bytes):\n%s", m.name, tail(m.errOut.String(), 4000))
		}
	})
	return m
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// addr waits until the member serves its ops port and returns the address.
func (m *member) addr() string {
	m.t.Helper()
	var addr string
	poll.Until(m.t, 30*time.Second, func() error {
		select {
		case <-m.done:
			m.t.Fatalf("%s exited: %v\n%s", m.name, m.err, m.errOut.String())
		default:
		}
		x := listening.FindStringSubmatch(m.errOut.String())
		if x == nil {
			return fmt.Errorf("%s does not log that it listens", m.name)
		}
		addr = x[1]
		return nil
	})
	return addr
}

// stop sends sig and waits for the process to exit (within 15 s).
func (m *member) stop(sig syscall.Signal) {
	m.t.Helper()
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		_ = m.cmd.Process.Signal(syscall.SIGQUIT)
		<-m.done
		m.t.Fatalf("%s did not exit within 15 s of %v:\n%s", m.name, sig, tail(m.errOut.String(), 8000))
	}
}

// logLines returns the member's log lines so far.
func (m *member) logLines() []string {
	s := strings.TrimSpace(m.errOut.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// get fetches path from the member's ops port.
func (m *member) get(path string) (int, string) {
	m.t.Helper()
	resp, err := http.Get("http://" + m.addr() + path)
	if err != nil {
		m.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric returns the value of the first /metrics sample whose line starts
// with prefix (name and labels), or -1.
func (m *member) metric(prefix string) float64 {
	_, body := m.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscan(strings.TrimSpace(line[len(prefix):]), &v); err == nil {
				return v
			}
		}
	}
	return -1
}

// metricSum sums the /metrics samples whose line starts with prefix
// (a name and the start of its labels).
func (m *member) metricSum(prefix string) float64 {
	var sum float64
	for _, v := range m.samples(prefix) {
		sum += v
	}
	return sum
}

// metricCount counts the /metrics samples whose line starts with prefix.
func (m *member) metricCount(prefix string) int { return len(m.samples(prefix)) }

func (m *member) samples(prefix string) []float64 {
	_, body := m.get("/metrics")
	var out []float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var v float64
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// procEnv is one test's emulator and state.
type procEnv struct {
	t      *testing.T
	srv    *mongotest.Server
	client *mongo.Client
}

func newProcEnv(t *testing.T, opts ...mongotest.Option) *procEnv {
	t.Helper()
	srv, client := emulator(t, opts...)
	return &procEnv{t: t, srv: srv, client: client}
}

// epochs returns the sum of the stream's lease epochs: each new tenure of
// a partition adds one.
func (e *procEnv) epochs(stream string) int64 {
	e.t.Helper()
	cur, err := e.client.Database("ferry").Collection("leases").Find(context.Background(), bson.D{{Key: "group", Value: stream}})
	if err != nil {
		e.t.Fatal(err)
	}
	var docs []struct {
		Epoch int64 `bson:"epoch"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for _, d := range docs {
		n += d.Epoch
	}
	return n
}

func (e *procEnv) insert(coll string, docs ...bson.D) {
	e.t.Helper()
	for _, d := range docs {
		if _, err := e.client.Database("shop").Collection(coll).InsertOne(context.Background(), d); err != nil {
			e.t.Fatal(err)
		}
	}
}

// procSecret signs the test webhooks.
const procSecret = "whsec_cHJvYy10ZXN0LXNlY3JldC1wcm9jLXRlc3Qtc2VjcmV0"

// streamYAML is a one-stream configuration: webhook sink to url,
// idempotent, 2 partitions, lease_ttl 2s unless extra overrides keys in
// the stream mapping (extra is YAML lines indented for the stream).
func streamYAML(uri, name, url, source, extra string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
state: {uri: %q}
streams:
  - name: %s
    source:
      uri: %q
      scope: {collection: shop.orders}
%s
    group: {partitions: 2, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: idempotent}
%s
    sink: {webhook: {url: %q, secret: %q}}
`, uri, name, uri, source, extra, url, procSecret)
}

// receiver is a webhook receiver that records each delivery's arrival and
// answers with what status decides (200 by default).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status func(docID string) int
	first  map[string]time.Time // document _id → first 2xx arrival (inserts)
	ids    map[string]int       // webhook-id → 2xx deliveries
	tries  int
}

var docIDPattern = regexp.MustCompile(`"documentKey":\{"_id":"([^"]+)"`)

func newReceiver(t *testing.T) *receiver {
	r := &receiver{first: map[string]time.Time{}, ids: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		doc := ""
		if m := docIDPattern.FindSubmatch(body); m != nil {
			doc = string(m[1])
		}
		r.mu.Lock()
		r.tries++
		code := 200
		if r.status != nil {
			code = r.status(doc)
		}
		if code < 300 {
			r.ids[req.Header.Get("webhook-id")]++
			if _, ok := r.first[doc]; !ok {
				r.first[doc] = time.Now()
			}
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) setStatus(f func(docID string) int) {
	r.mu.Lock()
	r.status = f
	r.mu.Unlock()
}

// delivered returns how many distinct documents were delivered.
func (r *receiver) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.first)
}

func (r *receiver) arrival(doc string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.first[doc]
	return at, ok
}

func (r *receiver) attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries
}

// deliveredIs is a poll.Until condition: exactly n documents delivered.
func (r *receiver) deliveredIs(n int) func() error {
	return func() error {
		if got := r.delivered(); got != n {
			return fmt.Errorf("%d documents delivered, want %d", got, n)
		}
		return nil
	}
}

// deliveredAtLeast is a poll.Until condition: n documents or more
// delivered.
func (r *receiver) deliveredAtLeast(n int) func() error {
	return func() error {
		if got := r.delivered(); got < n {
			return fmt.Errorf("%d documents delivered, want %d", got, n)
		}
		return nil
	}
}

// metricIs is a poll.Until condition: the member's first /metrics sample
// starting with prefix has the value v.
func (m *member) metricIs(prefix string, v float64) func() error {
	return func() error {
		if got := m.metric(prefix); got != v {
			return fmt.Errorf("%s: %s = %v, want %v", m.name, prefix, got, v)
		}
		return nil
	}
}
