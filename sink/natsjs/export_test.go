package natsjs

import "github.com/ferry-io/ferry"

// WithFault makes the sink fail an event before publishing it when fault
// returns an error; the error is classified like one from the server.
func WithFault(fault func(*ferry.Event) error) Option {
	return option(func(c *config) { c.fault = fault })
}

// WithoutPublish makes the sink do everything but the publish (the
// benchmark's baseline).
func WithoutPublish() Option {
	return option(func(c *config) { c.noPublish = true })
}

// Flush makes a round trip to the server on the sink's connection: once it
// returned, the server has routed every message the sink published before
// (to core subscribers too). A closed sink has nothing in flight.
func (s *Sink) Flush() error {
	s.mu.RLock()
	nc := s.nc
	s.mu.RUnlock()
	if nc == nil {
		return nil
	}
	return nc.Flush()
}
