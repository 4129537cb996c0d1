package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// leaseEpoch reads a lease's epoch as stored; ok is false when it is not
// an integer.
func leaseEpoch(t *testing.T, e *procEnv, id string) (owner string, epoch int64, ok bool) {
	t.Helper()
	raw, err := e.client.Database("ferry").Collection("leases").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	owner, _ = raw.Lookup("owner").StringValueOK()
	epoch, ok = raw.Lookup("epoch").AsInt64OK()
	return owner, epoch, ok && raw.Lookup("epoch").Type != bson.TypeString
}

// TestCorruptLeaseIsVisibleAndRepaired, as the operator met it: two
// streams in one file, one member; the lease of orders' partition 0 gets
// epoch "x" by hand. Before, the partition stayed unowned for good, the
// stream said running, /readyz 200, and ferry status and /status failed
// for both streams. Now status and /status show both streams, orders
// degraded with the record named by collection and _id, while the
// member's repair cannot write (a fail point on the leases' updates holds
// the window open); once it can, the member replaces the lease and owns
// the partition again at a higher epoch, and delivers its changes.
func TestCorruptLeaseIsVisibleAndRepaired(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, twoStreamsYAML(e.srv.URI(), rcv.url(), "", ""))
	m := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	waitStartedIn(t, e, "audit", 1)
	_, before, _ := leaseEpoch(t, e, "orders/0")

	// The repair is an update; the corruption a findAndModify, which the
	// fail point lets through.
	failPoint(t, e, bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "errorCode", Value: 2},
		{Key: "namespace", Value: "ferry.leases"}})
	if err := e.client.Database("ferry").Collection("leases").FindOneAndUpdate(context.Background(), bson.D{{Key: "_id", Value: "orders/0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: "x"}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	const record = `ferry.leases _id "orders/0"`
	const problem = "field epoch has BSON type string"
	var out string
	poll.Until(t, 30*time.Second, func() error {
		code, o, errOut := ferryCmd("status", "-c", cfg)
		out = o
		if code != 0 {
			return fmt.Errorf("ferry status: exit %d: %s%s", code, o, errOut)
		}
		if !strings.Contains(o, "stream orders: degraded") || !strings.Contains(o, record+": "+problem) {
			return fmt.Errorf("ferry status does not show orders degraded, naming %s:\n%s", record, o)
		}
		return nil
	})
	t.Logf("ferry status while the lease is corrupt:\n%s", out)
	if !strings.Contains(out, "stream audit: running") {
		t.Errorf("ferry status does not show audit running beside the corrupt record:\n%s", out)
	}
	code, body := m.get("/status")
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if s := findStream(&doc, "orders"); s == nil || s.State != "degraded" || len(s.CorruptRecords) != 1 ||
		s.CorruptRecords[0].Record != record || !strings.Contains(s.Reason, record) {
		t.Errorf("/status: orders = %+v; want degraded, the record named", s)
	}
	if s := findStream(&doc, "audit"); s == nil || s.State != "running" {
		t.Errorf("/status: audit = %+v; want running", s)
	}
	// The member reads it at its next rebalance (every lease_ttl/4).
	poll.Until(t, 30*time.Second, func() error {
		if code, body := m.get("/readyz"); code != http.StatusOK || !strings.Contains(body, "stream orders: degraded: corrupt record "+record) {
			return fmt.Errorf("/readyz: %d %s; want 200 (the members repair it), naming the record", code, body)
		}
		return nil
	})

	// The repair can write: the member replaces the lease, waits one
	// lease TTL, and owns the partition again at a higher epoch.
	if err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		owner, epoch, ok := leaseEpoch(t, e, "orders/0")
		if !ok || owner != "m1" || epoch <= before {
			return fmt.Errorf("lease orders/0: owner %q epoch %d (an integer: %v); want m1 above epoch %d", owner, epoch, ok, before)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		code, o, errOut := ferryCmd("status", "-c", cfg)
		if code != 0 || !strings.Contains(o, "stream orders: running") || strings.Contains(o, "corrupt") {
			return fmt.Errorf("ferry status after the repair: exit %d:\n%s%s", code, o, errOut)
		}
		return nil
	})
	for i := range 10 {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	poll.Until(t, 30*time.Second, rcv.deliveredIs(10))
	warned := false
	for _, line := range m.logLines() {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `ferry.leases _id \"orders/0\"`) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("the member logged no warning naming the corrupt lease record")
	}
}

// TestCorruptMemberDocumentIsIgnored: a live member's document gets a
// status and a joinedAt of the wrong type by hand. Before, every member's
// rebalance failed on it (a second member never got a partition) and
// ferry status failed for every stream. Now ferry status shows both
// streams at once, and a member joining takes its share of the
// partitions.
func TestCorruptMemberDocumentIsIgnored(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, twoStreamsYAML(e.srv.URI(), rcv.url(), "", ""))
	m1 := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	if _, err := e.client.Database("ferry").Collection("members").UpdateOne(context.Background(),
		bson.D{{Key: "_id", Value: bson.D{{Key: "group", Value: "orders"}, {Key: "member", Value: "m1"}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "x"}, {Key: "joinedAt", Value: "y"}}}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := ferryCmd("status", "-c", cfg)
	if code != 0 || !strings.Contains(out, "stream orders:") || !strings.Contains(out, "stream audit:") {
		t.Fatalf("ferry status with a corrupt member document: exit %d:\n%s%s", code, out, errOut)
	}
	m2 := startMember(t, cfg, "m2")
	poll.Until(t, 30*time.Second, func() error {
		a, b := m1.metric(`ferry_partitions_owned{stream="orders"}`), m2.metric(`ferry_partitions_owned{stream="orders"}`)
		if a != 1 || b != 1 {
			return fmt.Errorf("orders' partitions owned: m1 %v, m2 %v; want one each", a, b)
		}
		return nil
	})
	// m1's next heartbeat puts its document right.
	poll.Until(t, 30*time.Second, func() error {
		code, out, errOut := ferryCmd("status", "-c", cfg)
		if code != 0 || !strings.Contains(out, "stream orders: running") || strings.Contains(out, "corrupt") {
			return fmt.Errorf("ferry status: exit %d:\n%s%s", code, out, errOut)
		}
		return nil
	})
}
