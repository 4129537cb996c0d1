package ledger

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// DefaultCollection is the collection New uses unless told otherwise.
const DefaultCollection = "ledger"

// DefaultRetention is how long an entry lives unless told otherwise.
const DefaultRetention = 7 * 24 * time.Hour

// Option configures New. A bad option makes New fail with an error matching
// ErrInvalid.
type Option func(*config) error

type config struct {
	collection string
	retention  time.Duration
}

// Collection sets the collection's name (DefaultCollection by default).
func Collection(name string) Option {
	return func(c *config) error {
		switch {
		case name == "":
			return fmt.Errorf("%w: ledger option Collection: empty name", ErrInvalid)
		case strings.ContainsAny(name, "$\x00"):
			return fmt.Errorf("%w: ledger option Collection(%q): a collection name cannot contain '$' or NUL", ErrInvalid, name)
		case strings.HasPrefix(name, "system."):
			return fmt.Errorf("%w: ledger option Collection(%q): the system. prefix is reserved", ErrInvalid, name)
		}
		c.collection = name
		return nil
	}
}

// Retention sets how long an entry is kept after it was applied
// (DefaultRetention by default), rounded up to whole seconds: the
// expireAfterSeconds of the TTL index. It must be at least one second.
//
// Keep it longer than the source's oplog window: an event can be replayed
// only while its resume token is still in the oplog, and the event is older
// than its ledger entry, so no replayable event then outlives its entry.
func Retention(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("%w: ledger option Retention(%v): must be at least 1s", ErrInvalid, d)
		}
		if secs := (d + time.Second - 1) / time.Second; secs > math.MaxInt32 {
			return fmt.Errorf("%w: ledger option Retention(%v): more than %d seconds", ErrInvalid, d, math.MaxInt32)
		}
		c.retention = d
		return nil
	}
}

// expireAfterSeconds is the TTL index's value for a retention.
func expireAfterSeconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}
