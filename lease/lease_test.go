package lease_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/lease"
)

func heldBy(t *testing.T, err error) lease.Lease {
	t.Helper()
	var he *lease.HeldError
	if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("err = %v, want a *HeldError matching ErrHeld", err)
	}
	return he.Current
}

func TestAcquireRenewRelease(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, "")
	ctx := ctx(t)
	const ttl = 10 * time.Second

	a, err := s.Acquire(ctx, "g", 0, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if a.Owner != "a" || a.Epoch != 1 || a.Group != "g" || a.Partition != 0 || a.Expired {
		t.Fatalf("first acquire = %+v, want owner a, epoch 1", a)
	}
	if d := a.ExpiresAt.Sub(a.AcquiredAt); d != ttl {
		t.Fatalf("expiresAt - acquiredAt = %v, want the ttl %v (both from one $$NOW)", d, ttl)
	}
	if e.srv != nil {
		if d := a.ExpiresAt.Sub(e.srv.Now()); d <= ttl-time.Second || d > ttl {
			t.Fatalf("expiresAt is %v after the server's clock, want about %v", d, ttl)
		}
	}
	if cur := heldBy(t, func() error { _, err := s.Acquire(ctx, "g", 0, "b", ttl); return err }()); cur.Owner != "a" || cur.Epoch != 1 || !cur.ExpiresAt.Equal(a.ExpiresAt) {
		t.Fatalf("b's acquire reported holder %+v, want a at epoch 1 until %v", cur, a.ExpiresAt)
	}
	again, err := s.Acquire(ctx, "g", 0, "a", ttl)
	if err != nil || again.Epoch != 1 || !again.AcquiredAt.Equal(a.AcquiredAt) {
		t.Fatalf("a's re-acquire = %+v, %v; want the same tenure (epoch 1)", again, err)
	}
	r, err := s.Renew(ctx, again, ttl)
	if err != nil || r.Epoch != 1 || r.Owner != "a" || r.ExpiresAt.Before(again.ExpiresAt) {
		t.Fatalf("renew = %+v, %v; want epoch 1 and a later expiry", r, err)
	}
	if _, err := s.Renew(ctx, lease.Lease{Group: "g", Partition: 0, Owner: "a", Epoch: 7}, ttl); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew with a wrong epoch: %v, want ErrLost", err)
	}
	if err := s.Release(ctx, lease.Lease{Group: "g", Partition: 0, Owner: "b", Epoch: 1}); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("release by a non-owner: %v, want ErrLost", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "g", 0)
	if err != nil || got.Owner != "" || got.Epoch != 1 || !got.Free() {
		t.Fatalf("after release: %+v, %v; want free with epoch 1 kept", got, err)
	}
	if _, err := s.Renew(ctx, r, ttl); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "released") {
		t.Fatalf("renew after release: %v, want ErrLost saying it was released", err)
	}
	if err := s.Release(ctx, r); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("second release: %v, want ErrLost", err)
	}
	b, err := s.Acquire(ctx, "g", 0, "b", ttl)
	if err != nil || b.Owner != "b" || b.Epoch != 2 {
		t.Fatalf("b's acquire of a released lease = %+v, %v; want epoch 2 at once", b, err)
	}
	if _, err := s.Renew(ctx, r, ttl); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), `"b" holds it at epoch 2`) {
		t.Fatalf("a's renew after b took over: %v, want ErrLost naming b", err)
	}

	if _, err := s.Acquire(ctx, "g", 3, "a", ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "other", 1, "a", ttl); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Partition != 0 || list[0].Owner != "b" || list[1].Partition != 3 || list[1].Owner != "a" || list[0].Expired || list[1].Expired {
		t.Fatalf("List(g) = %+v, want partitions 0 (b) and 3 (a), live", list)
	}
	if _, err := s.Get(ctx, "g", 9); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get of a never-acquired lease: %v, want ErrNotFound", err)
	}
	if list, err := s.List(ctx, "none"); err != nil || len(list) != 0 {
		t.Fatalf("List of an unknown group = %v, %v; want empty", list, err)
	}
}

// TestOwnerNamesAreLiterals: names that look like field paths or variables
// are stored and compared as strings.
func TestOwnerNamesAreLiterals(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, "")
	ctx := ctx(t)
	l, err := s.Acquire(ctx, "$g", 0, "$owner", time.Minute)
	if err != nil || l.Owner != "$owner" || l.Group != "$g" {
		t.Fatalf("acquire as $owner = %+v, %v", l, err)
	}
	if cur := heldBy(t, func() error { _, err := s.Acquire(ctx, "$g", 0, "$$NOW", time.Minute); return err }()); cur.Owner != "$owner" {
		t.Fatalf("holder = %q, want $owner", cur.Owner)
	}
	if _, err := s.Renew(ctx, l, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestEpochIncrementsOnNewTenureOnly follows one partition through owners
// and expiries by the server's clock.
func TestEpochIncrementsOnNewTenureOnly(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control (AdvanceClock)")
	s := e.store(t, "")
	ctx := ctx(t)
	const ttl = 10 * time.Second
	step := func(owner string, wantEpoch int64) lease.Lease {
		t.Helper()
		l, err := s.Acquire(ctx, "g", 1, owner, ttl)
		if err != nil || l.Owner != owner || l.Epoch != wantEpoch {
			t.Fatalf("acquire by %s = %+v, %v; want epoch %d", owner, l, err, wantEpoch)
		}
		return l
	}
	a := step("a", 1)
	step("a", 1) // ours and live: same tenure
	if _, err := s.Renew(ctx, a, ttl); err != nil {
		t.Fatal(err)
	}
	e.srv.AdvanceClock(ttl + time.Second)
	step("b", 2) // expired, new owner
	b := step("b", 2)
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	step("b", 3) // same owner after a release: a new tenure
	e.srv.AdvanceClock(ttl + time.Second)
	step("b", 4) // same owner after an expiry: a new tenure
	heldBy(t, func() error { _, err := s.Acquire(ctx, "g", 1, "a", ttl); return err }())
}

// TestExpiryJudgedByServerClock: only the server's $$NOW decides when a
// lease expires; the test moves it without sleeping.
func TestExpiryJudgedByServerClock(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control (AdvanceClock)")
	s := e.store(t, "")
	ctx := ctx(t)
	const ttl = 10 * time.Second
	a, err := s.Acquire(ctx, "g", 0, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.AdvanceClock(ttl - time.Second)
	heldBy(t, func() error { _, err := s.Acquire(ctx, "g", 0, "b", ttl); return err }())
	if l, err := s.Get(ctx, "g", 0); err != nil || l.Expired {
		t.Fatalf("Get 1s before expiry = %+v, %v; want live", l, err)
	}
	e.srv.AdvanceClock(2 * time.Second)
	list, err := s.List(ctx, "g")
	if err != nil || len(list) != 1 || !list[0].Expired || !list[0].Free() || list[0].Owner != "a" {
		t.Fatalf("List 1s after expiry = %+v, %v; want a's lease, expired", list, err)
	}
	if _, err := s.Renew(ctx, a, ttl); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "expired on the server") {
		t.Fatalf("renew of an expired lease: %v, want ErrLost (expired)", err)
	}
	b, err := s.Acquire(ctx, "g", 0, "b", ttl)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b's acquire after expiry = %+v, %v; want epoch 2", b, err)
	}
}

// TestConcurrentAcquire: 8 acquirers race for each of several fresh
// partitions; exactly one wins each, and every loser is told who.
func TestConcurrentAcquire(t *testing.T) {
	e := newEnv(t)
	ctx := ctx(t)
	const racers = 8
	stores := make([]*lease.Store, racers)
	for i := range stores {
		stores[i] = e.store(t, "")
	}
	for p := range 5 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		leases := make([]lease.Lease, racers)
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				leases[i], errs[i] = stores[i].Acquire(ctx, "race", p, string(rune('a'+i)), time.Minute)
			}()
		}
		close(start)
		wg.Wait()
		winner := ""
		for i, err := range errs {
			if err == nil {
				if winner != "" {
					t.Fatalf("partition %d: both %s and %s acquired it", p, winner, leases[i].Owner)
				}
				winner = leases[i].Owner
				if leases[i].Epoch != 1 {
					t.Fatalf("partition %d: winner's epoch %d, want 1", p, leases[i].Epoch)
				}
			}
		}
		if winner == "" {
			t.Fatalf("partition %d: nobody acquired it: %v", p, errs)
		}
		for _, err := range errs {
			if err != nil {
				if cur := heldBy(t, err); cur.Owner != winner || cur.Epoch != 1 {
					t.Fatalf("partition %d: loser told %+v, want %s at epoch 1", p, cur, winner)
				}
			}
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	e := newEnv(t)
	ctx := ctx(t)
	s := e.store(t, "")
	check := func(name string, err error, field string) {
		t.Helper()
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", name, err, field)
		}
	}
	_, err := lease.New(nil)
	check("New(nil)", err, "database")
	for _, c := range []struct {
		opt   lease.Option
		field string
	}{
		{lease.MembersCollection(""), "MembersCollection"},
		{lease.LeasesCollection("a$b"), "LeasesCollection"},
		{lease.LeasesCollection("system.x"), "LeasesCollection"},
		{lease.MemberTimeout(0), "MemberTimeout"},
		{lease.HeartbeatInterval(-1), "HeartbeatInterval"},
		{lease.WithClock(nil), "WithClock"},
		{nil, "nil option"},
	} {
		_, err := lease.New(e.db, c.opt)
		check(c.field, err, c.field)
	}
	// Validated once, every problem named: a later option overrides an
	// earlier one, and a nil logger means discard.
	_, err = lease.New(e.db, lease.MemberTimeout(0), lease.MemberTimeout(time.Second), lease.Logger(nil),
		lease.MembersCollection(""), lease.HeartbeatInterval(2*time.Second))
	if want := "lease: invalid argument: MembersCollection: empty collection name; " +
		"HeartbeatInterval: 2s must be shorter than MemberTimeout (1s)"; err == nil || err.Error() != want {
		t.Errorf("New = %v, want %q", err, want)
	}
	_, err = lease.New(e.db, lease.MemberTimeout(time.Second), lease.HeartbeatInterval(time.Second))
	check("heartbeat >= timeout", err, "HeartbeatInterval")

	_, err = s.Acquire(ctx, "", 0, "a", time.Second)
	check("empty group", err, "group")
	_, err = s.Acquire(ctx, "g", -1, "a", time.Second)
	check("negative partition", err, "partition")
	_, err = s.Acquire(ctx, "g", 0, "", time.Second)
	check("empty owner", err, "owner")
	_, err = s.Acquire(ctx, "g", 0, "a\x00b", time.Second)
	check("NUL in owner", err, "owner")
	_, err = s.Acquire(ctx, "g", 0, "a", 0)
	check("zero ttl", err, "ttl")
	_, err = s.Renew(ctx, lease.Lease{Group: "g"}, time.Second)
	check("renew without owner", err, "owner")
	check("release without group", s.Release(ctx, lease.Lease{Owner: "a"}), "group")
	_, err = s.List(ctx, "")
	check("list without group", err, "group")
	_, err = s.Hold(ctx, "g", 0, "a", time.Second, lease.RenewInterval(time.Second))
	check("renew interval >= ttl", err, "RenewInterval")
	_, err = s.Hold(ctx, "g", 0, "a", time.Second, lease.SafetyMargin(2*time.Second))
	check("margin >= ttl", err, "SafetyMargin")
	_, err = s.Hold(ctx, "g", 0, "a", time.Second, lease.RenewInterval(-1))
	check("negative renew interval", err, "RenewInterval")
	_, err = s.Join(ctx, "g", "", nil)
	check("empty member id", err, "memberID")
	_, err = s.Join(ctx, "g", "m", bson.D{{Key: "ok", Value: bson.A{bson.D{{Key: "$bad", Value: 1}}}}})
	check("$ in meta", err, "meta.ok.0")
	_, err = s.Members(ctx, "")
	check("members without group", err, "group")
	if l, err := s.List(ctx, "g"); err != nil || len(l) != 0 {
		t.Fatalf("invalid calls wrote something: %v, %v", l, err)
	}
}
