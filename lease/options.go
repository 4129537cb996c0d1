package lease

import (
	"log/slog"
	"strings"
	"time"
)

// Defaults used by New and Hold.
const (
	DefaultMembersCollection = "members"
	DefaultLeasesCollection  = "leases"
	// DefaultMemberTimeout is how long a member stays live after its last
	// heartbeat, by the server's clock.
	DefaultMemberTimeout = 10 * time.Second
)

// An Option configures New. A bad option makes New fail with an error
// matching ErrInvalid that names the option.
type Option func(*config) error

type config struct {
	members           string
	leases            string
	memberTimeout     time.Duration
	heartbeatInterval time.Duration // 0: memberTimeout/3
	clock             Clock
	logger            *slog.Logger
}

func defaultConfig() config {
	return config{
		members:       DefaultMembersCollection,
		leases:        DefaultLeasesCollection,
		memberTimeout: DefaultMemberTimeout,
		clock:         systemClock{},
		logger:        slog.New(slog.DiscardHandler),
	}
}

func (c *config) validate() error {
	if c.heartbeatInterval == 0 {
		c.heartbeatInterval = c.memberTimeout / 3
	}
	if c.heartbeatInterval >= c.memberTimeout {
		return invalid("HeartbeatInterval(%v) must be shorter than MemberTimeout(%v)", c.heartbeatInterval, c.memberTimeout)
	}
	return nil
}

func collectionName(option, name string) error {
	switch {
	case name == "":
		return invalid("%s: empty collection name", option)
	case strings.ContainsAny(name, "$\x00"):
		return invalid("%s(%q): a collection name cannot contain '$' or NUL", option, name)
	case strings.HasPrefix(name, "system."):
		return invalid("%s(%q): the system. prefix is reserved", option, name)
	}
	return nil
}

// MembersCollection sets the collection of group members (default
// "members").
func MembersCollection(name string) Option {
	return func(c *config) error {
		if err := collectionName("MembersCollection", name); err != nil {
			return err
		}
		c.members = name
		return nil
	}
}

// LeasesCollection sets the collection of partition leases (default
// "leases").
func LeasesCollection(name string) Option {
	return func(c *config) error {
		if err := collectionName("LeasesCollection", name); err != nil {
			return err
		}
		c.leases = name
		return nil
	}
}

// MemberTimeout sets how long a member stays live after its last heartbeat,
// judged by the server's clock (default 10s, at least 1ms). Each member
// stores its own timeout with its heartbeat, so members configured
// differently still agree on who is live.
func MemberTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return invalid("MemberTimeout: must be at least 1ms, got %v", d)
		}
		c.memberTimeout = d
		return nil
	}
}

// HeartbeatInterval sets how often a member heartbeats (default a third of
// the MemberTimeout). It must be shorter than the timeout.
func HeartbeatInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("HeartbeatInterval: must be positive, got %v", d)
		}
		c.heartbeatInterval = d
		return nil
	}
}

// WithClock replaces the local monotonic clock that Held and Member use to
// judge their own validity (for tests; the default is the system clock). It
// never affects expiry on the server.
func WithClock(clock Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return invalid("WithClock: nil clock")
		}
		c.clock = clock
		return nil
	}
}

// Logger sets where failed background renewals and heartbeats are logged,
// at level Warn (default: discard). Losses are not logged: they are
// reported by Done and Err.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return invalid("Logger: nil logger")
		}
		c.logger = l
		return nil
	}
}

// A HoldOption configures Hold.
type HoldOption func(*holdConfig) error

type holdConfig struct {
	renewInterval time.Duration // 0: ttl/3
	safetyMargin  time.Duration // 0: ttl/5
}

// RenewInterval sets how often a Held renews its lease (default ttl/3).
// After a failed renewal it retries four times as often, until it succeeds
// or the lease can no longer be proven valid. It must be shorter than ttl
// minus the safety margin.
func RenewInterval(d time.Duration) HoldOption {
	return func(c *holdConfig) error {
		if d <= 0 {
			return invalid("RenewInterval: must be positive, got %v", d)
		}
		c.renewInterval = d
		return nil
	}
}

// SafetyMargin sets how long before the lease's TTL, counted from the
// sending of its last successful renewal, a Held stops trusting it (default
// ttl/5). It absorbs clock-rate differences between this process and the
// server, and clock offsets between replica-set members across a failover.
func SafetyMargin(d time.Duration) HoldOption {
	return func(c *holdConfig) error {
		if d <= 0 {
			return invalid("SafetyMargin: must be positive, got %v", d)
		}
		c.safetyMargin = d
		return nil
	}
}

func (c *holdConfig) resolve(ttl time.Duration) error {
	if c.safetyMargin == 0 {
		c.safetyMargin = ttl / 5
	}
	if c.renewInterval == 0 {
		c.renewInterval = ttl / 3
	}
	if c.safetyMargin <= 0 || c.safetyMargin >= ttl {
		return invalid("SafetyMargin(%v) must be positive and shorter than the ttl (%v)", c.safetyMargin, ttl)
	}
	if c.renewInterval <= 0 || c.renewInterval >= ttl-c.safetyMargin {
		return invalid("RenewInterval(%v) must be positive and shorter than ttl (%v) minus SafetyMargin (%v)", c.renewInterval, ttl, c.safetyMargin)
	}
	return nil
}
