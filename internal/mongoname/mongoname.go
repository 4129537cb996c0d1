// Package mongoname checks database and collection names with one set of
// rules and messages for every package that takes one: the stores' options
// (leases, members, checkpoints, the ledger), the projection sink's target,
// and the daemon's configuration.
package mongoname

import (
	"errors"
	"fmt"
	"strings"
)

// Collection reports why name cannot be a collection a store writes to,
// or nil: it must not be empty, contain '$' or NUL, or start with the
// reserved prefix "system.".
func Collection(name string) error {
	switch {
	case name == "":
		return errors.New("empty collection name")
	case strings.ContainsAny(name, "$\x00"):
		return fmt.Errorf("a collection name cannot contain '$' or NUL, got %q", name)
	case strings.HasPrefix(name, "system."):
		return fmt.Errorf("the system. prefix is reserved, got %q", name)
	}
	return nil
}

// Database reports why name cannot be a database name, or nil: it must
// not be empty, be longer than 63 bytes, or contain any of / \ . space " $
// * < > : | ? or NUL (MongoDB's rules on every platform).
func Database(name string) error {
	switch {
	case name == "":
		return errors.New("empty database name")
	case len(name) > 63 || strings.ContainsAny(name, "/\\. \"$*<>:|?\x00"):
		return fmt.Errorf("%q is not a valid MongoDB database name (at most 63 bytes, none of / \\ . space \" $ * < > : | ? NUL)", name)
	}
	return nil
}
