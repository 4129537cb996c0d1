package webhook

import "time"

// WithClock replaces the clock used for webhook-timestamp and HTTP-date
// Retry-After values.
func WithClock(now func() time.Time) Option {
	return func(c *config) error { c.now = now; return nil }
}
