package mongoproj

import "github.com/ferry-io/ferry"

// WithFault makes the sink fail an event before writing it when fault
// returns an error; the error is classified like a server's.
func WithFault(fault func(*ferry.Event) error) Option {
	return func(c *config) error { c.fault = fault; return nil }
}

// WithoutWrite makes the sink do everything but the update command (the
// benchmark's baseline).
func WithoutWrite() Option {
	return func(c *config) error { c.noWrite = true; return nil }
}
