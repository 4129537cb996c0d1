package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// A snapshot seen by an operator: `ferry run` with start_at: backfill over
// snapDocs documents, one partition, chunks of ferry.DefaultSnapshotChunk.
// The receiver takes the first chunk and answers 503 to everything after
// it, so the snapshot stands still at 1000 of 2500 documents (40%, one
// chunk) until the test releases it.
const (
	snapDocs  = 2500
	snapChunk = ferry.DefaultSnapshotChunk
)

type stalledSnapshot struct {
	e   *procEnv
	rcv *receiver
	m   *member
	cfg string
}

func snapshotYAML(uri, url string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
state: {uri: %[1]q}
streams:
  - name: catalog
    source: {uri: %[1]q, scope: {collection: shop.catalog}, start_at: backfill}
    group: {partitions: 1, lease_ttl: 2s, member_id: "${FERRY_MEMBER_ID:-}"}
    delivery: {mode: idempotent}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 50ms}
    sink: {webhook: {url: %[2]q, secret: %[3]q}}
`, uri, url, procSecret)
}

// startStalledSnapshot starts the member and waits until /status shows the
// snapshot standing at its first chunk, the second refused by the sink.
func startStalledSnapshot(t *testing.T) *stalledSnapshot {
	t.Helper()
	s := &stalledSnapshot{e: newProcEnv(t), rcv: newReceiver(t)}
	docs := make([]any, snapDocs)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("c-%04d", i)}, {Key: "v", Value: i}}
	}
	if _, err := s.e.client.Database("shop").Collection("catalog").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	// The first chunk is the first snapChunk requests (a snapshot row's
	// body is the document, one request each; nothing else is written):
	// the next chunk is read only once every one of them is delivered.
	var mu sync.Mutex
	requests := 0
	s.rcv.setStatus(func(string) int {
		mu.Lock()
		defer mu.Unlock()
		if requests++; requests <= snapChunk {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	s.cfg = writeFile(t, snapshotYAML(s.e.srv.URI(), s.rcv.url()))
	s.m = startMember(t, s.cfg, "m1")
	poll.Until(t, 60*time.Second, func() error {
		sn := s.snapshot(t)
		if sn == nil || sn.DocumentsDone != snapChunk || s.rcv.attempts() <= snapChunk {
			return fmt.Errorf("/status does not show the snapshot at its first chunk with the next refused (%d attempts): %+v", s.rcv.attempts(), sn)
		}
		return nil
	})
	return s
}

// release lets the sink take everything: the snapshot finishes.
func (s *stalledSnapshot) release() {
	s.rcv.setStatus(func(string) int { return http.StatusOK })
}

// status reads the member's /status (decoded strictly) and its body.
func (s *stalledSnapshot) status(t *testing.T) (*statusDoc, []byte) {
	t.Helper()
	code, body := getBody(t, "http://"+s.m.addr()+"/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d %s", code, body)
	}
	return decodeStatus(t, body), body
}

// snapshot is catalog's partition 0 snapshot as /status shows it.
func (s *stalledSnapshot) snapshot(t *testing.T) *snapshotProgressDoc {
	t.Helper()
	doc, _ := s.status(t)
	c := findStream(doc, "catalog")
	if c == nil || len(c.Partitions) != 1 {
		return nil
	}
	return c.Partitions[0].Snapshot
}

// TestStatusShowsSnapshotProgress: while a snapshot runs, /status (its
// snapshot object, every field as docs/status.md documents it), `ferry
// status` and /metrics show its progress: 1000 of 2500 documents, 40%, one
// chunk, a rate and an ETA; once it finished, /status and `ferry status`
// say when and how many documents, and the metrics count 2500 delivered
// in 3 chunks.
func TestStatusShowsSnapshotProgress(t *testing.T) {
	s := startStalledSnapshot(t)
	doc, body := s.status(t)
	sn := findStream(doc, "catalog").Partitions[0].Snapshot
	if sn.State != "running" || sn.Reason != ferry.SnapshotForStart || sn.Request != "" || sn.Filtered ||
		sn.Namespace != "shop.catalog" || (sn.Mode != ferry.SnapshotByID && sn.Mode != ferry.SnapshotByHashedIndex) ||
		sn.DocumentsDone != 1000 || sn.DocumentsEstimated == nil || *sn.DocumentsEstimated != snapDocs ||
		sn.Percent == nil || *sn.Percent != 40 || sn.ChunksDone != 1 ||
		sn.DocumentsPerSecond == nil || *sn.DocumentsPerSecond <= 0 || sn.ETASeconds == nil || *sn.ETASeconds <= 0 ||
		sn.FinishedAt != nil || time.Since(sn.StartedAt) > time.Minute || sn.ID == "" {
		t.Errorf("running snapshot in /status:\n%s", body)
	}
	// The snapshot object's fields are the ones docs/status.md lists.
	var generic struct {
		Streams []struct {
			Partitions []struct {
				Snapshot map[string]any `json:"snapshot"`
			} `json:"partitions"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	var served []string
	for k := range generic.Streams[0].Partitions[0].Snapshot {
		served = append(served, k)
	}
	sort.Strings(served)
	if documented := documentedSnapshotFields(t); !slices.Equal(served, documented) {
		t.Errorf("the snapshot object serves %v; docs/status.md documents %v", served, documented)
	}
	// ETA: the documents left at the rate.
	if want := float64(snapDocs-1000) / *sn.DocumentsPerSecond; *sn.ETASeconds < want*0.99-0.01 || *sn.ETASeconds > want*1.01+0.01 {
		t.Errorf("eta_seconds %v, want (2500-1000)/%v = %v", *sn.ETASeconds, *sn.DocumentsPerSecond, want)
	}

	code, out, errOut := runCLI("status", "-c", s.cfg)
	if code != 0 {
		t.Fatalf("ferry status: exit %d: %s", code, errOut)
	}
	line := regexp.MustCompile(`(?m)^  partition 0: snapshot running \(start\): 40% — 1,000 / 2,500 documents, [0-9,.]+/s, ETA \S+, 1 chunk done, reading shop\.catalog \((id-order|hashed-index)\)$`)
	if !line.MatchString(out) {
		t.Errorf("ferry status does not show the running snapshot's line:\n%s", out)
	}
	for metric, want := range map[string]float64{
		`ferry_snapshot_documents_total{partition="0",stream="catalog"}`:     1000,
		`ferry_snapshot_chunks_total{partition="0",stream="catalog"}`:        1,
		`ferry_snapshot_documents_done{partition="0",stream="catalog"}`:      1000,
		`ferry_snapshot_documents_estimated{partition="0",stream="catalog"}`: snapDocs,
		`ferry_snapshot_running{partition="0",stream="catalog"}`:             1,
	} {
		if got := s.m.metric(metric); got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
	if r := s.m.metric(`ferry_snapshot_documents_per_second{partition="0",stream="catalog"}`); r <= 0 {
		t.Errorf("ferry_snapshot_documents_per_second = %v, want the rate", r)
	}
	t.Logf("running:\n%s", out)

	s.release()
	poll.Until(t, 60*time.Second, func() error {
		if sn := s.snapshot(t); sn == nil || sn.State != "finished" {
			return fmt.Errorf("/status does not show the snapshot finished: %+v", sn)
		}
		return nil
	})
	doc, body = s.status(t)
	sn = findStream(doc, "catalog").Partitions[0].Snapshot
	if sn.DocumentsDone != snapDocs || sn.ChunksDone != 3 || sn.Percent == nil || *sn.Percent != 100 || sn.FinishedAt == nil ||
		sn.FinishedAt.Before(sn.StartedAt) || sn.ETASeconds != nil || sn.DocumentsPerSecond == nil {
		t.Errorf("finished snapshot in /status:\n%s", body)
	}
	code, out, errOut = runCLI("status", "-c", s.cfg)
	if code != 0 {
		t.Fatalf("ferry status: exit %d: %s", code, errOut)
	}
	want := "  partition 0: last snapshot (start) finished at " + sn.FinishedAt.Format(time.RFC3339) + ": 2,500 documents in " +
		shortDuration(sn.FinishedAt.Sub(sn.StartedAt).Seconds()) + "\n"
	if !strings.Contains(out, want) || strings.Contains(out, "snapshot running") {
		t.Errorf("ferry status does not show the finished snapshot's line %q:\n%s", want, out)
	}
	poll.Until(t, 20*time.Second, func() error {
		for metric, want := range map[string]float64{
			`ferry_snapshot_documents_total{partition="0",stream="catalog"}`: snapDocs,
			`ferry_snapshot_chunks_total{partition="0",stream="catalog"}`:    3,
			`ferry_snapshot_running{partition="0",stream="catalog"}`:         0,
		} {
			if got := s.m.metric(metric); got != want {
				return fmt.Errorf("%s = %v, want %v", metric, got, want)
			}
		}
		return nil
	})
	t.Logf("finished:\n%s", out)
}

// documentedSnapshotFields reads the list of the snapshot object's fields
// in docs/status.md ("- `name` (type): meaning" under "### The snapshot
// object").
func documentedSnapshotFields(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### The snapshot object")
	if !ok {
		t.Fatal(`docs/status.md has no "### The snapshot object" section`)
	}
	if i := strings.Index(sec, "\n#"); i >= 0 {
		sec = sec[:i]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^- `([a-z_]+)` \\(").FindAllStringSubmatch(sec, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}
