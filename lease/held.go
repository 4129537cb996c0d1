package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-io/ferry/internal/optcheck"
)

// Held is a lease kept alive in the background, in the manner of etcd's
// concurrency.Session: Hold acquires it, a goroutine renews it every
// RenewInterval, and Done is closed when it is lost or released.
//
// The holder must check Valid (or watch Done) and stop working on the
// partition by itself: Valid turns false once the lease can no longer be
// proven valid by the local monotonic clock — ttl minus SafetyMargin after
// the sending of the last successful renewal — which is before the server
// can let anyone else take it. Every write made under the lease should
// still carry Epoch, for the case where the process is paused between
// checking Valid and writing.
type Held struct {
	s     *Store
	ttl   time.Duration
	k     keeper
	mu    sync.Mutex
	lease Lease

	releaseOnce sync.Once
	releaseErr  error
}

// Hold acquires the lease as Acquire does (ErrHeld when someone else holds
// it) and keeps renewing it until Release or until it is lost. ctx bounds
// the acquire only; the renewals run until Release (they keep ctx's values,
// not its cancellation). Call Release when done with the lease, also after
// it was lost: the goroutine ends by itself on a loss, but a lease given up
// for want of renewals may still be ours on the server, and Release frees
// it for the next owner without waiting for its expiry.
//
// Each renewal is sent with a context whose deadline is the end of the
// lease's provable validity, so the driver retries a renewal that failed
// with a retryable error (a step-down, a network blip) until then.
func (s *Store) Hold(ctx context.Context, group string, partition int, owner string, ttl time.Duration, opts ...HoldOption) (*Held, error) {
	if err := validTTL("ttl", ttl); err != nil {
		return nil, err
	}
	var hc holdConfig
	var p optcheck.Problems
	optcheck.Apply(&p, opts, func(o HoldOption) { o.apply(&hc) })
	hc.validate(&p, ttl)
	if err := p.Err(ErrInvalid); err != nil {
		return nil, err
	}
	sent := s.cfg.clock.Now() // before the request: the server's $$NOW is later
	l, err := s.Acquire(ctx, group, partition, owner, ttl)
	if err != nil {
		return nil, err
	}
	h := &Held{s: s, ttl: ttl, lease: l}
	h.k = keeper{
		clock:    s.cfg.clock,
		validity: ttl - hc.safetyMargin,
		interval: hc.renewInterval,
		retry:    max(hc.renewInterval/4, time.Millisecond),
		renew:    h.renew,
		describe: fmt.Sprintf("group %q partition %d epoch %d", group, partition, l.Epoch),
		failed: func(err error) {
			s.renewFailures.Add(1)
			s.log().Warn("lease: renewal failed", "group", group, "partition", partition, "owner", owner, "epoch", l.Epoch, "err", err)
		},
	}
	h.k.start(ctx, sent)
	return h, nil
}

func (h *Held) renew(ctx context.Context) error {
	h.mu.Lock()
	cur := h.lease
	h.mu.Unlock()
	l, err := h.s.Renew(ctx, cur, h.ttl)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.lease = l
	h.mu.Unlock()
	return nil
}

// Lease returns the lease as of its last successful acquire or renewal.
func (h *Held) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Epoch is the lease's epoch, the fencing token to write with. It never
// changes during a Held's life.
func (h *Held) Epoch() int64 { return h.Lease().Epoch }

// Valid reports whether the lease is provably still held: not lost, not
// released, and less than ttl minus SafetyMargin has passed on the local
// monotonic clock since the sending of the last successful renewal.
func (h *Held) Valid() bool { return h.k.valid() }

// Remaining is how much longer the lease is provably held by the local
// clock (0 once Valid is false): a bound for work started under it.
func (h *Held) Remaining() time.Duration { return h.k.remaining() }

// Done is closed when the lease is lost (Err matches ErrLost) or released
// (Err is ErrReleased), once the renewing goroutine has ended. When renewals
// keep failing it is closed at the moment Valid turns false, or when the
// renewal in flight at that moment returns, whichever is later.
func (h *Held) Done() <-chan struct{} { return h.k.done }

// Err is nil while the lease is held, then says why it ended: an error
// matching ErrLost, or ErrReleased.
func (h *Held) Err() error { return h.k.errValue() }

// Release stops renewing, waits for the renewing goroutine to end, and frees
// the lease on the server (owner null, epoch kept) if it is still ours, so
// that another member can take it over at once. It returns an error only
// when the server could not be told (the lease then expires at its TTL);
// a lease already lost is not an error. Later calls return the first
// call's result.
func (h *Held) Release(ctx context.Context) error {
	h.releaseOnce.Do(func() {
		h.k.close(ErrReleased)
		err := h.s.Release(ctx, h.Lease())
		if err != nil && !errors.Is(err, ErrLost) {
			h.releaseErr = err
		}
	})
	return h.releaseErr
}
