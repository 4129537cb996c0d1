package optcheck

import (
	"errors"
	"slices"
	"testing"
)

var errBad = errors.New("pkg: invalid option")

type option interface{ apply(*[]string) }

type optionFunc func(*[]string)

func (f optionFunc) apply(c *[]string) { f(c) }

func name(s string) option { return optionFunc(func(c *[]string) { *c = append(*c, s) }) }

func TestNoProblemsNoError(t *testing.T) {
	var p Problems
	var got []string
	Apply(&p, []option{name("a"), name("b")}, func(o option) { o.apply(&got) })
	if err := p.Err(errBad); err != nil {
		t.Fatalf("Err = %v, want nil", err)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("applied %v, want [a b] in order", got)
	}
}

func TestEveryProblemNamedAndMatched(t *testing.T) {
	var p Problems
	var got []string
	Apply(&p, []option{name("a"), nil, name("c")}, func(o option) { o.apply(&got) })
	p.Add("Timeout", "must be positive, got %v", 0)
	p.AddErr("Topic", errors.New("empty topic name"))
	p.AddErr("Topic", nil)
	err := p.Err(errBad)
	if !errors.Is(err, errBad) {
		t.Fatalf("errors.Is(%v, sentinel) = false", err)
	}
	want := "pkg: invalid option: nil option: option 2 of 3 is nil (leave it out); Timeout: must be positive, got 0; Topic: empty topic name"
	if err.Error() != want {
		t.Fatalf("Error() =\n%q\nwant\n%q", err.Error(), want)
	}
	var e *Error
	if !errors.As(err, &e) || len(e.Problems()) != 3 {
		t.Fatalf("Problems() = %v, want 3", e.Problems())
	}
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("applied %v, want the non-nil options [a c]", got)
	}
}

func TestAddErrNested(t *testing.T) {
	var inner Problems
	inner.Add("MemberTimeout", "must be at least 1ms")
	inner.Add("HeartbeatInterval", "must be positive")
	var p Problems
	p.AddErr("LeaseOptions", inner.Err(errBad))
	want := []string{"LeaseOptions: MemberTimeout: must be at least 1ms", "LeaseOptions: HeartbeatInterval: must be positive"}
	if !slices.Equal(p.List(), want) {
		t.Fatalf("List() = %q, want %q", p.List(), want)
	}
}
