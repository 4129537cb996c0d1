package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/lease"
)

// A renewal or release whose reply is lost after the server applied it is
// retried by the driver as a retryable write (same lsid and txnNumber). The
// server recognises the retry and answers with the first attempt's result;
// it does not run the write again. Run again, a renewal would find the
// lease expired if time passed in between (so the holder would see ErrLost
// although its renewal succeeded), and a release would find the lease no
// longer its owner's (ErrLost again).

// lostReplyEnv is a store whose first retryable write after arm is applied
// by the server, which then drops the connection without replying
// (onPrimaryTransactionalWrite), and whose client calls onFailed when that
// attempt fails, before the driver retries it.
func lostReplyEnv(t *testing.T, onFailed func()) (e *env, s *lease.Store, arm func(), failed *atomic.Int32) {
	t.Helper()
	e = newEnv(t)
	e.needEmulator(t, "onPrimaryTransactionalWrite fail point and clock")
	failed = new(atomic.Int32)
	mon := &event.CommandMonitor{Failed: func(_ context.Context, ev *event.CommandFailedEvent) {
		if ev.CommandName == "findAndModify" || ev.CommandName == "update" {
			failed.Add(1)
			onFailed()
		}
	}}
	s = e.storeOn(t, e.client(t, "", mon))
	arm = func() { e.srv.FailRetryableWrites(emutest.RetryableWriteFailPoint{Times: 1}) }
	return e, s, arm, failed
}

// TestRenewReplyLost: the renewal's reply is lost, and the lease's ttl
// passes before the driver retries; the retry returns the renewal the
// server made, not ErrLost.
func TestRenewReplyLost(t *testing.T) {
	const ttl = 10 * time.Second
	var srv *emutest.Server
	e, s, arm, failed := lostReplyEnv(t, func() { srv.AdvanceClock(ttl + time.Second) })
	srv = e.srv
	ctx := ctx(t)
	a, err := s.Acquire(ctx, "g", 0, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	srv.AdvanceClock(time.Second) // so that the renewal changes expiresAt
	renewedAt := srv.Now()
	arm()
	r, err := s.Renew(ctx, a, ttl)
	if err != nil {
		t.Fatalf("renew whose reply was lost: %v; want the renewal the server applied", err)
	}
	if failed.Load() != 1 {
		t.Fatalf("%d renew attempts failed, want exactly 1 (the fail point dropped the first reply)", failed.Load())
	}
	if r.Owner != "a" || r.Epoch != a.Epoch || !r.ExpiresAt.Equal(renewedAt.Add(ttl)) {
		t.Fatalf("renew = %+v; want a's lease at epoch %d until %v (the first attempt's $$NOW + ttl)", r, a.Epoch, renewedAt.Add(ttl))
	}
}

// TestReleaseReplyLost: the release's reply is lost; the retry reports the
// release the server made instead of ErrLost, and the lease is free.
func TestReleaseReplyLost(t *testing.T) {
	const ttl = 10 * time.Second
	_, s, arm, failed := lostReplyEnv(t, func() {})
	ctx := ctx(t)
	a, err := s.Acquire(ctx, "g", 0, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	arm()
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("release whose reply was lost: %v; want success", err)
	}
	if failed.Load() != 1 {
		t.Fatalf("%d release attempts failed, want exactly 1", failed.Load())
	}
	got, err := s.Get(ctx, "g", 0)
	if err != nil || got.Owner != "" || got.Epoch != a.Epoch {
		t.Fatalf("after the release: %+v, %v; want free with epoch %d kept", got, err, a.Epoch)
	}
}
