package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestOperatorSurfaceShowsNoSecrets runs a member with credentials
// everywhere they can be (the webhook URL's user info and query, an
// Authorization header, the signing secret, the OTLP exporter's headers),
// documents holding a password, deliveries that fail (a retry, a dead
// letter) and a stream the server fails; then the status page (its HTML
// and, in the browser, what it shows), /status and every span the
// collector received hold none of those values, no resume token and no
// document body.
func TestOperatorSurfaceShowsNoSecrets(t *testing.T) {
	const (
		urlPassword = "pw-hook-7731"
		queryToken  = "tok-query-5521"
		bearer      = "bearer-9931"
		otlpToken   = "otlp-secret-4411"
		docPassword = "doc-pass-8812"
	)
	e := newProcEnv(t)
	otlp := newOTLPReceiver(t)
	hook := newHookReceiver(t)
	tries := map[string]int{}
	hook.fail = func(doc string) int {
		tries[doc]++
		switch {
		case doc == "poison":
			return http.StatusBadRequest
		case doc == "flaky" && tries[doc] == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer "+otlpToken)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	hookURL := strings.Replace(hook.srv.URL, "http://", "http://hookuser:"+urlPassword+"@", 1) + "/hook?token=" + queryToken
	cfg := writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: debug}
state: {uri: %[1]q}
streams:
  - name: orders
    source: {uri: %[1]q, scope: {collection: shop.orders}}
    group: {partitions: 1, lease_ttl: 2s, member_id: m1}
    delivery: {mode: idempotent}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 50ms}
    sink:
      webhook: {url: %[2]q, secret: %[3]q, headers: {Authorization: "Bearer %[4]s"}}
  - name: audit
    source: {uri: %[1]q, scope: {collection: shop.audit}}
    group: {partitions: 1, lease_ttl: 2s, member_id: m1}
    sink: {webhook: {url: %[2]q, secret: %[3]q}}
`, e.srv.URI(), hookURL, procSecret, bearer))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 1)
	waitStartedIn(t, e, "audit", 1)
	failPoint(t, e, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 280},
		{Key: "namespace", Value: "shop.audit"}})
	for _, id := range []string{"a", "flaky", "poison", "b"} {
		e.insert("orders", bson.D{{Key: "_id", Value: id}, {Key: "password", Value: docPassword}, {Key: "card", Value: "4242-4242"}})
	}
	base := "http://" + m.addr() + "/"
	var status string
	poll.Until(t, 30*time.Second, func() error {
		code, body := getBody(t, base+"status")
		if code != http.StatusOK {
			return fmt.Errorf("/status: %d", code)
		}
		doc := decodeStatus(t, body)
		o, a := findStream(doc, "orders"), findStream(doc, "audit")
		status = string(body)
		if len(hook.deliveries()) != 3 || o.DLQ.Size == nil || *o.DLQ.Size != 1 || a.State != "failed" {
			return fmt.Errorf("%d deliveries, orders DLQ size %v, audit %s; want 3, 1 and failed", len(hook.deliveries()), o.DLQ.Size, a.State)
		}
		return nil
	})
	_, page := getBody(t, base)
	shown := ""
	if browserBinary() != "" {
		ctx := newBrowser(t)
		nav, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := chromedp.Do(nav, chromedp.Navigate(base)); err != nil {
			t.Fatal(err)
		}
		cancel()
		v, _ := waitPage(t, ctx, 10*time.Second, "both streams", func(v pageView) bool {
			return v.Streams["audit"].State == "failed" && v.Streams["orders"].DLQ == "1"
		})
		for _, s := range v.Streams {
			shown += s.Text + "\n"
		}
	} else {
		t.Log("no browser binary: checking the page's HTML and /status only")
	}
	m.stop(syscall.SIGTERM) // flushes the spans
	var spans strings.Builder
	for _, s := range otlp.all() {
		spans.WriteString(s.text + "\n")
	}
	if !strings.Contains(spans.String(), "dead-lettered") || !strings.Contains(spans.String(), "retried") {
		t.Fatalf("the collector did not get the failed deliveries' spans:\n%s", spans.String())
	}

	forbidden := []string{urlPassword, queryToken, bearer, otlpToken, docPassword, "4242-4242", "password",
		procSecret, strings.TrimPrefix(procSecret, "whsec_")[:16], "hookuser"}
	// Every resume token the state store holds, whole or in part.
	cur, err := e.client.Database("ferry").Collection("checkpoints").Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var cps []struct {
		Token bson.RawValue `bson:"token"`
	}
	if err := cur.All(context.Background(), &cps); err != nil {
		t.Fatal(err)
	}
	var tokens int
	for _, cp := range cps {
		doc, ok := cp.Token.DocumentOK()
		if _, data, isBin := cp.Token.BinaryOK(); isBin {
			doc, ok = bson.Raw(data), true // the store keeps the token's bytes whole
		}
		if !ok {
			continue
		}
		if data, ok := doc.Lookup("_data").StringValueOK(); ok && len(data) > 24 {
			forbidden = append(forbidden, data, data[:24])
			tokens++
		}
	}
	if tokens < 2 {
		t.Fatalf("%d resume tokens found in %d checkpoints", tokens, len(cps))
	}
	for what, text := range map[string]string{"the page's HTML": string(page), "the page as shown": shown, "/status": status, "the spans": spans.String()} {
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				t.Errorf("%s holds %q", what, f)
			}
		}
	}
	if !strings.Contains(status, `"recovery"`) || !strings.Contains(status, "server-error") {
		t.Errorf("/status lacks the failure it should show:\n%s", status)
	}
}
