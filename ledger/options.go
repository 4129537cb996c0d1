package ledger

import (
	"math"
	"time"

	"github.com/ferry-io/ferry/internal/mongoname"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// DefaultCollection is the collection New uses unless told otherwise.
const DefaultCollection = "ledger"

// DefaultRetention is how long an entry lives unless told otherwise.
const DefaultRetention = 7 * 24 * time.Hour

// An Option configures New. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one)
// and then validates the result once, before it contacts the server; its
// error matches ErrInvalid and lists every problem, each naming its
// option. A nil option is a problem. Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	collection string
	retention  time.Duration
}

func (c *config) validate(p *optcheck.Problems) {
	p.AddErr("Collection", mongoname.Collection(c.collection))
	if c.retention < time.Second {
		p.Add("Retention", "must be at least 1s, got %v", c.retention)
	} else if secs := (c.retention + time.Second - 1) / time.Second; secs > math.MaxInt32 {
		p.Add("Retention", "must be at most %d seconds, got %v", math.MaxInt32, c.retention)
	}
}

// Collection sets the collection's name (DefaultCollection by default).
func Collection(name string) Option { return option(func(c *config) { c.collection = name }) }

// Retention sets how long an entry is kept after it was applied
// (DefaultRetention by default), rounded up to whole seconds: the
// expireAfterSeconds of the TTL index. It must be at least one second.
//
// Keep it longer than the source's oplog window: an event can be replayed
// only while its resume token is still in the oplog, and the event is older
// than its ledger entry, so no replayable event then outlives its entry.
func Retention(d time.Duration) Option { return option(func(c *config) { c.retention = d }) }

// expireAfterSeconds is the TTL index's value for a retention.
func expireAfterSeconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}
