package boltstore

import (
	"os"
	"time"

	"github.com/ferry-io/ferry/internal/optcheck"
)

// DefaultLockTimeout is how long Open waits for the file lock by default.
const DefaultLockTimeout = time.Second

// An Option configures Open. Option functions only record their values:
// Open applies the options in order (a later one overrides an earlier
// one) and then validates the result once, before it opens the file; its
// error matches checkpoint.ErrInvalid and lists every problem, each
// naming its option. A nil option is a problem. Only this package makes
// Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	lockTimeout time.Duration
	now         func() time.Time
	mode        os.FileMode
}

func defaults() config {
	return config{lockTimeout: DefaultLockTimeout, now: time.Now, mode: 0o600}
}

func (c *config) validate(p *optcheck.Problems) {
	if c.lockTimeout <= 0 {
		p.Add("LockTimeout", "must be positive (waiting forever is not offered), got %v", c.lockTimeout)
	}
	if c.now == nil {
		p.Add("Clock", "nil clock (leave the option out for time.Now)")
	}
	if c.mode&^os.ModePerm != 0 || c.mode&0o600 != 0o600 {
		p.Add("FileMode", "want permission bits including owner read and write (0600), got %v", c.mode)
	}
}

// LockTimeout sets how long Open waits for the file's lock when another
// process (or another Store in this process) has the file open; then Open
// fails with an error matching ErrLocked. It must be positive: waiting
// forever is not offered.
func LockTimeout(d time.Duration) Option { return option(func(c *config) { c.lockTimeout = d }) }

// Clock sets the clock that stamps UpdatedAt (time.Now by default).
func Clock(now func() time.Time) Option { return option(func(c *config) { c.now = now }) }

// FileMode sets the permissions of a newly created file (0600 by default);
// they must include owner read and write.
func FileMode(mode os.FileMode) Option { return option(func(c *config) { c.mode = mode }) }
