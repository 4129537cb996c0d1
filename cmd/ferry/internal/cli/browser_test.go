package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// The status page tested as an operator sees it: Debian's Chromium,
// headless, driven by chromedp, loading the page of `ferry run` member
// processes against the emulator. .ci/run installs chromium, so this runs
// in CI; elsewhere it is skipped, saying why, only when no browser binary
// exists.

// browserBinary finds a Chromium or Chrome binary: $FERRY_CHROME, then the
// usual names on $PATH.
func browserBinary() string {
	if p := os.Getenv("FERRY_CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless browser for the test (closed at cleanup);
// the returned context runs actions in its one tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	bin := browserBinary()
	if bin == "" {
		t.Skip("no browser binary: neither $FERRY_CHROME nor chromium, chromium-browser, google-chrome or chrome on $PATH " +
			"(.ci/run installs Debian's chromium: apt-get install -y chromium)")
	}
	// The flags the machine's notes say work: no sandbox as root, and no
	// background networking (the machine has no network beyond loopback).
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser (with no timeout of its own:
	// a timeout on it would end the browser).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// pageView is what the status page shows, read from its DOM.
type pageView struct {
	Generation int                   `json:"generation"`
	Error      string                `json:"error"`
	Overflow   bool                  `json:"overflow"` // wider than the viewport
	Title      string                `json:"title"`
	Streams    map[string]streamView `json:"streams"`
}

type streamView struct {
	State     string   `json:"state"`
	Reason    string   `json:"reason"`
	Command   string   `json:"command"`
	Owners    []string `json:"owners"`
	Members   []string `json:"members"`
	Lagging   []bool   `json:"lagging"`
	States    []string `json:"states"`
	DLQ       string   `json:"dlq"`
	DLQGrowth bool     `json:"dlqGrowing"`
	Text      string   `json:"text"`
}

const probeJS = `(() => {
  const out = {generation: Number(document.body.dataset.generation || 0),
    error: document.getElementById("error").textContent,
    overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
    title: document.title,
    streams: {}};
  document.querySelectorAll("section.stream").forEach(s => {
    const q = sel => s.querySelector(sel);
    out.streams[s.dataset.stream] = {
      state: s.dataset.state,
      reason: q(".reason") ? q(".reason").textContent : "",
      command: q("pre.command") ? q("pre.command").textContent : "",
      owners: [...s.querySelectorAll("tr[data-partition] td[data-field=owner]")].map(td => td.textContent),
      members: [...s.querySelectorAll("li[data-member]")].map(li => li.dataset.member),
      lagging: [...s.querySelectorAll("tr[data-partition]")].map(tr => tr.dataset.lagging === "true"),
      states: [...s.querySelectorAll("tr[data-partition] td[data-field=state]")].map(td => td.textContent),
      dlq: q(".dlq b") ? q(".dlq b").textContent : "",
      dlqGrowing: q(".dlq") ? q(".dlq").dataset.growing === "true" : false,
      text: s.innerText,
    };
  });
  return out;
})()`

func probe(t *testing.T, ctx context.Context) pageView {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[pageView](probeJS))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return v
}

// waitPage polls the page until cond holds (within d) and returns what it
// showed then, and when.
func waitPage(t *testing.T, ctx context.Context, d time.Duration, what string, cond func(pageView) bool) (pageView, time.Time) {
	t.Helper()
	var v pageView
	poll.Until(t, d, func() error {
		if v = probe(t, ctx); !cond(v) {
			return fmt.Errorf("the page did not show %s; it shows: %+v", what, v)
		}
		return nil
	})
	return v, time.Now()
}

func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(cctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

// pageRefresh is the page's default refresh interval (status.html).
const pageRefresh = 3 * time.Second

// TestStatusPageInBrowser: two member processes run orders (2 partitions)
// and audit (1); the page served by m1 shows both running with one orders
// partition per member; a poison document makes the orders DLQ show as
// growing. audit is then failed by the server
// (ChangeStreamFatalError on getMore): the page shows it failed, with its
// reason and recovery command, within one refresh of /status saying so.
// m2 is then SIGKILLed: the page shows its partition owned by m1 after
// the takeover. Screenshots (desktop and phone width) are saved in the
// test's artifact directory (go test -artifacts keeps them).
func TestStatusPageInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, twoStreamsYAML(e.srv.URI(), rcv.url(), "", ""))
	m1 := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	waitStartedIn(t, e, "audit", 1)
	m2 := startMember(t, cfg, "m2")
	base := "http://" + m1.addr() + "/"
	m2.addr()

	nav, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := chromedp.Do(nav, chromedp.Navigate(base)); err != nil {
		t.Fatalf("load %s: %v", base, err)
	}
	cancel()
	v, _ := waitPage(t, ctx, 30*time.Second, "orders running with a partition on each member", func(v pageView) bool {
		o, a := v.Streams["orders"], v.Streams["audit"]
		return o.State == "running" && a.State == "running" && len(o.Owners) == 2 &&
			(o.Owners[0] == "m1" && o.Owners[1] == "m2" || o.Owners[0] == "m2" && o.Owners[1] == "m1")
	})
	if v.Error != "" || v.Overflow {
		t.Errorf("page error %q, wider than the window: %v", v.Error, v.Overflow)
	}
	for i := range 3 {
		e.insert("orders", bson.D{{Key: "_id", Value: "o-" + string(rune('a'+i))}})
	}
	poll.Until(t, 20*time.Second, rcv.deliveredIs(3))

	// A poison document: the DLQ grows, and the page says so.
	rcv.setStatus(func(doc string) int {
		if doc == "poison" {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	e.insert("orders", bson.D{{Key: "_id", Value: "poison"}})
	waitPage(t, ctx, 20*time.Second, "the orders DLQ growing", func(v pageView) bool {
		o := v.Streams["orders"]
		return o.DLQ == "1" && o.DLQGrowth && o.State == "running"
	})

	// The receiver goes down (503 to everything): orders waits for its
	// sink, and the page says so, with the receiver's answer; then it is
	// back, and orders runs again.
	rcv.setStatus(func(string) int { return http.StatusServiceUnavailable })
	for _, id := range []string{"o-outage-1", "o-outage-2", "o-outage-3", "o-outage-4"} {
		e.insert("orders", bson.D{{Key: "_id", Value: id}})
	}
	v, _ = waitPage(t, ctx, 30*time.Second, "orders waiting for its sink", func(v pageView) bool {
		o := v.Streams["orders"]
		return o.State == "waiting-for-sink" && strings.Contains(o.Reason, "503") && slices.Contains(o.States, "waiting-for-sink")
	})
	if !strings.HasPrefix(v.Title, "SINK DOWN") || v.Streams["audit"].State != "running" {
		t.Errorf("during the outage: title %q, audit %q", v.Title, v.Streams["audit"].State)
	}
	screenshot(t, ctx, "status-sink-down.png")
	rcv.setStatus(func(doc string) int {
		if doc == "poison" {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	poll.Until(t, 30*time.Second, rcv.deliveredIs(7))
	waitPage(t, ctx, 20*time.Second, "orders running after the outage", func(v pageView) bool {
		o := v.Streams["orders"]
		return o.State == "running" && o.Reason == "" && len(o.States) == 2 && o.States[0] == "running" && o.States[1] == "running"
	})

	// audit fails: first on one member, whose release hands the partition
	// to the other, which fails too: then no live member runs it.
	failPoint(t, e, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 280},
		{Key: "namespace", Value: "shop.audit"}})
	var failedAt time.Time
	poll.Until(t, 30*time.Second, func() error {
		code, body := getBody(t, base+"status")
		if code != http.StatusOK {
			return fmt.Errorf("/status: %d", code)
		}
		if a := findStream(decodeStatus(t, body), "audit"); a == nil || a.State != "failed" {
			return fmt.Errorf("/status does not say audit failed:\n%s", body)
		}
		failedAt = time.Now()
		return nil
	})
	v, shownAt := waitPage(t, ctx, pageRefresh+2*time.Second, "audit failed with its reason", func(v pageView) bool {
		a := v.Streams["audit"]
		return a.State == "failed" && strings.HasPrefix(a.Reason, "server-error: ") && a.Command == "ferry validate -c "+cfg
	})
	t.Logf("audit failed: shown %v after /status said so (refresh %v)", shownAt.Sub(failedAt).Round(time.Millisecond), pageRefresh)
	if d := shownAt.Sub(failedAt); d > pageRefresh+time.Second {
		t.Errorf("the page showed the failure %v after /status, more than one refresh (%v)", d, pageRefresh)
	}
	if a := v.Streams["audit"]; !strings.Contains(a.Text, "What to do:") || len(a.Members) != 0 {
		t.Errorf("audit panel: members %v, text:\n%s", a.Members, a.Text)
	}
	if o := v.Streams["orders"]; o.State != "running" {
		t.Errorf("orders is %q while audit failed", o.State)
	}
	screenshot(t, ctx, "status-failed.png")

	// m2 dies: its orders partition is m1's after the takeover.
	killedAt := time.Now()
	_ = m2.cmd.Process.Signal(syscall.SIGKILL)
	<-m2.done
	v, movedAt := waitPage(t, ctx, 20*time.Second, "every orders partition owned by m1", func(v pageView) bool {
		o := v.Streams["orders"]
		return len(o.Owners) == 2 && o.Owners[0] == "m1" && o.Owners[1] == "m1" && len(o.Members) == 1 && o.Members[0] == "m1"
	})
	t.Logf("after SIGKILL of m2 the page showed m1 owning both partitions after %v (lease_ttl 2s, refresh %v)",
		movedAt.Sub(killedAt).Round(time.Millisecond), pageRefresh)
	e.insert("orders", bson.D{{Key: "_id", Value: "o-after-kill"}})
	poll.Until(t, 20*time.Second, rcv.deliveredIs(8)) // a delivery after the takeover
	screenshot(t, ctx, "status-after-kill.png")

	// A phone's width: nothing wider than the screen.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	gen := probe(t, ctx).Generation
	v, _ = waitPage(t, ctx, pageRefresh+2*time.Second, "a refresh at phone width", func(v pageView) bool { return v.Generation > gen })
	if v.Overflow {
		t.Errorf("at 390 px the page is wider than the screen")
	}
	screenshot(t, ctx, "status-phone.png")
	_ = m1
}

// TestStatusPageEscapes serves the page with a status document whose
// strings are markup and script: the browser shows them as text, runs
// none of it, and the page's CSP forbids every other origin.
func TestStatusPageEscapes(t *testing.T) {
	ctx := newBrowser(t)
	evil := `<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>`
	doc := `{"schema":"ferry.status/v1","generated_at":"2026-11-02T10:15:04Z","state_store":"mongodb","ledger_entries":3,
"streams":[{"name":"o<b>x</b>","state":"failed","reason":"` + evil + `","delivery":"idempotent","sink":"webhook","partition_count":1,
"definition":{"configured":"ab","checkpoints":[],"matches":true},
"members":[{"id":"` + evil + `","joined_at":"2026-11-02T10:00:00Z","heartbeat_at":"2026-11-02T10:15:00Z","heartbeat_age_seconds":4,"partitions":[0]}],
"partitions":[{"partition":0,"owner":"` + evil + `","epoch":1,"lease_expires_at":null,"checkpoint_at":null,"checkpoint_age_seconds":null,
"lag_seconds":45,"lagging":true,"state":"running","note":"","last_error":"` + evil + `"}],
"failures":[],"dlq":{"size":3,"recent":2,"newest_at":"2026-11-02T10:14:00Z"},
"recovery":{"command":"` + evil + `","advice":"a","recheck":"b"}}]}`
	mux := http.NewServeMux()
	mux.Handle("/{$}", statusPage())
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(doc))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	nav, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(nav, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	v, _ := waitPage(t, ctx, 10*time.Second, "the document", func(v pageView) bool { return v.Generation >= 1 })
	s, ok := v.Streams["o<b>x</b>"]
	if !ok {
		t.Fatalf("the stream's name was not kept as text: %+v", v)
	}
	want := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
	if s.Reason != want || s.Command != want || len(s.Owners) != 1 || s.Owners[0] != want || len(s.Members) != 1 || s.Members[0] != want {
		t.Errorf("markup not shown as text: %+v", s)
	}
	if !s.Lagging[0] || !s.DLQGrowth || s.State != "failed" {
		t.Errorf("highlights: lagging %v, dlq growing %v, state %q", s.Lagging, s.DLQGrowth, s.State)
	}
	n, err := chromedp.Run(nav, chromedp.Evaluate[int](`(window.__pwned || 0) + document.querySelectorAll("#streams img, #streams script").length +
		[...document.querySelectorAll("#streams b")].filter(b => b.textContent === "x").length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the page ran or built markup from the document (%d)", n)
	}
	screenshot(t, ctx, "status-escaped.png")
}

// snapshotView is a partition's snapshot as the status page shows it.
type snapshotView struct {
	Stream      string  `json:"stream"`
	Partition   int     `json:"partition"`
	State       string  `json:"state"`
	Bar         bool    `json:"bar"`
	Determinate bool    `json:"determinate"`
	Value       float64 `json:"value"`
	Max         float64 `json:"max"`
	Width       float64 `json:"width"`
	Label       string  `json:"label"`
	ValueText   string  `json:"valueText"`
	Text        string  `json:"text"`
	Summary     string  `json:"summary"`
	Failing     string  `json:"failing"` // the failing chunk's line ("": none)
}

const snapshotProbeJS = `(() => [...document.querySelectorAll("section.stream [data-snapshot-state]")].map(d => {
  const bar = d.querySelector("progress"), text = d.querySelector(".snap-text");
  return {stream: d.closest("section.stream").dataset.stream, partition: Number(d.dataset.partition), state: d.dataset.snapshotState,
    bar: !!bar, determinate: !!bar && bar.hasAttribute("value"), value: bar ? bar.value : -1, max: bar ? bar.max : -1,
    width: bar ? bar.getBoundingClientRect().width : 0,
    label: bar ? bar.getAttribute("aria-label") || "" : "", valueText: bar ? bar.getAttribute("aria-valuetext") || "" : "",
    text: text ? text.textContent : d.textContent, summary: document.getElementById("summary").textContent,
    failing: (d.querySelector(".snap-fail") || {textContent: ""}).textContent};
}))()`

// waitSnapshotView polls the page until its first snapshot satisfies cond.
func waitSnapshotView(t *testing.T, ctx context.Context, d time.Duration, what string, cond func(snapshotView) bool) snapshotView {
	t.Helper()
	var got snapshotView
	poll.Until(t, d, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		views, err := chromedp.Run(cctx, chromedp.Evaluate[[]snapshotView](snapshotProbeJS))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if len(views) != 1 || !cond(views[0]) {
			return fmt.Errorf("the page does not show %s; its snapshots: %+v", what, views)
		}
		got = views[0]
		return nil
	})
	return got
}

// TestStatusPageSnapshotInBrowser: a `ferry run` member snapshots 2500
// documents (start_at: backfill, one partition), its sink taking the
// first chunk and refusing the next: the page it serves shows a progress
// bar at 1000 of 2500 (40%), with the documents, rate and ETA as text and
// for screen readers; once the sink takes the rest but the source refuses
// the next chunk's read, a line under the bar says so; once it reads again,
// the bar gives way to the finished snapshot's line. Screenshots in the artifact directory.
func TestStatusPageSnapshotInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	s := startStalledSnapshot(t)
	base := "http://" + s.m.addr() + "/"
	nav, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := chromedp.Do(nav, chromedp.Navigate(base)); err != nil {
		t.Fatalf("load %s: %v", base, err)
	}
	cancel()
	text := regexp.MustCompile(`^40% — 1,000 / 2,500 documents, [0-9,.]+/s, ETA [0-9.]+ (ms|s)$`)
	v := waitSnapshotView(t, ctx, 30*time.Second, "a running snapshot's bar", func(v snapshotView) bool { return v.State == "running" })
	if v.Stream != "catalog" || v.Partition != 0 || !v.Bar || !v.Determinate || v.Value != 1000 || v.Max != snapDocs || v.Width < 100 {
		t.Errorf("the bar: %+v, want a visible <progress> at 1000 of %d", v, snapDocs)
	}
	if !text.MatchString(v.Text) || v.ValueText != v.Text || v.Label != "snapshot of partition 0" {
		t.Errorf("the bar's text %q (for screen readers %q, label %q), want %s", v.Text, v.ValueText, v.Label, text)
	}
	if !strings.Contains(v.Summary, ", 1 snapshot(s) running") {
		t.Errorf("the header does not count the running snapshot: %q", v.Summary)
	}
	t.Logf("running: %s", v.Text)
	screenshot(t, ctx, "status-snapshot-running.png")
	// At a phone's width the bar fits the screen.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	gen := probe(t, ctx).Generation
	if pv, _ := waitPage(t, ctx, pageRefresh+2*time.Second, "a refresh at phone width", func(v pageView) bool { return v.Generation > gen }); pv.Overflow {
		t.Errorf("at 390 px the page with a snapshot is wider than the screen")
	}
	if v := waitSnapshotView(t, ctx, time.Second, "the bar at phone width", func(v snapshotView) bool { return v.Bar }); v.Width < 200 || v.Width > 390 {
		t.Errorf("at 390 px the bar is %v px wide", v.Width)
	}
	screenshot(t, ctx, "status-snapshot-phone.png")

	// The source refuses the next chunk's read (the second was read before
	// the sink refused it, and finishes now): the bar stays, with the
	// failing chunk's tries and error below it.
	failPoint(t, s.e, bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 8000},
		{Key: "namespace", Value: "shop.catalog"}})
	s.release()
	failing := regexp.MustCompile(`^its next chunk failed [0-9]+ times?, retrying: .*8000`)
	v = waitSnapshotView(t, ctx, 30*time.Second, "a failing chunk", func(v snapshotView) bool { return v.Failing != "" })
	if !failing.MatchString(v.Failing) || !v.Bar || v.Value != 2*snapChunk || strings.Contains(v.Text, "ETA") {
		t.Errorf("a failing chunk: %+v, want the bar at %d (the chunk read before the refusals), no ETA, and a line matching %s", v, 2*snapChunk, failing)
	}
	t.Logf("failing: %s", v.Failing)
	screenshot(t, ctx, "status-snapshot-failing.png")
	if err := s.e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err(); err != nil {
		t.Fatal(err)
	}
	v = waitSnapshotView(t, ctx, 60*time.Second, "the snapshot finished", func(v snapshotView) bool { return v.State == "finished" })
	if v.Bar || !regexp.MustCompile(`^partition 0: last snapshot \(start\) finished [0-9.]+ (ms|s) ago: 2,500 documents$`).MatchString(v.Text) ||
		strings.Contains(v.Summary, "snapshot(s) running") {
		t.Errorf("finished: %+v", v)
	}
	t.Logf("finished: %s", v.Text)
	screenshot(t, ctx, "status-snapshot-finished.png")
}
