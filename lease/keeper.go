package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// keeper is the background loop shared by Held and Member: it renews at an
// interval, retries sooner after a failure, and ends — closing done — when
// the renewal says ErrLost, when it cannot prove validity any more (no
// successful renewal sent within validity), or when it is closed.
//
// Validity is measured on the local monotonic clock from the reading taken
// just BEFORE the last successful renewal was sent. The server computes
// expiry from its own $$NOW, which it reads after receiving the request, so
// the server's deadline is never earlier than ours plus the margin folded
// into validity (as long as the two clocks tick at about the same rate).
type keeper struct {
	clock    Clock
	validity time.Duration
	interval time.Duration
	retry    time.Duration
	renew    func(ctx context.Context) error
	failed   func(err error) // a renewal failed but the loop goes on
	describe string          // "group g partition p epoch e", for errors

	mu     sync.Mutex
	lastOK time.Time // clock reading before the last successful renewal's send
	ended  bool
	err    error
	last   error // the last renewal error since the last success

	stop    chan struct{}
	stopped sync.Once
	cancel  context.CancelFunc
	done    chan struct{}
}

// start launches the loop. lastOK is the clock reading taken before the
// acquire (or join) that the keeper continues.
func (k *keeper) start(ctx context.Context, lastOK time.Time) {
	k.lastOK = lastOK
	k.stop = make(chan struct{})
	k.done = make(chan struct{})
	ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go k.run(ctx)
}

func (k *keeper) deadline() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastOK.Add(k.validity)
}

// valid reports whether the lease is provably still ours by the local
// clock.
func (k *keeper) valid() bool { return k.remaining() > 0 }

// remaining is how much longer the lease is provably ours (0 when not).
func (k *keeper) remaining() time.Duration {
	k.mu.Lock()
	ended, dl := k.ended, k.lastOK.Add(k.validity)
	k.mu.Unlock()
	if ended {
		return 0
	}
	return max(dl.Sub(k.clock.Now()), 0)
}

func (k *keeper) end(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ended {
		k.ended, k.err = true, err
	}
}

func (k *keeper) errValue() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// close stops the loop (aborting a renewal in flight) and waits for it to
// end. The keeper's error becomes err unless it had already ended.
func (k *keeper) close(err error) {
	k.end(err)
	k.stopped.Do(func() {
		close(k.stop)
		k.cancel()
	})
	<-k.done
}

func (k *keeper) run(ctx context.Context) {
	defer close(k.done)
	defer k.cancel()
	next := k.deadline().Add(-k.validity).Add(k.interval)
	for {
		select {
		case <-k.stop:
			return
		default:
		}
		deadline := k.deadline()
		now := k.clock.Now()
		if !now.Before(deadline) {
			k.mu.Lock()
			last := k.last
			k.mu.Unlock()
			msg := fmt.Errorf("%w: %s: no renewal succeeded in the %v after the last successful one was sent, so it can no longer be proven valid", ErrLost, k.describe, k.validity)
			if last != nil {
				msg = fmt.Errorf("%w (last error: %w)", msg, last)
			}
			k.end(msg)
			return
		}
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		if now.Before(wake) {
			select {
			case <-k.stop:
				return
			case <-k.clock.After(wake.Sub(now)):
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, deadline.Sub(now))
		err := k.renew(rctx)
		cancel()
		switch {
		case err == nil:
			k.mu.Lock()
			if now.After(k.lastOK) {
				k.lastOK = now
			}
			k.last = nil
			k.mu.Unlock()
			next = now.Add(k.interval)
		case errors.Is(err, ErrLost):
			k.end(err)
			return
		case ctx.Err() != nil: // closed while renewing
			return
		default:
			k.mu.Lock()
			k.last = err
			k.mu.Unlock()
			k.failed(err)
			next = k.clock.Now().Add(k.retry)
		}
	}
}
