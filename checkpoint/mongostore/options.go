package mongostore

import (
	"fmt"
	"strings"

	"github.com/ferry-io/ferry/checkpoint"
)

// DefaultCollection is the collection New uses unless told otherwise.
const DefaultCollection = "checkpoints"

// Option configures New. A bad option makes New fail with an error matching
// checkpoint.ErrInvalid.
type Option func(*config) error

type config struct {
	collection string
}

// Collection sets the collection's name (DefaultCollection by default).
func Collection(name string) Option {
	return func(c *config) error {
		switch {
		case name == "":
			return fmt.Errorf("%w: mongostore option Collection: empty name", checkpoint.ErrInvalid)
		case strings.ContainsAny(name, "$\x00"):
			return fmt.Errorf("%w: mongostore option Collection(%q): a collection name cannot contain '$' or NUL", checkpoint.ErrInvalid, name)
		case strings.HasPrefix(name, "system."):
			return fmt.Errorf("%w: mongostore option Collection(%q): the system. prefix is reserved", checkpoint.ErrInvalid, name)
		}
		c.collection = name
		return nil
	}
}
