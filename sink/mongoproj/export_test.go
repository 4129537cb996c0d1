package mongoproj

import "github.com/ferry-io/ferry"

// WithFault makes the sink fail an event before writing it when fault
// returns an error; the error is classified like a server's.
func WithFault(fault func(*ferry.Event) error) Option {
	return option(func(c *config) { c.fault = fault })
}

// WithoutWrite makes the sink do everything but the update command (the
// benchmark's baseline).
func WithoutWrite() Option {
	return option(func(c *config) { c.noWrite = true })
}
