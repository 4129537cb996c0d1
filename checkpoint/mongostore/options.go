package mongostore

import (
	"github.com/ferry-io/ferry/internal/mongoname"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// DefaultCollection is the collection New uses unless told otherwise.
const DefaultCollection = "checkpoints"

// DefaultSnapshotsCollection is the collection of snapshot requests (next
// to the checkpoints, in the same database) unless told otherwise.
const DefaultSnapshotsCollection = "snapshots"

// An Option configures New. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one)
// and then validates the result once; its error matches
// checkpoint.ErrInvalid and lists every problem, each naming its option.
// A nil option is a problem. Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	collection string
	snapshots  string
}

func (c *config) validate(p *optcheck.Problems) {
	p.AddErr("Collection", mongoname.Collection(c.collection))
	p.AddErr("SnapshotsCollection", mongoname.Collection(c.snapshots))
	if c.collection == c.snapshots && c.collection != "" {
		p.Add("SnapshotsCollection", "%q is also the checkpoints' Collection; give each its own", c.snapshots)
	}
}

// Collection sets the collection's name (DefaultCollection by default).
func Collection(name string) Option { return option(func(c *config) { c.collection = name }) }

// SnapshotsCollection sets the name of the collection of snapshot requests
// (DefaultSnapshotsCollection by default). It must differ from Collection.
func SnapshotsCollection(name string) Option {
	return option(func(c *config) { c.snapshots = name })
}
