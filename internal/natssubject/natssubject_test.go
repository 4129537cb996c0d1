package natssubject_test

import (
	"testing"

	"github.com/ferry-io/ferry/internal/natssubject"
)

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{"", "empty template"},
		{"ferry.{database}", "unknown placeholder {database} (want {db}, {coll} or {op})"},
		{"ferry.{foo}.>", "unknown placeholder {foo} (want {db}, {coll} or {op})"},
		{"ferry.{}", "unknown placeholder {} (want {db}, {coll} or {op})"},
		{"ferry.{db", "unclosed '{'"},
		{"ferry.db}", "unmatched '}'"},
		{"ferry.*.{db}", "wildcard '*': a publish subject must be literal"},
		{"ferry.{db}.>", "wildcard '>': a publish subject must be literal"},
		{"ferry {db}", "whitespace or control character ' '"},
		{"ferry.\x00{db}", "whitespace or control character '\\x00'"},
		{"ferry..{db}", "empty token (leading, trailing or doubled '.')"},
		{".{db}", "empty token (leading, trailing or doubled '.')"},
		{"ferry.{db}.", "empty token (leading, trailing or doubled '.')"},
	} {
		_, err := natssubject.Parse(c.tmpl)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v, want %q", c.tmpl, err, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	for _, c := range []struct{ tmpl, db, coll, op, want string }{
		{natssubject.Default, "shop", "orders", "update", "ferry.shop.orders.update"},
		{natssubject.Default, "my.db", "a b*c>d", "insert", "ferry.my_db.a_b_c_d.insert"},
		{natssubject.Default, "shop", "", "dropDatabase", "ferry.shop._.dropDatabase"},
		{natssubject.Default, "caf\u00e9", "t\tab", "delete", "ferry.caf\u00e9.t_ab.delete"},
		{"cdc.{op}.{db}-{coll}.v1", "shop", "orders", "insert", "cdc.insert.shop-orders.v1"},
		{"static", "a", "b", "c", "static"},
	} {
		tm, err := natssubject.Parse(c.tmpl)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.tmpl, err)
		}
		if tm.String() != c.tmpl {
			t.Errorf("String = %q, want %q", tm.String(), c.tmpl)
		}
		if got := tm.Render(c.db, c.coll, c.op); got != c.want {
			t.Errorf("%q.Render(%q, %q, %q) = %q, want %q", c.tmpl, c.db, c.coll, c.op, got, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(natssubject.Default)
	f.Add("a.{db}{coll}")
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := natssubject.Parse(s)
		if err != nil {
			return
		}
		// A valid template renders a subject without empty tokens,
		// wildcards or whitespace, whatever the values.
		for _, v := range [][3]string{{"", "", ""}, {".", "*", ">"}, {"a b", "\x00", "\u00e9"}} {
			sub := tm.Render(v[0], v[1], v[2])
			if _, err := natssubject.Parse(sub); err != nil && !containsBrace(sub) {
				t.Fatalf("%q rendered %q: %v", s, sub, err)
			}
		}
	})
}

func containsBrace(s string) bool {
	for _, r := range s {
		if r == '{' || r == '}' {
			return true
		}
	}
	return false
}
