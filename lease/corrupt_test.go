package lease_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/lease"
)

// TestCorruptLeaseRepaired: a lease whose epoch was set to "x" by hand.
// List still returns the group's other leases and names the corrupt one
// by collection and _id; Acquire cannot take it; Repair replaces it with
// a lease held by RepairOwner for one TTL at the floor epoch, compare-
// and-set (a second Repair changes nothing); once that expires by the
// server's clock, the next owner takes it at the epoch above the floor.
func TestCorruptLeaseRepaired(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control (AdvanceClock)")
	s := e.store(t, "")
	for p := range 2 {
		if _, err := s.Acquire(ctx(t), "g", p, "a", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.LeasesCollection().UpdateOne(ctx(t), bson.D{{Key: "_id", Value: "g/0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: "x"}}}}); err != nil {
		t.Fatal(err)
	}
	name := e.db.Name() + `.leases _id "g/0"`

	list, err := s.List(ctx(t), "g")
	bad, ok := lease.AsCorruptRecords(err)
	if !ok || !errors.Is(err, lease.ErrCorrupt) || len(bad) != 1 || bad[0].Record != name || bad[0].Usable ||
		bad[0].Partition != 0 || !strings.Contains(err.Error(), name+": field epoch has BSON type string") {
		t.Fatalf("List with a corrupt lease: %v; want CorruptRecords naming %s (not usable)", err, name)
	}
	if len(list) != 1 || list[0].Partition != 1 || list[0].Owner != "a" {
		t.Fatalf("List with a corrupt lease returned %+v, want the readable lease of partition 1", list)
	}
	if ce, err := s.Inspect(ctx(t), "g", 0); err != nil || ce == nil || ce.Record != name {
		t.Fatalf("Inspect: %v, %v; want the corrupt record", ce, err)
	}
	if ce, err := s.Inspect(ctx(t), "g", 1); err != nil || ce != nil {
		t.Fatalf("Inspect of a sound lease: %v, %v; want nil", ce, err)
	}
	if _, err := s.Acquire(ctx(t), "g", 0, "b", 5*time.Second); err == nil {
		t.Fatal("Acquire took a lease whose epoch cannot be read")
	}

	if done, err := s.Repair(ctx(t), "g", 0, 7, 5*time.Second); err != nil || !done {
		t.Fatalf("Repair: %v, %v; want done", done, err)
	}
	if done, err := s.Repair(ctx(t), "g", 0, 9, 5*time.Second); err != nil || done {
		t.Fatalf("second Repair: %v, %v; want nothing done (the lease reads)", done, err)
	}
	l, err := s.Get(ctx(t), "g", 0)
	if err != nil || l.Owner != lease.RepairOwner || l.Epoch != 7 || l.Expired {
		t.Fatalf("after Repair: %+v, %v; want held by %s at epoch 7", l, err, lease.RepairOwner)
	}
	if _, err := s.Acquire(ctx(t), "g", 0, "b", 5*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire within the repair's TTL: %v, want ErrHeld", err)
	}
	e.srv.AdvanceClock(5*time.Second + time.Millisecond)
	l, err = s.Acquire(ctx(t), "g", 0, "b", 5*time.Second)
	if err != nil || l.Epoch != 8 || l.Owner != "b" {
		t.Fatalf("Acquire after the repair's TTL: %+v, %v; want b at epoch 8", l, err)
	}
	if _, err := s.List(ctx(t), "g"); err != nil {
		t.Fatalf("List after the repair: %v", err)
	}
}

// TestCorruptLeaseFieldShownOnly: a held lease whose acquiredAt is of the
// wrong type is still usable: List returns it (and names it), its holder
// renews it, and Repair puts the field right in place without taking it.
func TestCorruptLeaseFieldShownOnly(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, "")
	held, err := s.Acquire(ctx(t), "g", 0, "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeasesCollection().UpdateOne(ctx(t), bson.D{{Key: "_id", Value: "g/0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "acquiredAt", Value: int32(3)}}}}); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx(t), "g")
	bad, ok := lease.AsCorruptRecords(err)
	if !ok || len(bad) != 1 || !bad[0].Usable || len(list) != 1 || list[0].Owner != "a" {
		t.Fatalf("List: %+v, %v; want a's lease and the corrupt record (usable)", list, err)
	}
	if _, err := s.Renew(ctx(t), held, 5*time.Second); err != nil {
		t.Fatalf("Renew of a lease with a corrupt acquiredAt: %v", err)
	}
	if done, err := s.Repair(ctx(t), "g", 0, 0, 5*time.Second); err != nil || !done {
		t.Fatalf("Repair: %v, %v", done, err)
	}
	l, err := s.Get(ctx(t), "g", 0)
	if err != nil || l.Owner != "a" || l.Epoch != held.Epoch || l.AcquiredAt.IsZero() {
		t.Fatalf("after Repair: %+v, %v; want a's lease unchanged, acquiredAt set", l, err)
	}
	if _, err := s.Renew(ctx(t), held, 5*time.Second); err != nil {
		t.Fatalf("Renew after Repair: %v", err)
	}
}

// TestCorruptMemberDocument: a member document whose status and joinedAt
// were set to values of the wrong type by hand. Members still returns
// every member (the damaged fields taken as absent) and names the
// document; the member's next heartbeat puts it right.
func TestCorruptMemberDocument(t *testing.T) {
	e := newEnv(t)
	clk := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := e.store(t, "", lease.MemberTimeout(mTimeout), lease.HeartbeatInterval(mHeartbeat), lease.WithClock(clk))
	a := join(t, s, "a", nil)
	join(t, s, "b", nil)
	if _, err := s.MembersCollection().UpdateOne(ctx(t), bson.D{{Key: "_id", Value: bson.D{{Key: "group", Value: "g"}, {Key: "member", Value: "a"}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "x"}, {Key: "joinedAt", Value: "y"}}}}); err != nil {
		t.Fatal(err)
	}
	name := e.db.Name() + `.members _id {group: "g", member: "a"}`
	ms, err := s.Members(ctx(t), "g")
	bad, ok := lease.AsCorruptRecords(err)
	if !ok || len(bad) != 1 || bad[0].Record != name || bad[0].Member != "a" || !bad[0].Usable ||
		!strings.Contains(err.Error(), "field status has BSON type string; field joinedAt has BSON type string") {
		t.Fatalf("Members with a corrupt document: %v; want CorruptRecords naming %s", err, name)
	}
	if len(ms) != 2 || ms[0].ID != "a" || ms[0].Status != nil || !ms[0].JoinedAt.IsZero() || ms[1].ID != "b" {
		t.Fatalf("Members = %+v; want a (status and joinedAt absent) and b", ms)
	}
	clk.settle(t, a.Done())
	clk.Advance(mHeartbeat)
	// Both members' keepers fire; settle returns once either waits again,
	// which may be before a's heartbeat landed: wait for its effect.
	poll.Until(t, 20*time.Second, func() error {
		ms, err = s.Members(ctx(t), "g")
		if err != nil || len(ms) != 2 || ms[0].JoinedAt.IsZero() {
			return fmt.Errorf("Members after a's heartbeat: %+v, %v; want its document put right", ms, err)
		}
		return nil
	})
	if a.Err() != nil {
		t.Fatalf("a lost its membership: %v", a.Err())
	}
}
