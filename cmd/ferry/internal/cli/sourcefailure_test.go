package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestSourceCredentialsRefusedIsAFailedStream, as the operator met it:
// one stream of two has a source URI whose credentials MongoDB refuses.
// Before, ferry status and the page showed it "stopped (no live member)"
// with no reason, /readyz said "prepare the state store", and /healthz
// answered 503 because that client's ping failed, so a liveness probe
// restarted every stream. Now the stream is failed with its reason
// (unauthorized: AuthenticationFailed) and what to do, in ferry status,
// /status and /readyz (503, naming it); the other stream runs; /healthz,
// which is about the process, answers 200; the password is never shown.
func TestSourceCredentialsRefusedIsAFailedStream(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	badURI := strings.Replace(e.srv.URI(), "mongodb://", "mongodb://bob:s3cret-pw@", 1)
	cfg := writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
state: {uri: %[1]q}
streams:
  - name: orders
    source: {uri: %[1]q, scope: {collection: shop.orders}}
    group: {partitions: 2, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    sink: {webhook: {url: %[3]q, secret: %[4]q}}
  - name: audit
    source: {uri: %[2]q, scope: {collection: shop.audit}}
    group: {partitions: 1, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    sink: {webhook: {url: %[3]q, secret: %[4]q}}
`, e.srv.URI(), badURI, rcv.url(), procSecret))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)

	var out string
	poll.Until(t, 30*time.Second, func() error {
		code, o, errOut := ferryCmd("status", "-c", cfg)
		out = o
		if code != 0 || !strings.Contains(o, "stream audit: failed") {
			return fmt.Errorf("ferry status: exit %d, want audit failed:\n%s%s", code, o, errOut)
		}
		return nil
	})
	t.Logf("ferry status:\n%s", out)
	for _, want := range []string{"stream orders: running", "unauthorized", "AuthenticationFailed", "what to do:", "source.uri"} {
		if !strings.Contains(out, want) {
			t.Errorf("ferry status does not say %q:\n%s", want, out)
		}
	}
	code, ready := m.get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(ready, "stream audit: failed") || !strings.Contains(ready, "AuthenticationFailed") ||
		strings.Contains(ready, "prepare the state store") {
		t.Errorf("/readyz: %d %s; want 503 naming audit's failure", code, ready)
	}
	if code, body := m.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s; want 200: it is about the process, not one stream's source", code, body)
	}
	code, body := m.get("/status")
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if s := findStream(&doc, "audit"); s == nil || s.State != "failed" || !strings.Contains(s.Reason, "unauthorized") || s.Recovery == nil {
		t.Errorf("/status: audit = %+v; want failed, unauthorized, with a recovery", s)
	}
	if s := findStream(&doc, "orders"); s == nil || s.State != "running" {
		t.Errorf("/status: orders = %+v; want running", s)
	}
	for what, text := range map[string]string{"ferry status": out, "/readyz": ready, "/status": body, "the log": m.errOut.String()} {
		if strings.Contains(text, "s3cret-pw") {
			t.Errorf("%s shows the source's password", what)
		}
	}
}
