package pubsub

import "github.com/ferry-io/ferry"

// WithFault makes the sink fail an event before publishing it when fault
// returns an error; the error is classified like one from the client.
func WithFault(fault func(*ferry.Event) error) Option {
	return opt(func(c *config) { c.fault = fault })
}

// WithoutPublish makes the sink do everything but the publish (the
// benchmark's baseline).
func WithoutPublish() Option {
	return opt(func(c *config) { c.noPublish = true })
}

// Classify exposes classify to the tests.
var Classify = classify
