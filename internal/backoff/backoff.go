// Package backoff is the exponential backoff with jitter that every retry
// and restart path of Ferry uses: no path retries without one.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields delays from Min, doubling up to Max, each spread by jitter
// over [d/2, d]. The zero value is not usable; use New. It is not safe for
// concurrent use.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// New returns a backoff from min to max.
func New(min, max time.Duration) *Backoff {
	return &Backoff{Min: min, Max: max, next: min}
}

// Next returns the next delay and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d <= 0 {
		d = b.Min
	}
	b.next = min(d*2, b.Max)
	return Jitter(d)
}

// Reset starts again from Min.
func (b *Backoff) Reset() { b.next = b.Min }

// Jitter spreads d over [d/2, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// Sleep waits d or until ctx ends; it reports whether d elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
