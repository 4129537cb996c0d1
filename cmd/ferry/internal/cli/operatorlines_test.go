package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// The tests in this file check what an operator reads from `ferry run`'s
// log, /readyz and `ferry status`, with members as processes.

// waitFailed waits until the member's /readyz says the stream failed with
// class.
func waitFailed(t *testing.T, m *member, class string) string {
	t.Helper()
	var body string
	poll.Until(t, 30*time.Second, func() error {
		var code int
		if code, body = m.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, class) {
			return fmt.Errorf("/readyz: %d %s; want 503 naming %s", code, body, class)
		}
		return nil
	})
	return body
}

// failedLine returns the member's "stream failed: its leases are released"
// log line.
func failedLine(t *testing.T, m *member) string {
	t.Helper()
	for _, l := range m.logLines() {
		if strings.Contains(l, `"msg":"stream failed: its leases are released`) {
			return l
		}
	}
	t.Fatalf("%s logged no failure line:\n%s", m.name, tail(m.errOut.String(), 4000))
	return ""
}

// TestFailureLinesInTheConfigurationsTerms: what a failed stream says
// names the configuration file in the commands it advises (`-c <path>`,
// not `-c <file>`), shows no "partition -1" when no partition failed (a
// start position that cannot be resolved), and shows a changed definition
// as values (partitions was 2, is now 4), not canonical Extended JSON
// ({"$numberInt":"2"}).
func TestFailureLinesInTheConfigurationsTerms(t *testing.T) {
	t.Run("start position", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t)
		rcv := newReceiver(t)
		cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "      start_at: {checkpoints_of: nosuch}", ""))
		m := startMember(t, cfg, "m1")
		readyz := waitFailed(t, m, "start-position")
		if want := "`ferry status -c " + cfg + "`"; !strings.Contains(readyz, want) {
			t.Errorf("/readyz does not advise %s:\n%s", want, readyz)
		}
		line := failedLine(t, m)
		if strings.Contains(line, `"partition":-1`) {
			t.Errorf("the failure line names partition -1:\n%s", line)
		}
		code, out, errOut := runCLI("status", "-c", cfg)
		if code != 0 || !strings.Contains(out, "(start-position)") || strings.Contains(out, "partition -1") ||
			!strings.Contains(out, "ferry status -c "+cfg) || strings.Contains(out, "<file>") {
			t.Errorf("ferry status: exit %d:\n%s%s", code, out, errOut)
		}
		m.stop(syscall.SIGTERM)
	})
	t.Run("changed partitions", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t)
		rcv := newReceiver(t)
		old := startMember(t, writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", "")), "m0")
		waitStartedIn(t, e, "orders", 2)
		old.stop(syscall.SIGTERM)
		cfg := writeFile(t, strings.Replace(streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""), "partitions: 2", "partitions: 4", 1))
		m := startMember(t, cfg, "m1")
		readyz := waitFailed(t, m, "identity-changed")
		for _, text := range []string{readyz, failedLine(t, m)} {
			if !strings.Contains(text, "partitions was 2, is now 4") || strings.Contains(text, "$numberInt") {
				t.Errorf("the failure does not say partitions was 2, is now 4:\n%s", text)
			}
		}
		if want := "`ferry reset -c " + cfg + " -stream orders`"; !strings.Contains(readyz, want) || strings.Contains(readyz, "<file>") {
			t.Errorf("/readyz does not advise %s:\n%s", want, readyz)
		}
		m.stop(syscall.SIGTERM)
	})
}

// TestStoppedStreamPartitionsAreStopped: once every member stopped, `ferry
// status` shows the stream's partitions as stopped, not running.
func TestStoppedStreamPartitionsAreStopped(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	var doc statusDoc
	statusJSON := func() {
		t.Helper()
		code, out, errOut := runCLI("status", "-c", cfg, "-json")
		if code != 0 {
			t.Fatalf("ferry status -json: exit %d: %s", code, errOut)
		}
		doc = statusDoc{}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
	}
	statusJSON()
	if o := doc.Streams[0]; o.State != "running" || o.Partitions[0].State != "running" || o.Partitions[1].State != "running" {
		t.Fatalf("while m1 runs: stream %s, partitions %+v", o.State, o.Partitions)
	}
	m.stop(syscall.SIGTERM)
	statusJSON()
	o := doc.Streams[0]
	if o.State != "stopped" || len(o.Partitions) != 2 || o.Partitions[0].State != "stopped" || o.Partitions[1].State != "stopped" {
		t.Errorf("after m1 stopped: stream %s, partitions %+v; want every partition stopped", o.State, o.Partitions)
	}
	code, out, errOut := runCLI("status", "-c", cfg)
	if code != 0 || strings.Contains(out, "running") || strings.Count(out, "stopped") != 3 {
		t.Errorf("ferry status after m1 stopped: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestDrainTimeoutLogsADuration: a delivery that outlasts the drain
// timeout on SIGTERM is cancelled, and the log line says the timeout as a
// duration ("1s"), not as nanoseconds (1000000000).
func TestDrainTimeoutLogsADuration(t *testing.T) {
	e := newProcEnv(t)
	arrived := make(chan struct{}, 16)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client going away
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done() // never answers: the drain times out
	}))
	defer hang.Close()
	cfg := writeFile(t, "shutdown: {drain_timeout: 1s}\n"+streamYAML(e.srv.URI(), "orders", hang.URL+"/hook", "", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	e.insert("orders", bson.D{{Key: "_id", Value: "o-1"}})
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery arrived")
	}
	m.stop(syscall.SIGTERM)
	var line string
	for _, l := range m.logLines() {
		if strings.Contains(l, `"msg":"drain timeout`) {
			line = l
		}
	}
	// shutdown.drain_timeout: 1s.
	if !strings.Contains(line, `"timeout":"1s"`) {
		t.Errorf("drain timeout line = %q, want \"timeout\":\"1s\"", line)
	}
}
