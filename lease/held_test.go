package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/lease"
)

// ttl, renewal and margin of the Held tests: renew every 3s, valid for 8s
// after the last successful renewal was sent, expired on the server 10s
// after the server received it.
const (
	hTTL    = 10 * time.Second
	hRenew  = 3 * time.Second
	hMargin = 2 * time.Second
)

// heldStart is where the local clocks of the Held tests start.
var heldStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// heldEnv starts a Held test that needs the emulator (for why): the holder's
// store, with application name app, runs on the fake clock clk; other, with
// application name otherApp, is a competing member's store on real time.
func heldEnv(t *testing.T, why, app, otherApp string) (e *env, clk *fakeClock, s, other *lease.Store) {
	t.Helper()
	e = newEnv(t)
	e.needEmulator(t, why)
	clk = newFakeClock(heldStart)
	s = e.store(t, app, lease.WithClock(clk))
	other = e.store(t, otherApp)
	return e, clk, s, other
}

// waitDone fails the test with msg unless h's Done channel closes within
// 20s.
func waitDone(t *testing.T, h *lease.Held, msg string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(20 * time.Second):
		t.Fatal(msg)
	}
}

func hold(t *testing.T, s *lease.Store, partition int, owner string) *lease.Held {
	t.Helper()
	h, err := s.Hold(ctx(t), "g", partition, owner, hTTL, lease.RenewInterval(hRenew), lease.SafetyMargin(hMargin))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	return h
}

// TestHeldRenewsInBackground: the renewal extends the lease on the server,
// and Release frees it at once for another owner.
func TestHeldRenewsInBackground(t *testing.T) {
	e, clk, s, other := heldEnv(t, "clock control (AdvanceClock)", "", "")
	ctx := ctx(t)

	h := hold(t, s, 0, "a")
	first := h.Lease()
	if h.Epoch() != 1 || !h.Valid() || h.Remaining() != hTTL-hMargin || isClosed(h.Done()) || h.Err() != nil {
		t.Fatalf("new Held: epoch %d valid %v remaining %v err %v", h.Epoch(), h.Valid(), h.Remaining(), h.Err())
	}
	clk.settle(t, h.Done())
	e.srv.AdvanceClock(hRenew)
	clk.Advance(hRenew) // the renewal is due
	clk.settle(t, h.Done())
	renewed := h.Lease()
	if got := renewed.ExpiresAt.Sub(first.ExpiresAt); got < hRenew {
		t.Fatalf("the renewal moved expiresAt by %v, want at least %v", got, hRenew)
	}
	if h.Remaining() != hTTL-hMargin {
		t.Fatalf("Remaining after a renewal = %v, want %v (counted from the renewal's send)", h.Remaining(), hTTL-hMargin)
	}
	// 11s after the acquire, but only 8s after the renewal: still a's.
	e.srv.AdvanceClock(hTTL - hRenew + time.Second)
	if cur := heldBy(t, func() error { _, err := other.Acquire(ctx, "g", 0, "b", hTTL); return err }()); cur.Owner != "a" || cur.Epoch != 1 {
		t.Fatalf("holder = %+v, want a at epoch 1", cur)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !isClosed(h.Done()) || h.Valid() || !errors.Is(h.Err(), lease.ErrReleased) {
		t.Fatalf("after Release: done %v valid %v err %v", isClosed(h.Done()), h.Valid(), h.Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	b, err := other.Acquire(ctx, "g", 0, "b", hTTL)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b's acquire after Release = %+v, %v; want epoch 2 without waiting for expiry", b, err)
	}
}

// TestHeldSelfFencesBeforeServerExpiry: when every renewal fails, the
// holder stops trusting its lease ttl-margin after the last successful
// send, while the server still counts it as the holder's.
func TestHeldSelfFencesBeforeServerExpiry(t *testing.T) {
	e, clk, s, other := heldEnv(t, "Go fail-point API", "a", "b")
	ctx := ctx(t)

	h := hold(t, s, 0, "a")
	// ShutdownInProgress, as during a step-down. Without the
	// RetryableWriteError label the driver does not retry it within the
	// attempt's deadline (it would, until the end of validity, in real time).
	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"findAndModify"}, ErrorCode: 91, ErrorLabels: []string{}, AppName: "a"})
	defer e.srv.ClearFailPoints()
	clk.settle(t, h.Done())
	for elapsed := time.Duration(0); elapsed < hTTL-hMargin-2*time.Second; {
		clk.Advance(2 * time.Second) // a renewal (or a retry) is due at every step
		elapsed += 2 * time.Second
		clk.settle(t, h.Done())
		if !h.Valid() || isClosed(h.Done()) {
			t.Fatalf("%v after the acquire, with renewals failing: valid %v, done %v; want still valid until %v", elapsed, h.Valid(), isClosed(h.Done()), hTTL-hMargin)
		}
	}
	clk.Advance(2 * time.Second) // ttl - margin since the acquire was sent
	waitDone(t, h, "Done not closed ttl-margin after the last successful renewal")
	if h.Valid() || h.Remaining() != 0 {
		t.Fatal("Valid after ttl-margin without a renewal")
	}
	if err := h.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "ShutdownInProgress") {
		t.Fatalf("Err = %v, want ErrLost with the renewals' last error", err)
	}
	// The server still counts the lease as a's: nobody could have taken
	// it while a believed it valid, nor yet.
	if l, err := other.Get(ctx, "g", 0); err != nil || l.Expired || l.Owner != "a" {
		t.Fatalf("server's view when a gave up: %+v, %v; want a's live lease", l, err)
	}
	heldBy(t, func() error { _, err := other.Acquire(ctx, "g", 0, "b", hTTL); return err }())
	// A Release after the loss still frees the lease on the server.
	e.srv.ClearFailPoints()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(h.Err(), lease.ErrLost) {
		t.Fatalf("Err after Release of a lost lease = %v, want it still to say lost", h.Err())
	}
	if b, err := other.Acquire(ctx, "g", 0, "b", hTTL); err != nil || b.Epoch != 2 {
		t.Fatalf("b's acquire = %+v, %v; want epoch 2", b, err)
	}
}

// TestHeldLostToNewOwner: a holder that was paused past its lease (its
// clock did not move, the server's did) learns at its next renewal that
// another owner took over.
func TestHeldLostToNewOwner(t *testing.T) {
	e, clk, s, other := heldEnv(t, "clock control (AdvanceClock)", "", "")
	ctx := ctx(t)
	h := hold(t, s, 2, "a")
	e.srv.AdvanceClock(hTTL + time.Second)
	b, err := other.Acquire(ctx, "g", 2, "b", hTTL)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b's acquire = %+v, %v", b, err)
	}
	clk.settle(t, h.Done())
	clk.Advance(hRenew)
	waitDone(t, h, "Done not closed after the renewal found the lease taken")
	if err := h.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), `"b" holds it at epoch 2`) || h.Valid() {
		t.Fatalf("Err = %v, valid %v; want ErrLost naming b", err, h.Valid())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	if l, err := other.Get(ctx, "g", 2); err != nil || l.Owner != "b" {
		t.Fatalf("a's Release changed b's lease: %+v, %v", l, err)
	}
}

// TestValidityCountsFromBeforeTheSend: the time a request spends in
// flight counts against the holder, because the server starts the TTL at
// its own $$NOW, later than the send.
func TestValidityCountsFromBeforeTheSend(t *testing.T) {
	e := newEnv(t)
	clk := newFakeClock(heldStart)
	const inFlight = 2 * time.Second // less than hRenew: no renewal is due yet
	var once sync.Once
	mon := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "findAndModify" {
			once.Do(func() { clk.Advance(inFlight) }) // a slow network, on the local clock
		}
	}}
	s := e.storeOn(t, e.client(t, "", mon), lease.WithClock(clk))
	h := hold(t, s, 0, "a")
	if got, want := h.Remaining(), hTTL-hMargin-inFlight; got != want {
		t.Fatalf("Remaining after a %v acquire = %v, want %v", inFlight, got, want)
	}
}

// TestSkewedClocksNeverTwoOwners: two members whose local clocks are years
// apart, the holder's renewals failing, time moving at the same rate for
// all: at no instant are both holders valid, and the other member takes
// over only after the holder has stopped trusting its lease.
func TestSkewedClocksNeverTwoOwners(t *testing.T) {
	e := newEnv(t)
	e.needEmulator(t, "clock control and Go fail-point API")
	clkA := newFakeClock(time.Date(2040, 6, 1, 12, 0, 0, 0, time.UTC)) // far ahead
	clkB := newFakeClock(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))  // far behind
	sa := e.store(t, "a", lease.WithClock(clkA))
	sb := e.store(t, "b", lease.WithClock(clkB))
	ctx := ctx(t)

	ha := hold(t, sa, 0, "a")
	if _, err := sb.Hold(ctx, "g", 0, "b", hTTL); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("b's Hold while a holds: %v, want ErrHeld", err)
	}
	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"findAndModify"}, ErrorCode: 6, ErrorLabels: []string{}, AppName: "a"})
	defer e.srv.ClearFailPoints()
	var hb *lease.Held
	aInvalidAt, bAt := time.Duration(-1), time.Duration(-1)
	const step = 500 * time.Millisecond
	for elapsed := step; elapsed <= 2*hTTL; elapsed += step {
		clkA.settle(t, ha.Done())
		e.srv.AdvanceClock(step)
		clkA.Advance(step)
		clkB.Advance(step)
		clkA.settle(t, ha.Done())
		if hb == nil {
			h, err := sb.Hold(ctx, "g", 0, "b", hTTL, lease.RenewInterval(hRenew), lease.SafetyMargin(hMargin))
			switch {
			case err == nil:
				hb, bAt = h, elapsed
				t.Cleanup(func() { _ = h.Release(context.Background()) })
			case !errors.Is(err, lease.ErrHeld):
				t.Fatal(err)
			}
		}
		if ha.Valid() && hb != nil && hb.Valid() {
			t.Fatalf("%v: a and b both hold valid leases (epochs %d, %d)", elapsed, ha.Epoch(), hb.Epoch())
		}
		if !ha.Valid() && aInvalidAt < 0 {
			aInvalidAt = elapsed
		}
	}
	if aInvalidAt != hTTL-hMargin {
		t.Fatalf("a stopped trusting its lease %v after acquiring it, want %v", aInvalidAt, hTTL-hMargin)
	}
	if bAt <= hTTL || hb.Epoch() != 2 {
		t.Fatalf("b took over %v after a's acquire at epoch %d; want after the ttl (%v), epoch 2", bAt, hb.Epoch(), hTTL)
	}
}
