package webhook

import "time"

// WithClock replaces the clock used for webhook-timestamp and HTTP-date
// Retry-After values.
func WithClock(now func() time.Time) Option {
	return option(func(c *config) { c.now = now })
}
