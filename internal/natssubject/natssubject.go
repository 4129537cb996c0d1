// Package natssubject parses and renders the subject templates of the NATS
// JetStream sink (sink/natsjs). It is shared with package config, so that
// `ferry validate` applies exactly the rules the sink applies at run time,
// without config importing the sink and its broker client.
//
// A template is a publish subject in which {db}, {coll} and {op} stand for
// the event's database, collection and operation type:
//
//	ferry.{db}.{coll}.{op}
//	cdc.{db}-{coll}.{op}.v1
//
// The literal text must not contain the wildcards '*' and '>' (a publish
// subject is literal), whitespace or control characters, and no token may be
// empty (no leading, trailing or doubled '.'). Rendered values have every
// character a subject token cannot hold ('.', '*', '>', whitespace, control
// characters) replaced by '_'; an empty value becomes "_".
package natssubject

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Default is the template used when none is configured.
const Default = "ferry.{db}.{coll}.{op}"

// Template is a parsed subject template: literal parts and placeholders.
type Template struct {
	src   string
	parts []part
}

type part struct {
	lit   string
	field string // "db", "coll" or "op"; empty for a literal
}

// Parse parses and validates a subject template. Its errors say what is
// wrong without repeating the template.
func Parse(src string) (*Template, error) {
	if src == "" {
		return nil, errors.New("empty template")
	}
	t := &Template{src: src}
	rest := src
	for rest != "" {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if rest[i] == '}' {
			return nil, errors.New("unmatched '}'")
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, errors.New("unclosed '{'")
		}
		name := rest[i+1 : i+j]
		switch name {
		case "db", "coll", "op":
		default:
			return nil, fmt.Errorf("unknown placeholder {%s} (want {db}, {coll} or {op})", name)
		}
		t.parts = append(t.parts, part{field: name})
		rest = rest[i+j+1:]
	}
	for _, p := range t.parts {
		if p.field != "" {
			continue
		}
		for _, r := range p.lit {
			if r == '*' || r == '>' {
				return nil, fmt.Errorf("wildcard %q: a publish subject must be literal", r)
			}
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				return nil, fmt.Errorf("whitespace or control character %q", r)
			}
		}
	}
	// Placeholders always render non-empty, so only the literals can make
	// an empty token.
	sample := t.Render("db", "coll", "op")
	for _, tok := range strings.Split(sample, ".") {
		if tok == "" {
			return nil, errors.New("empty token (leading, trailing or doubled '.')")
		}
	}
	return t, nil
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// Render returns the subject for an event of database db, collection coll
// and operation type op.
func (t *Template) Render(db, coll, op string) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.field {
		case "":
			b.WriteString(p.lit)
		case "db":
			writeToken(&b, db)
		case "coll":
			writeToken(&b, coll)
		case "op":
			writeToken(&b, op)
		}
	}
	return b.String()
}

// writeToken writes v with every character a subject token cannot hold
// replaced by '_'; an empty v becomes "_".
func writeToken(b *strings.Builder, v string) {
	if v == "" {
		b.WriteByte('_')
		return
	}
	for _, r := range v {
		if r == '.' || r == '*' || r == '>' || r == unicode.ReplacementChar || unicode.IsSpace(r) || unicode.IsControl(r) {
			b.WriteByte('_')
			continue
		}
		b.WriteRune(r)
	}
}
