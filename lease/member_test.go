package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/lease"
)

const (
	mTimeout   = 10 * time.Second
	mHeartbeat = 3 * time.Second
)

func join(t *testing.T, s *lease.Store, id string, meta bson.D) *lease.Member {
	t.Helper()
	m, err := s.Join(ctx(t), "g", id, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return m
}

func memberIDs(t *testing.T, s *lease.Store) []string {
	t.Helper()
	ms, err := s.Members(ctx(t), "g")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestJoinMembersLeave(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, "")
	a := join(t, s, "a", bson.D{{Key: "zone", Value: "eu"}, {Key: "path", Value: "$x"}})
	join(t, s, "b", nil)
	ms, err := s.Members(ctx(t), "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID != "a" || ms[1].ID != "b" || ms[0].Group != "g" {
		t.Fatalf("Members = %+v, want a and b", ms)
	}
	if got := ms[0].Meta; len(got) != 2 || got[0].Value != "eu" || got[1].Key != "path" || got[1].Value != "$x" {
		t.Fatalf("a's meta = %v, want it stored literally", got)
	}
	if ms[1].Meta != nil {
		t.Fatalf("b's meta = %v, want nil", ms[1].Meta)
	}
	if d := ms[0].ExpiresAt.Sub(ms[0].HeartbeatAt); d != lease.DefaultMemberTimeout || ms[0].JoinedAt.IsZero() {
		t.Fatalf("a: heartbeat %v, expires %v: want expiry = heartbeat + %v", ms[0].HeartbeatAt, ms[0].ExpiresAt, lease.DefaultMemberTimeout)
	}
	if a.ID() != "a" || a.Group() != "g" || a.Err() != nil || isClosed(a.Done()) {
		t.Fatalf("member a: id %q group %q err %v", a.ID(), a.Group(), a.Err())
	}
	if err := a.Leave(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !isClosed(a.Done()) || !errors.Is(a.Err(), lease.ErrReleased) {
		t.Fatalf("after Leave: done %v err %v", isClosed(a.Done()), a.Err())
	}
	if ids := memberIDs(t, s); !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("Members after a left = %v, want [b]", ids)
	}
	if err := a.Leave(ctx(t)); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
}

// TestMemberLivenessByServerClock: a member is live while its last
// heartbeat, by the server's clock, is younger than its timeout.
func TestMemberLivenessByServerClock(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control (AdvanceClock)")
	clkA := newFakeClock(time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC))
	clkB := newFakeClock(time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []lease.Option{lease.MemberTimeout(mTimeout), lease.HeartbeatInterval(mHeartbeat)}
	sa := e.store(t, "", append(opts, lease.WithClock(clkA))...)
	sb := e.store(t, "", append(opts, lease.WithClock(clkB))...)
	a := join(t, sa, "a", nil)
	b := join(t, sb, "b", nil)
	if ids := memberIDs(t, sa); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("Members = %v, want [a b]", ids)
	}
	// a heartbeats 6s after joining; b does not.
	e.srv.AdvanceClock(6 * time.Second)
	clkA.settle(t, a.Done())
	clkA.Advance(mHeartbeat)
	clkA.settle(t, a.Done())
	e.srv.AdvanceClock(4 * time.Second) // b: 10s since its heartbeat, live to the millisecond
	if ids := memberIDs(t, sb); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("Members at b's timeout = %v, want [a b]", ids)
	}
	e.srv.AdvanceClock(time.Second)
	if ids := memberIDs(t, sb); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("Members after b's timeout = %v, want [a]", ids)
	}
	// b's next heartbeat finds its membership expired: lost, for good.
	clkB.settle(t, b.Done())
	clkB.Advance(mHeartbeat)
	select {
	case <-b.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("b's Done not closed after its heartbeat found it expired")
	}
	if err := b.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("b's Err = %v, want ErrLost (expired)", err)
	}
	if a.Err() != nil {
		t.Fatalf("a lost its membership: %v", a.Err())
	}
	// A new member's Join deletes b's dead document.
	join(t, sa, "c", nil)
	if n, err := sa.MembersCollection().CountDocuments(ctx(t), bson.D{}); err != nil || n != 2 {
		t.Fatalf("member documents after c joined = %d, %v; want 2 (b's deleted)", n, err)
	}
}

// memberDoc reads the raw registration of id in group "g".
func memberDoc(t *testing.T, s *lease.Store, id string) bson.M {
	t.Helper()
	var d bson.M
	if err := s.MembersCollection().FindOne(ctx(t), bson.D{{Key: "_id", Value: bson.D{{Key: "group", Value: "g"}, {Key: "member", Value: id}}}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// joinAsync runs Join in the background; its result arrives on the
// returned channel.
func joinAsync(t *testing.T, s *lease.Store, id string, meta bson.D) <-chan joined {
	t.Helper()
	out := make(chan joined, 1)
	go func() {
		m, err := s.Join(ctx(t), "g", id, meta)
		if m != nil {
			t.Cleanup(func() { _ = m.Leave(context.Background()) })
		}
		out <- joined{m, err}
	}()
	return out
}

type joined struct {
	m   *lease.Member
	err error
}

// TestJoinSameIDRefusedWhileLive: a second process joining with the id
// of a live member does not take it: it watches the registration, sees it
// heartbeat, and fails with ErrDuplicateMember naming the id. The first
// member is not disturbed: it keeps its registration, its meta and its
// heartbeats.
func TestJoinSameIDRefusedWhileLive(t *testing.T) {
	e := newEnv(t)
	clkA := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	clkB := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	sa := e.store(t, "", lease.WithClock(clkA))
	first := join(t, sa, "x", bson.D{{Key: "v", Value: 1}})
	res := joinAsync(t, e.store(t, "", lease.WithClock(clkB)), "x", bson.D{{Key: "v", Value: 2}})
	clkB.settle(t, nil) // the second Join watches the registration
	select {
	case r := <-res:
		t.Fatalf("the second Join returned at once (joined %t, err %v); want it to wait for a heartbeat or the expiry", r.m != nil, r.err)
	default:
	}
	// The first member heartbeats.
	clkA.settle(t, first.Done())
	clkA.Advance(lease.DefaultMemberTimeout / 3)
	poll.Until(t, 20*time.Second, func() error {
		if b := memberDoc(t, sa, "x")["beats"]; b != int64(1) {
			return fmt.Errorf("beats = %v, want 1", b)
		}
		return nil
	})
	clkB.Advance(time.Second) // the second Join looks again
	var r joined
	select {
	case r = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("the second Join did not return after the first member heartbeat")
	}
	var dup *lease.DuplicateMemberError
	if r.m != nil || !errors.Is(r.err, lease.ErrDuplicateMember) || !errors.As(r.err, &dup) || dup.Member != "x" || dup.Group != "g" ||
		!strings.Contains(r.err.Error(), `member id "x"`) || !strings.Contains(r.err.Error(), "another live process") {
		t.Fatalf("second Join: joined %t, err %v; want a DuplicateMemberError naming x", r.m != nil, r.err)
	}
	if first.Err() != nil || isClosed(first.Done()) {
		t.Fatalf("the first member was disturbed: %v", first.Err())
	}
	ms, err := sa.Members(ctx(t), "g")
	if err != nil || len(ms) != 1 || ms[0].ID != "x" || ms[0].Meta[0].Value != int32(1) {
		t.Fatalf("Members = %+v, %v; want the first x only", ms, err)
	}
	clkA.settle(t, first.Done())
	clkA.Advance(lease.DefaultMemberTimeout / 3)
	poll.Until(t, 20*time.Second, func() error {
		if b := memberDoc(t, sa, "x")["beats"]; b != int64(2) {
			return fmt.Errorf("beats = %v, want 2", b)
		}
		return nil
	})
	if first.Err() != nil {
		t.Fatalf("the first member lost its membership: %v", first.Err())
	}
}

// TestJoinSameIDAfterCrash: a process restarted with the id of one that
// crashed (its registration still live, but no longer heartbeating) waits
// for that registration to expire by the server's clock — not a
// millisecond longer than its timeout — and then joins in its place; the
// crashed incarnation, were it only paused, would find itself lost.
func TestJoinSameIDAfterCrash(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control (AdvanceClock)")
	clkA := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) // never advanced: its heartbeats stop
	clkB := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []lease.Option{lease.MemberTimeout(mTimeout), lease.HeartbeatInterval(mHeartbeat)}
	crashed := join(t, e.store(t, "", append(opts, lease.WithClock(clkA))...), "x", bson.D{{Key: "v", Value: 1}})
	sb := e.store(t, "", append(opts, lease.WithClock(clkB))...)
	res := joinAsync(t, sb, "x", bson.D{{Key: "v", Value: 2}})
	// Until the crashed registration expires, the restarted process waits.
	for range 10 {
		clkB.settle(t, nil)
		e.srv.AdvanceClock(mTimeout / 10)
		clkB.Advance(time.Second)
	}
	clkB.settle(t, nil) // it looked again at the timeout exactly: live to the millisecond
	select {
	case r := <-res:
		t.Fatalf("joined before the crashed registration expired (joined %t, err %v)", r.m != nil, r.err)
	default:
	}
	e.srv.AdvanceClock(time.Millisecond)
	clkB.Advance(time.Second)
	var r joined
	select {
	case r = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("the restarted process did not join once the crashed registration expired")
	}
	if r.err != nil {
		t.Fatalf("Join after the crashed registration expired: %v", r.err)
	}
	ms, err := sb.Members(ctx(t), "g")
	if err != nil || len(ms) != 1 || ms[0].ID != "x" || ms[0].Meta[0].Value != int32(2) {
		t.Fatalf("Members = %+v, %v; want the restarted x", ms, err)
	}
	// Had the first process only been paused, its next heartbeat finds it
	// replaced, and its Leave does not remove the new registration.
	clkA.settle(t, crashed.Done())
	clkA.Advance(mHeartbeat)
	select {
	case <-crashed.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the replaced member's Done not closed")
	}
	if err := crashed.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("replaced member's Err = %v, want ErrLost", err)
	}
	if err := crashed.Leave(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if ms, err := sb.Members(ctx(t), "g"); err != nil || len(ms) != 1 || ms[0].Meta[0].Value != int32(2) {
		t.Fatalf("Members after the old incarnation's Leave = %+v, %v", ms, err)
	}
}

// TestRejoinSameStoreReplaces: a process whose membership was lost joins
// again through the same Store at once, even while its old registration
// is live; the old incarnation learns at its next heartbeat.
func TestRejoinSameStoreReplaces(t *testing.T) {
	e := newEnv(t)
	clk := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := e.store(t, "", lease.WithClock(clk))
	old := join(t, s, "x", bson.D{{Key: "v", Value: 1}})
	join(t, s, "x", bson.D{{Key: "v", Value: 2}})
	clk.settle(t, old.Done())
	clk.Advance(lease.DefaultMemberTimeout / 3)
	select {
	case <-old.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the replaced member's Done not closed")
	}
	if err := old.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "same id") {
		t.Fatalf("replaced member's Err = %v", err)
	}
	if err := old.Leave(ctx(t)); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Members(ctx(t), "g")
	if err != nil || len(ms) != 1 || ms[0].ID != "x" || ms[0].Meta[0].Value != int32(2) {
		t.Fatalf("Members = %+v, %v; want the newer x only (the old one's Leave must not remove it)", ms, err)
	}
}

// TestMemberLostWhenHeartbeatsFail: without a successful heartbeat for a
// whole timeout by the local clock, the member counts itself lost.
func TestMemberLostWhenHeartbeatsFail(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "Go fail-point API")
	clk := newFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := e.store(t, "m", lease.WithClock(clk), lease.MemberTimeout(mTimeout), lease.HeartbeatInterval(mHeartbeat))
	m := join(t, s, "m", nil)
	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"update"}, ErrorCode: 6, ErrorLabels: []string{}, AppName: "m"})
	defer e.srv.ClearFailPoints()
	for range 3 {
		clk.settle(t, m.Done())
		clk.Advance(mHeartbeat)
	}
	clk.settle(t, m.Done())
	if isClosed(m.Done()) {
		t.Fatalf("lost after %v without heartbeats, before the %v timeout: %v", 3*mHeartbeat, mTimeout, m.Err())
	}
	clk.Advance(mTimeout - 3*mHeartbeat)
	select {
	case <-m.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed a timeout after the last heartbeat")
	}
	if err := m.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "HostUnreachable") {
		t.Fatalf("Err = %v, want ErrLost with the last heartbeat error", err)
	}
}

func TestDefaultMemberID(t *testing.T) {
	hexSuffix := `[0-9a-f]{12}`
	t.Setenv("K_SERVICE", "orders")
	t.Setenv("K_REVISION", "orders-00012-abc")
	id := lease.DefaultMemberID()
	if !regexp.MustCompile(`^orders:orders-00012-abc:` + hexSuffix + `$`).MatchString(id) {
		t.Fatalf("on Cloud Run: %q", id)
	}
	if other := lease.DefaultMemberID(); other == id {
		t.Fatalf("two ids are equal: %q", id)
	}
	t.Setenv("K_SERVICE", "")
	t.Setenv("K_REVISION", "")
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "ferry"
	}
	if id := lease.DefaultMemberID(); !regexp.MustCompile(`^` + regexp.QuoteMeta(host) + `:` + hexSuffix + `$`).MatchString(id) {
		t.Fatalf("off Cloud Run: %q, want %s:<suffix>", id, host)
	}
}

// TestMemberStatus: SetStatus writes what a member reports about itself,
// stored literally and read back by Members; it is checked like meta; a
// new incarnation of the id starts with none; once the member has left,
// or been replaced, the old incarnation can no longer set one.
func TestMemberStatus(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, "")
	a := join(t, s, "a", bson.D{{Key: "zone", Value: "eu"}})
	status := func(id string) bson.D {
		t.Helper()
		ms, err := s.Members(ctx(t), "g")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == id {
				return m.Status
			}
		}
		t.Fatalf("member %s not live", id)
		return nil
	}
	if got := status("a"); got != nil {
		t.Fatalf("status before SetStatus = %v, want nil", got)
	}
	want := bson.D{{Key: "waiting", Value: bson.A{int32(0), int32(2)}}, {Key: "note", Value: "$x"}}
	if err := a.SetStatus(ctx(t), want); err != nil {
		t.Fatal(err)
	}
	if got := status("a"); len(got) != 2 || got[1].Value != "$x" || len(got[0].Value.(bson.A)) != 2 {
		t.Fatalf("status = %v, want %v stored literally", got, want)
	}
	ms, _ := s.Members(ctx(t), "g")
	if ms[0].Meta[0].Value != "eu" {
		t.Fatalf("SetStatus changed the meta: %v", ms[0].Meta)
	}
	for _, bad := range []bson.D{
		{{Key: "$set", Value: 1}},
		{{Key: "a", Value: bson.D{{Key: "b.c", Value: 1}}}},
		{{Key: "big", Value: strings.Repeat("x", lease.MaxStatusSize)}},
	} {
		if err := a.SetStatus(ctx(t), bad); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "status") {
			t.Errorf("SetStatus(%.40v) = %v, want ErrInvalid naming the status", bad, err)
		}
	}
	if got := status("a"); len(got) != 2 {
		t.Fatalf("a refused status was written: %v", got)
	}
	if err := a.SetStatus(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if got := status("a"); got != nil {
		t.Fatalf("status after SetStatus(nil) = %v, want nil", got)
	}
	if err := a.SetStatus(ctx(t), want); err != nil {
		t.Fatal(err)
	}
	// A new incarnation of the id reports nothing; the old one cannot
	// write over it.
	b := join(t, s, "a", nil) // this process joins again
	if got := status("a"); got != nil {
		t.Fatalf("a new incarnation's status = %v, want nil (the old one's must not linger)", got)
	}
	if err := a.SetStatus(ctx(t), want); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("SetStatus by the replaced incarnation = %v, want ErrLost", err)
	}
	if got := status("a"); got != nil {
		t.Fatalf("the replaced incarnation wrote its status: %v", got)
	}
	if err := b.Leave(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStatus(ctx(t), want); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("SetStatus after Leave = %v, want ErrLost", err)
	}
}
