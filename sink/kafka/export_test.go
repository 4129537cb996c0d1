package kafka

import "github.com/ferry-io/ferry"

// WithFault makes the sink fail an event before producing it when fault
// returns an error; the error is classified like one from the client.
func WithFault(fault func(*ferry.Event) error) Option {
	return option(func(c *config) { c.fault = fault })
}

// WithoutProduce makes the sink do everything but the produce (the
// benchmark's baseline).
func WithoutProduce() Option {
	return option(func(c *config) { c.noProduce = true })
}

// Classify exposes classify to the tests.
var Classify = classify
