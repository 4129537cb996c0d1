// Package mongoname checks the names of the collections Ferry's stores
// keep their state in (leases, members, checkpoints, the ledger), with one
// set of rules and messages for every store's option.
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
