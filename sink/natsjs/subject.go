package natsjs

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/ferry-io/ferry"
)

// template is a parsed subject template: literal parts and placeholders.
type template struct {
	src   string
	parts []part
}

type part struct {
	lit   string
	field string // "db", "coll" or "op"; empty for a literal
}

// parseTemplate parses and validates a subject template.
func parseTemplate(src string) (*template, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("natsjs: Subject(%q): %s", src, fmt.Sprintf(format, args...))
	}
	if src == "" {
		return nil, bad("empty template")
	}
	t := &template{src: src}
	rest := src
	for rest != "" {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if rest[i] == '}' {
			return nil, bad("unmatched '}'")
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, bad("unclosed '{'")
		}
		name := rest[i+1 : i+j]
		switch name {
		case "db", "coll", "op":
		default:
			return nil, bad("unknown placeholder {%s} (want {db}, {coll} or {op})", name)
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
				return nil, bad("wildcard %q: a publish subject must be literal", r)
			}
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				return nil, bad("whitespace or control character %q", r)
			}
		}
	}
	// Placeholders always render non-empty, so only the literals can make
	// an empty token.
	sample := t.renderValues("db", "coll", "op")
	for _, tok := range strings.Split(sample, ".") {
		if tok == "" {
			return nil, bad("empty token (leading, trailing or doubled '.')")
		}
	}
	return t, nil
}

// render returns the subject of an event.
func (t *template) render(ev *ferry.Event) string {
	return t.renderValues(ev.Namespace.DB, ev.Namespace.Coll, ev.OperationType)
}

func (t *template) renderValues(db, coll, op string) string {
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
