// Package optcheck is the option machinery every Ferry package shares, in
// the style of franz-go's kgo: each package's Option is an interface with
// an unexported apply, its option functions only record values, and its
// constructor applies them in order and validates the result once,
// reporting every problem it finds, each naming the option and the fix.
//
// A package keeps its own Option type and sentinel error; this package
// holds what they share: the list of problems, the walk over the options
// (where a nil option is a problem, not a panic) and the error that lists
// the problems and matches the package's sentinel.
package optcheck

import (
	"errors"
	"fmt"
	"strings"
)

// Problems collects what is wrong with a constructor's arguments and
// options. The zero value is empty and ready to use.
type Problems struct{ list []string }

// Add records a problem with option (the option's function name, such as
// "Timeout", or an argument's name): "Timeout: must be positive, got 0s".
func (p *Problems) Add(option, format string, args ...any) {
	p.list = append(p.list, option+": "+fmt.Sprintf(format, args...))
}

// AddErr records err as a problem with option; a nil err records nothing.
// When err is an *Error (options passed on to another package's
// constructor), each of its problems is recorded under option.
func (p *Problems) AddErr(option string, err error) {
	var e *Error
	switch {
	case err == nil:
	case errors.As(err, &e):
		for _, q := range e.problems {
			p.list = append(p.list, option+": "+q)
		}
	default:
		p.list = append(p.list, option+": "+err.Error())
	}
}

// List returns the problems in the order they were found.
func (p *Problems) List() []string { return append([]string(nil), p.list...) }

// Err returns nil when there is no problem, else an error that lists every
// problem after kind's message and matches kind with errors.Is.
func (p *Problems) Err(kind error) error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{kind: kind, problems: p.List()}
}

// Apply calls apply with each option in order. A nil option is a problem,
// reported by its position, and is skipped.
func Apply[O comparable](p *Problems, opts []O, apply func(O)) {
	var none O
	for i, o := range opts {
		if o == none {
			p.list = append(p.list, fmt.Sprintf("nil option: option %d of %d is nil (leave it out)", i+1, len(opts)))
			continue
		}
		apply(o)
	}
}

// Error lists every problem found in a constructor's arguments and
// options; it matches the package's sentinel (errors.Is).
type Error struct {
	kind     error
	problems []string
}

// Error returns the sentinel's message followed by the problems, "; "
// between them.
func (e *Error) Error() string { return e.kind.Error() + ": " + strings.Join(e.problems, "; ") }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.kind }

// Problems returns the problems, each naming its option.
func (e *Error) Problems() []string { return append([]string(nil), e.problems...) }
