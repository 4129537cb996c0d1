package lease

import (
	"log/slog"
	"time"

	"github.com/ferry-io/ferry/internal/mongoname"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// Defaults used by New and Hold.
const (
	DefaultMembersCollection = "members"
	DefaultLeasesCollection  = "leases"
	// DefaultMemberTimeout is how long a member stays live after its last
	// heartbeat, by the server's clock.
	DefaultMemberTimeout = 10 * time.Second
)

// An Option configures New. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one)
// and then validates the result once; its error matches ErrInvalid and
// lists every problem, each naming its option. A nil option is a problem.
// Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	members           string
	leases            string
	memberTimeout     time.Duration
	heartbeatInterval time.Duration // 0: memberTimeout/3
	heartbeatSet      bool
	clock             Clock
	logger            *slog.Logger
}

func defaultConfig() config {
	return config{
		members:       DefaultMembersCollection,
		leases:        DefaultLeasesCollection,
		memberTimeout: DefaultMemberTimeout,
		clock:         systemClock{},
	}
}

// validate records every problem in p and resolves the defaults that
// depend on other options.
func (c *config) validate(p *optcheck.Problems) {
	p.AddErr("MembersCollection", mongoname.Collection(c.members))
	p.AddErr("LeasesCollection", mongoname.Collection(c.leases))
	if c.clock == nil {
		p.Add("WithClock", "nil clock (leave the option out for the system clock)")
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.memberTimeout < time.Millisecond {
		p.Add("MemberTimeout", "must be at least 1ms, got %v", c.memberTimeout)
		return
	}
	switch {
	case !c.heartbeatSet:
		c.heartbeatInterval = c.memberTimeout / 3
	case c.heartbeatInterval <= 0:
		p.Add("HeartbeatInterval", "must be positive, got %v", c.heartbeatInterval)
	case c.heartbeatInterval >= c.memberTimeout:
		p.Add("HeartbeatInterval", "%v must be shorter than MemberTimeout (%v)", c.heartbeatInterval, c.memberTimeout)
	}
}

// MembersCollection sets the collection of group members (default
// "members").
func MembersCollection(name string) Option { return option(func(c *config) { c.members = name }) }

// LeasesCollection sets the collection of partition leases (default
// "leases").
func LeasesCollection(name string) Option { return option(func(c *config) { c.leases = name }) }

// MemberTimeout sets how long a member stays live after its last heartbeat,
// judged by the server's clock (default 10s, at least 1ms). Each member
// stores its own timeout with its heartbeat, so members configured
// differently still agree on who is live.
func MemberTimeout(d time.Duration) Option { return option(func(c *config) { c.memberTimeout = d }) }

// HeartbeatInterval sets how often a member heartbeats (default a third of
// the MemberTimeout). It must be positive and shorter than the timeout.
func HeartbeatInterval(d time.Duration) Option {
	return option(func(c *config) { c.heartbeatInterval, c.heartbeatSet = d, true })
}

// WithClock replaces the local monotonic clock that Held and Member use to
// judge their own validity (for tests; the default is the system clock). It
// never affects expiry on the server.
func WithClock(clock Clock) Option { return option(func(c *config) { c.clock = clock }) }

// Logger sets where failed background renewals and heartbeats are logged,
// at level Warn (default, and when l is nil: discard). Losses are not
// logged: they are reported by Done and Err.
func Logger(l *slog.Logger) Option { return option(func(c *config) { c.logger = l }) }

// A HoldOption configures Hold, as an Option configures New: Hold
// validates the result once, against the ttl, before it sends anything.
type HoldOption interface{ apply(*holdConfig) }

type holdOption func(*holdConfig)

func (f holdOption) apply(c *holdConfig) { f(c) }

type holdConfig struct {
	renewInterval time.Duration // 0: ttl/3
	renewSet      bool
	safetyMargin  time.Duration // 0: ttl/5
	marginSet     bool
}

// RenewInterval sets how often a Held renews its lease (default ttl/3).
// After a failed renewal it retries four times as often, until it succeeds
// or the lease can no longer be proven valid. It must be positive and
// shorter than ttl minus the safety margin.
func RenewInterval(d time.Duration) HoldOption {
	return holdOption(func(c *holdConfig) { c.renewInterval, c.renewSet = d, true })
}

// SafetyMargin sets how long before the lease's TTL, counted from the
// sending of its last successful renewal, a Held stops trusting it (default
// ttl/5). It absorbs clock-rate differences between this process and the
// server, and clock offsets between replica-set members across a failover.
// It must be positive and shorter than the ttl.
func SafetyMargin(d time.Duration) HoldOption {
	return holdOption(func(c *holdConfig) { c.safetyMargin, c.marginSet = d, true })
}

// validate records every problem in p and resolves the defaults from ttl
// (already checked).
func (c *holdConfig) validate(p *optcheck.Problems, ttl time.Duration) {
	if !c.marginSet {
		c.safetyMargin = ttl / 5
	}
	if !c.renewSet {
		c.renewInterval = ttl / 3
	}
	marginOK := c.safetyMargin > 0 && c.safetyMargin < ttl
	if !marginOK {
		p.Add("SafetyMargin", "%v must be positive and shorter than the ttl (%v)", c.safetyMargin, ttl)
	}
	switch {
	case c.renewInterval <= 0:
		p.Add("RenewInterval", "must be positive, got %v", c.renewInterval)
	case marginOK && c.renewInterval >= ttl-c.safetyMargin:
		p.Add("RenewInterval", "%v must be shorter than the ttl (%v) minus SafetyMargin (%v)", c.renewInterval, ttl, c.safetyMargin)
	}
}
