package boltstore

import (
	"fmt"
	"os"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
)

// DefaultLockTimeout is how long Open waits for the file lock by default.
const DefaultLockTimeout = time.Second

// Option configures Open. A bad option makes Open fail with an error
// matching checkpoint.ErrInvalid.
type Option func(*config) error

type config struct {
	lockTimeout time.Duration
	now         func() time.Time
	mode        os.FileMode
}

func defaults() config {
	return config{lockTimeout: DefaultLockTimeout, now: time.Now, mode: 0o600}
}

// LockTimeout sets how long Open waits for the file's lock when another
// process (or another Store in this process) has the file open; then Open
// fails with an error matching ErrLocked. It must be positive: waiting
// forever is not offered.
func LockTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: boltstore option LockTimeout(%v): must be positive", checkpoint.ErrInvalid, d)
		}
		c.lockTimeout = d
		return nil
	}
}

// Clock sets the clock that stamps UpdatedAt (time.Now by default).
func Clock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("%w: boltstore option Clock(nil)", checkpoint.ErrInvalid)
		}
		c.now = now
		return nil
	}
}

// FileMode sets the permissions of a newly created file (0600 by default).
func FileMode(mode os.FileMode) Option {
	return func(c *config) error {
		if mode&^os.ModePerm != 0 || mode&0o600 != 0o600 {
			return fmt.Errorf("%w: boltstore option FileMode(%v): want permission bits including owner read and write", checkpoint.ErrInvalid, mode)
		}
		c.mode = mode
		return nil
	}
}
