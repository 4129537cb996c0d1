package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// twoStreamsYAML configures orders (2 partitions) and audit (1 partition),
// both idempotent to the webhook at url, for member id member ("" takes
// FERRY_MEMBER_ID).
func twoStreamsYAML(uri, url, member, extra string) string {
	if member == "" {
		member = "${FERRY_MEMBER_ID:-}"
	}
	return fmt.Sprintf(`listen: 127.0.0.1:0
log: {level: info}
state: {uri: %[1]q}
%[5]s
streams:
  - name: orders
    source: {uri: %[1]q, scope: {collection: shop.orders}}
    group: {partitions: 2, lease_ttl: 2s, member_id: %[3]q}
    delivery: {mode: idempotent}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 50ms}
    sink: {webhook: {url: %[2]q, secret: %[4]q}}
  - name: audit
    source: {uri: %[1]q, scope: {collection: shop.audit}}
    group: {partitions: 1, lease_ttl: 2s, member_id: %[3]q}
    delivery: {mode: idempotent}
    sink: {webhook: {url: %[2]q, secret: %[4]q}}
`, uri, url, member, procSecret, extra)
}

// decodeStatus decodes a status document, refusing unknown fields and
// trailing data.
func decodeStatus(t *testing.T, body []byte) *statusDoc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var doc statusDoc
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("status document does not decode strictly: %v\n%s", err, body)
	}
	if dec.More() {
		t.Fatalf("status document has trailing data:\n%s", body)
	}
	return &doc
}

func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func findStream(doc *statusDoc, name string) *streamDoc {
	for i := range doc.Streams {
		if doc.Streams[i].Name == name {
			return &doc.Streams[i]
		}
	}
	return nil
}

// TestStatusDocument runs a daemon with a stream that delivers (one poison
// document dead-lettered) and one the server fails (ChangeStreamFatalError
// on getMore): /status decodes strictly, says what the state store holds,
// its fields are exactly the ones docs/status.md documents, and
// `ferry status -json` prints the same document.
func TestStatusDocument(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	rcv.setStatus(func(doc string) int {
		if doc == "poison" {
			return http.StatusBadRequest // permanent: dead-lettered at once
		}
		return http.StatusOK
	})
	cfg := writeFile(t, twoStreamsYAML(e.srv.URI(), rcv.url(), "m1", ""))
	d := startRun(t, cfg)
	addr := d.addr(t)
	waitStartedIn(t, e, "orders", 2)
	waitStartedIn(t, e, "audit", 1)
	failPoint(t, e, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 280},
		{Key: "namespace", Value: "shop.audit"}})
	// A corrupt lease record of audit (of a partition it does not have, so
	// no member repairs it): listed, named, beside everything else.
	if _, err := e.client.Database("ferry").Collection("leases").InsertOne(context.Background(), bson.D{{Key: "_id", Value: "audit/5"},
		{Key: "group", Value: "audit"}, {Key: "partition", Value: int64(5)}, {Key: "owner", Value: nil}, {Key: "epoch", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	e.insert("orders", bson.D{{Key: "_id", Value: "poison"}})

	var doc *statusDoc
	var body []byte
	poll.Until(t, 30*time.Second, func() error {
		code, b := getBody(t, "http://"+addr+"/status")
		if code != http.StatusOK {
			return fmt.Errorf("/status: %d", code)
		}
		body, doc = b, decodeStatus(t, b)
		o, a := findStream(doc, "orders"), findStream(doc, "audit")
		if rcv.delivered() != 6 || o == nil || o.DLQ.Size == nil || *o.DLQ.Size != 1 || a == nil || a.State != "failed" ||
			doc.LedgerEntries == nil || *doc.LedgerEntries < 6 {
			return fmt.Errorf("%d delivered; /status does not show 6 deliveries, orders' dead letter, audit failed and 6 ledger entries:\n%s", rcv.delivered(), b)
		}
		return nil
	})
	if doc.Schema != statusSchema || doc.StateStore != "mongodb" || len(doc.Streams) != 2 || doc.Streams[0].Name != "orders" {
		t.Fatalf("document header: schema %q, store %q, %d streams:\n%s", doc.Schema, doc.StateStore, len(doc.Streams), body)
	}
	if age := time.Since(doc.GeneratedAt); age < -time.Minute || age > time.Minute {
		t.Errorf("generated_at %v is not now", doc.GeneratedAt)
	}

	o := findStream(doc, "orders")
	if o.State != "running" || o.Reason != "" || o.Recovery != nil || o.Sink != "webhook" || o.Delivery != "idempotent" || o.PartitionCount != 2 {
		t.Errorf("orders: state %q reason %q recovery %v sink %q delivery %q partitions %d", o.State, o.Reason, o.Recovery, o.Sink, o.Delivery, o.PartitionCount)
	}
	if len(o.Members) != 1 || o.Members[0].ID != "m1" || !slices.Equal(o.Members[0].Partitions, []int{0, 1}) {
		t.Errorf("orders members: %+v", o.Members)
	}
	var ids []string
	cur, err := e.client.Database("ferry").Collection("checkpoints").Find(context.Background(), bson.D{{Key: "stream", Value: "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	var cps []struct {
		Identity string `bson:"identity"`
	}
	if err := cur.All(context.Background(), &cps); err != nil {
		t.Fatal(err)
	}
	for _, c := range cps {
		ids = append(ids, c.Identity)
	}
	if len(o.Definition.Configured) != 64 || !o.Definition.Matches || len(o.Definition.Checkpoints) != 1 ||
		o.Definition.Checkpoints[0] != o.Definition.Configured || !slices.Contains(ids, o.Definition.Configured) {
		t.Errorf("orders definition %+v, the checkpoints' identities %v", o.Definition, ids)
	}
	if len(o.Partitions) != 2 {
		t.Fatalf("orders partitions: %+v", o.Partitions)
	}
	for i, p := range o.Partitions {
		if p.Partition != i || p.Owner != "m1" || p.Epoch < 1 || p.LeaseExpiresAt == nil || p.CheckpointAt == nil ||
			p.CheckpointAgeSeconds == nil || *p.CheckpointAgeSeconds < 0 || p.LagSeconds == nil || *p.LagSeconds < 0 ||
			p.State != "running" || p.LastError != "" {
			t.Errorf("orders partition %d: %+v", i, p)
		}
	}
	if o.DLQ.Recent == nil || *o.DLQ.Recent != 1 || o.DLQ.NewestAt == nil {
		t.Errorf("orders dlq: size %v recent %v newest %v", *o.DLQ.Size, o.DLQ.Recent, o.DLQ.NewestAt)
	}

	a := findStream(doc, "audit")
	if len(a.Members) != 0 || len(a.Failures) != 1 || a.Failures[0].Member != "m1" || a.Failures[0].Class != "server-error" ||
		a.Failures[0].Advice == "" || !strings.HasPrefix(a.Reason, "server-error: ") {
		t.Errorf("audit: members %+v failures %+v reason %q", a.Members, a.Failures, a.Reason)
	}
	if a.Recovery == nil || a.Recovery.Command != "ferry validate -c "+cfg || a.Recovery.Advice == "" || a.Recovery.Recheck == "" {
		t.Errorf("audit recovery: %+v", a.Recovery)
	}
	if len(a.Partitions) != 1 || a.Partitions[0].Owner != "" || !strings.HasPrefix(a.Partitions[0].LastError, "server-error: ") {
		t.Errorf("audit partitions: %+v", a.Partitions)
	}
	if len(a.CorruptRecords) != 1 || a.CorruptRecords[0].Record != `ferry.leases _id "audit/5"` ||
		a.CorruptRecords[0].Problem != "field epoch has BSON type string" || a.CorruptRecords[0].Action == "" || len(o.CorruptRecords) != 0 {
		t.Errorf("corrupt records: audit %+v, orders %+v; want audit's lease audit/5 named", a.CorruptRecords, o.CorruptRecords)
	}

	// Every field is documented, and every documented field is served.
	served := map[string]bool{}
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	jsonPaths("", generic, served)
	documented := documentedFields(t)
	var missing, extra []string
	for p := range served {
		if !documented[p] {
			missing = append(missing, p)
		}
	}
	for p := range documented {
		if !served[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("docs/status.md and /status disagree: served but not documented %v; documented but not served %v", missing, extra)
	}

	// `ferry status -json` prints the same document.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"status", "-json", "-c", cfg}, &out, &errOut); code != 0 {
		t.Fatalf("ferry status -json: exit %d: %s", code, errOut.String())
	}
	cli := decodeStatus(t, out.Bytes())
	_, again := getBody(t, "http://"+addr+"/status")
	if a, b := comparable(t, out.Bytes()), comparable(t, again); !reflect.DeepEqual(a, b) {
		ja, _ := json.MarshalIndent(a, "", " ")
		jb, _ := json.MarshalIndent(b, "", " ")
		t.Errorf("ferry status -json and /status differ (times and ages aside):\n%s\n---\n%s", ja, jb)
	}
	if findStream(cli, "audit").State != "failed" {
		t.Errorf("ferry status -json: audit is %q", findStream(cli, "audit").State)
	}

	// Read only.
	resp, err := http.Post("http://"+addr+"/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %d, want 405", resp.StatusCode)
	}
	d.stop(t)
}

// jsonPaths adds the paths of v's fields (streams[].partitions[].owner).
func jsonPaths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			jsonPaths(p, c, out)
		}
	case []any:
		for _, c := range x {
			jsonPaths(prefix+"[]", c, out)
		}
	}
}

// documentedFields reads the field table of docs/status.md.
func documentedFields(t *testing.T) map[string]bool {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "docs", "status.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_\\[\\].]+)` \\|")
	out := map[string]bool{}
	for _, m := range row.FindAllSubmatch(b, -1) {
		out[string(m[1])] = true
	}
	if len(out) < 20 {
		t.Fatalf("docs/status.md: only %d fields found in its table", len(out))
	}
	return out
}

// comparable is a status document without what changes between two reads
// a moment apart: times, ages and lags.
func comparable(t *testing.T, body []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if strings.HasSuffix(k, "_at") || strings.HasSuffix(k, "_seconds") || k == "ledger_entries" {
					delete(x, k)
					continue
				}
				strip(c)
			}
		case []any:
			for _, c := range x {
				strip(c)
			}
		}
	}
	strip(v)
	return v
}

// TestStatusDocumentBolt: with the bolt state store (one process, no
// group) /status shows the process as the one member owning the
// partition, the checkpoint from the file, and null where bolt has no
// collection (ledger, dead letters).
func TestStatusDocumentBolt(t *testing.T) {
	e := newProcEnv(t)
	cfg := writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
state: {bolt: {path: %q}}
streams:
  - name: orders
    source: {uri: %q, scope: {collection: shop.orders}}
    delivery: {mode: at-least-once}
    on_poison: stall
    sink: {stdout: {}}
`, filepath.Join(t.TempDir(), "state.db"), e.srv.URI()))
	d := startRun(t, cfg)
	addr := d.addr(t)
	var doc *statusDoc
	poll.Until(t, 20*time.Second, func() error {
		code, b := getBody(t, "http://"+addr+"/status")
		if code != http.StatusOK {
			return fmt.Errorf("/status: %d", code)
		}
		doc = decodeStatus(t, b)
		if o := findStream(doc, "orders"); o == nil || len(o.Partitions) != 1 || o.Partitions[0].CheckpointAt == nil || o.Partitions[0].Owner == "" {
			return fmt.Errorf("/status does not show the running partition:\n%s", b)
		}
		return nil
	})
	o := findStream(doc, "orders")
	if doc.StateStore != "bolt" || doc.LedgerEntries != nil || o.DLQ.Size != nil || o.State != "running" ||
		len(o.Members) != 1 || o.Members[0].ID != o.Partitions[0].Owner || !o.Definition.Matches || o.Recovery != nil {
		t.Errorf("bolt status: %+v\nstream %+v", doc, o)
	}
	d.stop(t)
}
