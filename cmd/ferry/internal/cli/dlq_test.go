package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/deadletter"
)

// changeEvent inserts doc into db.coll and returns the change event the
// server sent for it.
func changeEvent(t *testing.T, client *mongo.Client, db, coll string, doc bson.D) bson.Raw {
	t.Helper()
	ctx := context.Background()
	cs, err := client.Database(db).Collection(coll).Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := client.Database(db).Collection(coll).InsertOne(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	return append(bson.Raw(nil), cs.Current...)
}

// changeEntry is a dead-letter entry of stream for the change event raw,
// as the consumer writes it (legacy: as entries were written before kind
// and documentKey were recorded).
func changeEntry(t *testing.T, stream string, raw bson.Raw, errMsg string, legacy bool) deadletter.Entry {
	t.Helper()
	ev, err := ferry.ParseEvent(raw, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := deadletter.Entry{Stream: stream, EventID: ev.ID(), Kind: deadletter.KindChange, Operation: ev.OperationType,
		Namespace: ev.Namespace.String(), DocumentKey: ev.DocumentKey, Event: raw, Error: errMsg, Attempts: 5,
		FirstAt: now.Add(-time.Minute), LastAt: now, Epoch: 1}
	if legacy {
		e.Kind, e.DocumentKey = "", nil
	}
	return e
}

func putEntries(t *testing.T, db *mongo.Database, entries ...deadletter.Entry) {
	t.Helper()
	dlq := deadletter.NewMongo(db, "dlq")
	for _, e := range entries {
		if err := dlq.Put(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// dlqLine is what a test reads back from ferry dlq list -json.
type dlqLine struct {
	Stream, EventID, Kind, Operation, Namespace, Error string
	Partition, Attempts                                int
	DocumentKey                                        json.RawMessage
	FirstAttemptAt, LastAttemptAt                      time.Time
}

func dlqJSON(t *testing.T, out string) []dlqLine {
	t.Helper()
	var lines []dlqLine
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var d dlqLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("dlq list -json line %q: %v", l, err)
		}
		lines = append(lines, d)
	}
	return lines
}

// TestDLQListShowsKeyAndWholeError: ferry dlq list shows each entry's
// documentKey (relaxed Extended JSON; for entries written before it was
// recorded, taken from the event) and its whole error, on one line per
// entry, never the document body or the whole event id; -json prints one
// object per line with every field; -stream selects a stream and an
// unknown one exits 2 naming the flag.
func TestDLQListShowsKeyAndWholeError(t *testing.T) {
	srv, client := emulator(t)
	longErr := "webhook: event " + strings.Repeat("ab", 32) + ": POST https://receiver.example.com/hooks/orders/v1:\n\ttimed out " +
		strings.Repeat("waiting ", 12) + "then receiver answered 503 Service Unavailable"
	withKey := changeEntry(t, "orders", changeEvent(t, client, "shop", "orders",
		bson.D{{Key: "_id", Value: "o-1"}, {Key: "card", Value: "4111-body-secret"}}), longErr, false)
	legacy := changeEntry(t, "orders", changeEvent(t, client, "shop", "orders",
		bson.D{{Key: "_id", Value: bson.D{{Key: "tenant", Value: "a"}, {Key: "n", Value: 1}}}, {Key: "card", Value: "4111-body-secret"}}),
		"receiver answered 400 Bad Request", true)
	empty := deadletter.Entry{Stream: "users", EventID: "e-without-event", Operation: "insert", Namespace: "shop.users",
		Error: "boom", Attempts: 1, FirstAt: time.Now(), LastAt: time.Now()}
	putEntries(t, client.Database("ferry"), withKey, legacy, empty)
	cfgPath := writeFile(t, `
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    sink: {stdout: {}}
  - name: users
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.users}}
    sink: {stdout: {}}
`)
	code, out, errOut := runCLI("dlq", "list", "-c", cfgPath)
	if code != 0 {
		t.Fatalf("dlq list: exit %d: %s", code, errOut)
	}
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(rows) != 4 || !strings.Contains(rows[0], "documentKey") || !strings.Contains(rows[0], "error") {
		t.Fatalf("dlq list: want a header and 3 rows:\n%s", out)
	}
	wantRow := map[string][]string{
		withKey.EventID[:16]: {`{"_id":"o-1"}`, strings.NewReplacer("\n", " ", "\t", " ").Replace(longErr), "orders", "shop.orders", "insert"},
		legacy.EventID[:16]:  {`{"_id":{"tenant":"a","n":1}}`, "receiver answered 400 Bad Request"},
		"e-without-event":    {"users", " - ", "boom"},
	}
	for id, parts := range wantRow {
		var row string
		for _, r := range rows[1:] {
			if strings.Contains(r, id) {
				row = r
			}
		}
		for _, p := range parts {
			if !strings.Contains(row, p) {
				t.Errorf("dlq list: the row of %s lacks %q:\n%s", id, p, out)
			}
		}
	}
	if strings.Contains(out, "4111-body-secret") || strings.Contains(out, withKey.EventID) {
		t.Errorf("dlq list printed a document body or a whole event id:\n%s", out)
	}

	code, out, errOut = runCLI("dlq", "list", "-c", cfgPath, "-json")
	if code != 0 {
		t.Fatalf("dlq list -json: exit %d: %s", code, errOut)
	}
	lines := dlqJSON(t, out)
	if len(lines) != 3 || strings.Contains(out, "4111-body-secret") {
		t.Fatalf("dlq list -json: want 3 lines without bodies:\n%s", out)
	}
	byID := map[string]dlqLine{}
	for _, l := range lines {
		byID[l.EventID] = l
	}
	if l := byID[withKey.EventID]; l.Stream != "orders" || l.Kind != "change" || l.Operation != "insert" || l.Namespace != "shop.orders" ||
		string(l.DocumentKey) != `{"_id":"o-1"}` || l.Error != longErr || l.Attempts != 5 || l.Partition != 0 ||
		!l.FirstAttemptAt.Equal(withKey.FirstAt) || !l.LastAttemptAt.Equal(withKey.LastAt) {
		t.Errorf("dlq list -json: %+v does not match the entry %+v", l, withKey)
	}
	if l := byID[legacy.EventID]; l.Kind != "change" || string(l.DocumentKey) != `{"_id":{"tenant":"a","n":1}}` {
		t.Errorf("dlq list -json: the legacy entry reads %+v", l)
	}
	if l := byID["e-without-event"]; l.Stream != "users" || string(l.DocumentKey) != "null" || l.Error != "boom" {
		t.Errorf("dlq list -json: the entry without an event reads %+v", l)
	}

	if code, out, errOut := runCLI("dlq", "list", "-c", cfgPath, "-json", "-stream", "users"); code != 0 || len(dlqJSON(t, out)) != 1 {
		t.Errorf("dlq list -stream users: exit %d, %s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("dlq", "list", "-c", cfgPath, "-stream", "nope"); code != 2 || !strings.Contains(errOut, "-stream") {
		t.Errorf("dlq list -stream nope: exit %d, %s", code, errOut)
	}
}

// TestDLQListWebhookStatus: events a webhook receiver rejected are listed
// with the status it answered, which comes after the event id and URL in
// the error (it used to be cut off), and their documentKey.
func TestDLQListWebhookStatus(t *testing.T) {
	srv, client := emulator(t)
	ctx := context.Background()
	oid := bson.NewObjectID()
	if _, err := client.Database("shop").Collection("orders").InsertOne(ctx,
		bson.D{{Key: "_id", Value: oid}, {Key: "card", Value: "4111-body-secret"}}); err != nil {
		t.Fatal(err)
	}
	rejected := make(chan struct{}, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, "order rejected: missing field total")
		rejected <- struct{}{}
	}))
	defer hook.Close()
	t.Setenv("FERRY_TEST_WEBHOOK_SECRET", "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA==")
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`", database: ferry_state}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}, start_at: backfill}
    sink: {webhook: {url: "`+hook.URL+`/hooks/orders", secret: "${FERRY_TEST_WEBHOOK_SECRET}"}}
`)
	daemon := startRun(t, cfgPath)
	select {
	case <-rejected:
	case err := <-daemon.done:
		t.Fatalf("ferry run stopped: %v\n%s", err, daemon.errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the backfill event did not reach the receiver\n%s", daemon.errOut.String())
	}
	daemon.stop(t) // a 4xx is dead-lettered at once, before the drain ends
	code, out, errOut := runCLI("dlq", "list", "-c", cfgPath)
	if code != 0 {
		t.Fatalf("dlq list: exit %d: %s", code, errOut)
	}
	key := `{"_id":{"$oid":"` + oid.Hex() + `"}}`
	for _, want := range []string{"receiver answered 422 Unprocessable Entity", "order rejected: missing field total", key, "backfill"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq list lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI("dlq", "list", "-c", cfgPath, "-json")
	lines := dlqJSON(t, out)
	if code != 0 || len(lines) != 1 || !strings.Contains(lines[0].Error, "receiver answered 422") || string(lines[0].DocumentKey) != key ||
		lines[0].Kind != "backfill" || lines[0].Attempts != 1 || strings.Contains(out, "4111-body-secret") {
		t.Fatalf("dlq list -json: exit %d: %s%s", code, out, errOut)
	}
}

// TestDLQReplayEveryStream: without -stream, ferry dlq replay replays the
// dead letters of every stream, says per stream how many were replayed and
// how many still fail, and exits 1 if any still fails; an unknown -stream
// exits 2 naming the flag.
func TestDLQReplayEveryStream(t *testing.T) {
	srv, client := emulator(t)
	ctx := context.Background()
	state := client.Database("ferry")
	order := changeEntry(t, "orders", changeEvent(t, client, "shop", "orders", bson.D{{Key: "_id", Value: "o-1"}}), "503", false)
	user := changeEntry(t, "users", changeEvent(t, client, "shop", "users", bson.D{{Key: "_id", Value: "u-1"}}), "503", false)
	broken := deadletter.Entry{Stream: "users", EventID: "no-event", Kind: deadletter.KindChange, Operation: "insert",
		Namespace: "shop.users", Error: "boom", Attempts: 1, FirstAt: time.Now(), LastAt: time.Now()}
	putEntries(t, state, order, user, broken)
	cfgPath := writeFile(t, `
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    sink: {stdout: {}}
  - name: users
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.users}}
    sink: {stdout: {}}
  - name: empty
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.empty}}
    sink: {stdout: {}}
`)
	code, out, errOut := runCLI("dlq", "replay", "-c", cfgPath)
	if code != 1 {
		t.Fatalf("dlq replay with an entry that cannot be replayed: exit %d, want 1\n%s", code, errOut)
	}
	for _, want := range []string{"stream orders: replayed 1, still failing 0", "stream users: replayed 1, still failing 1",
		"stream empty: replayed 0, still failing 0", "stream users: event no-event: "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("dlq replay output lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, `"o-1"`) || !strings.Contains(out, `"u-1"`) {
		t.Errorf("the stdout sinks did not get both events:\n%s", out)
	}
	left, err := deadletter.NewMongo(state, "dlq").List(ctx, "users", 0)
	if n, _ := state.Collection("dlq").CountDocuments(ctx, bson.D{}); err != nil || n != 1 || len(left) != 1 || left[0].EventID != "no-event" {
		t.Fatalf("after the replay %d entries are left (%+v, %v), want only the broken one", n, left, err)
	}

	if code, _, errOut := runCLI("dlq", "replay", "-c", cfgPath, "-stream", "nope"); code != 2 || !strings.Contains(errOut, "-stream") ||
		!strings.Contains(errOut, `"nope"`) {
		t.Errorf("dlq replay -stream nope: exit %d: %s", code, errOut)
	}
	if err := deadletter.NewMongo(state, "dlq").Delete(ctx, "users", "no-event"); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("dlq", "replay", "-c", cfgPath); code != 0 || strings.Count(errOut, "replayed 0, still failing 0") != 3 {
		t.Errorf("dlq replay with nothing left: exit %d: %s", code, errOut)
	}
}
