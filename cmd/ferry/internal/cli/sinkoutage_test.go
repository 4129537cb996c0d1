package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestStatusShowsSinkOutage: while the receiver answers 503 to every
// delivery, `ferry status` (text and -json) and /status say the stream and
// its partitions are waiting for the sink, with the delivery error; once
// the receiver is back they say running. Before, they said running
// throughout: the per-partition state came from the checkpoints only,
// and the members' run states never reached the state store.
func TestStatusShowsSinkOutage(t *testing.T) {
	t.Run("mongodb", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t)
		rcv := newReceiver(t)
		rcv.setStatus(func(string) int { return http.StatusServiceUnavailable })
		cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
		a, _ := startTwoMembers(t, e, cfg)
		for i := range 10 {
			e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
		}
		statusJSON := func() *statusDoc {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), []string{"status", "-json", "-c", cfg}, &out, &errOut); code != 0 {
				t.Fatalf("ferry status -json: exit %d: %s", code, errOut.String())
			}
			return decodeStatus(t, out.Bytes())
		}
		var o *streamDoc
		poll.Until(t, 30*time.Second, func() error {
			o = findStream(statusJSON(), "orders")
			if o.State != "waiting-for-sink" || len(o.Partitions) != 2 ||
				o.Partitions[0].State != "waiting-for-sink" || o.Partitions[1].State != "waiting-for-sink" {
				return fmt.Errorf("during the outage ferry status -json says orders is %q, partitions %+v; want waiting-for-sink", o.State, o.Partitions)
			}
			return nil
		})
		checkOutageDoc(t, o, []string{"a", "b"})
		var text, errOut bytes.Buffer
		if code := run(context.Background(), []string{"status", "-c", cfg}, &text, &errOut); code != 0 {
			t.Fatalf("ferry status: exit %d: %s", code, errOut.String())
		}
		if s := text.String(); !strings.Contains(s, "stream orders: waiting-for-sink") || strings.Count(s, "waiting-for-sink") < 3 ||
			!strings.Contains(s, "503") || strings.Contains(s, procSecret) {
			t.Errorf("ferry status during the outage does not say the stream and both partitions wait for the sink, and why:\n%s", s)
		}
		t.Logf("ferry status during the outage:\n%s", text.String())
		_, body := a.get("/status")
		if p := findStream(decodeStatus(t, []byte(body)), "orders"); p == nil || p.State != "waiting-for-sink" {
			t.Errorf("/status of a during the outage:\n%s", body)
		}

		rcv.setStatus(nil)
		poll.Until(t, 60*time.Second, rcv.deliveredIs(10))
		poll.Until(t, 30*time.Second, func() error {
			o = findStream(statusJSON(), "orders")
			if o.State != "running" || o.Reason != "" || o.Partitions[0].State != "running" || o.Partitions[1].State != "running" ||
				o.Partitions[0].LastError != "" || o.Partitions[1].LastError != "" {
				return fmt.Errorf("after the outage ferry status -json says orders is %q (%q), partitions %+v; want running", o.State, o.Reason, o.Partitions)
			}
			return nil
		})
	})

	t.Run("bolt", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t)
		rcv := newReceiver(t)
		rcv.setStatus(func(string) int { return http.StatusServiceUnavailable })
		cfg := writeFile(t, fmt.Sprintf(`listen: 127.0.0.1:0
state: {bolt: {path: %q}}
streams:
  - name: orders
    source: {uri: %q, scope: {collection: shop.orders}}
    delivery: {mode: at-least-once}
    on_poison: stall
    sink: {webhook: {url: %q, secret: %q}}
`, filepath.Join(t.TempDir(), "state.db"), e.srv.URI(), rcv.url(), procSecret))
		d := startRun(t, cfg)
		addr := d.addr(t)
		status := func() *streamDoc {
			code, b := getBody(t, "http://"+addr+"/status")
			if code != http.StatusOK {
				t.Fatalf("/status: %d %s", code, b)
			}
			return findStream(decodeStatus(t, b), "orders")
		}
		poll.Until(t, 20*time.Second, func() error {
			if o := status(); len(o.Partitions) != 1 || o.Partitions[0].CheckpointAt == nil {
				return fmt.Errorf("the partition has not started: %+v", o.Partitions)
			}
			return nil
		})
		e.insert("orders", bson.D{{Key: "_id", Value: "o-1"}})
		var o *streamDoc
		poll.Until(t, 30*time.Second, func() error {
			if o = status(); o.State != "waiting-for-sink" || o.Partitions[0].State != "waiting-for-sink" {
				return fmt.Errorf("during the outage /status says orders is %q, partition %+v; want waiting-for-sink", o.State, o.Partitions[0])
			}
			return nil
		})
		checkOutageDoc(t, o, []string{o.Members[0].ID})
		rcv.setStatus(nil)
		poll.Until(t, 30*time.Second, rcv.deliveredIs(1))
		poll.Until(t, 30*time.Second, func() error {
			if o = status(); o.State != "running" || o.Reason != "" || o.Partitions[0].State != "running" || o.Partitions[0].LastError != "" {
				return fmt.Errorf("after the outage /status says orders is %q (%q), partition %+v; want running", o.State, o.Reason, o.Partitions[0])
			}
			return nil
		})
		d.stop(t)
	})
}

// checkOutageDoc checks a stream's status document during a sink outage:
// the reason and each partition's last error name the receiver's answer,
// no secret; each partition has its owner among owners.
func checkOutageDoc(t *testing.T, o *streamDoc, owners []string) {
	t.Helper()
	if !strings.Contains(o.Reason, "sink") || !strings.Contains(o.Reason, "503") || o.Recovery != nil {
		t.Errorf("orders' reason %q, recovery %+v: want the sink's 503 named, no recovery command (it clears by itself)", o.Reason, o.Recovery)
	}
	for _, p := range o.Partitions {
		if !strings.Contains(p.LastError, "503") || p.Note == "" || strings.Contains(p.LastError, procSecret) || !strings.Contains(strings.Join(owners, " "), p.Owner) || p.Owner == "" {
			t.Errorf("partition %d during the outage: owner %q, note %q, last_error %q; want the 503 named", p.Partition, p.Owner, p.Note, p.LastError)
		}
	}
}
