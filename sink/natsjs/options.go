package natsjs

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/natssubject"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// ErrInvalidOption is wrapped by every error New returns about its
// arguments and options.
var ErrInvalidOption = errors.New("natsjs: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one;
// NATSOptions adds) and then validates the result once; its error matches
// ErrInvalidOption and lists every problem, each naming its option, never
// a credential of the URL. A nil option is a problem. Only this package
// makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	subjectSrc string
	subjectSet bool
	subject    *template // resolved by validate
	canonical  bool
	timeout    time.Duration
	natsOpts   []nats.Option
	// Test hooks (export_test.go).
	fault     func(*ferry.Event) error
	noPublish bool
}

func (c *config) validate(p *optcheck.Problems) {
	if c.subjectSet {
		if t, err := natssubject.Parse(c.subjectSrc); err != nil {
			p.AddErr("Subject", err)
		} else {
			c.subject = &template{t}
		}
	}
	if c.timeout <= 0 {
		p.Add("Timeout", "must be positive, got %v", c.timeout)
	}
	for i, o := range c.natsOpts {
		if o == nil {
			p.Add("NATSOptions", "option %d is nil", i)
		}
	}
}

// Subject sets the subject template (default DefaultSubject); {db},
// {coll} and {op} are replaced by the event's database, collection and
// operation type. The rules are package natssubject's, which `ferry
// validate` applies too: '.'-separated literal tokens (no wildcards, no
// whitespace) and those placeholders.
func Subject(tmpl string) Option {
	return option(func(c *config) { c.subjectSrc, c.subjectSet = tmpl, true })
}

// Canonical renders events as canonical rather than relaxed Extended JSON.
func Canonical() Option { return option(func(c *config) { c.canonical = true }) }

// Timeout bounds each publish, until its ack arrives (default 10s).
func Timeout(d time.Duration) Option { return option(func(c *config) { c.timeout = d }) }

// NATSOptions adds options to nats.Connect (credentials, TLS, name, ...).
// By default the connection is named "ferry" and reconnects forever.
func NATSOptions(opts ...nats.Option) Option {
	return option(func(c *config) { c.natsOpts = append(c.natsOpts, opts...) })
}
