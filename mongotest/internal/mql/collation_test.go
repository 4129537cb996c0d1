package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

func mustCollation(t *testing.T, spec bson.D) *Collation {
	t.Helper()
	c, err := ParseCollation(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCollationStrengths(t *testing.T) {
	s1 := mustCollation(t, bson.D{{Key: "locale", Value: "en_US"}, {Key: "strength", Value: int32(1)}})
	s2 := mustCollation(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}})
	s3 := mustCollation(t, bson.D{{Key: "locale", Value: "en"}})
	cases := []struct {
		a, b       any
		c          *Collation
		want       int
		name, hint string
	}{
		{"a", "A", nil, 1, "simple", "bytewise: 'a' (0x61) > 'A' (0x41)"},
		{"a", "A", s2, 0, "strength 2", "case ignored"},
		{"a", "á", s2, -1, "strength 2", "accents count"},
		{"a", "á", s1, 0, "strength 1", "accents ignored"},
		{"a", "A", s3, -1, "strength 3", "lower case first"},
		{"B", "a", s3, 1, "strength 3", "letters before case"},
		{bson.D{{Key: "k", Value: "X"}}, bson.D{{Key: "k", Value: "x"}}, s2, 0, "strength 2", "inside documents"},
		{bson.A{"X", 1}, bson.A{"x", 2}, s2, -1, "strength 2", "arrays element-wise"},
		{"10", "9", mustCollation(t, bson.D{{Key: "locale", Value: "en"}, {Key: "numericOrdering", Value: true}}), 1, "numeric", "digits as numbers"},
		{int32(1), "a", s2, -1, "strength 2", "type order first"},
	}
	for _, c := range cases {
		if got := CompareCollated(c.a, c.b, c.c); got != c.want {
			t.Errorf("%s: compare(%v, %v) = %d, want %d (%s)", c.name, c.a, c.b, got, c.want, c.hint)
		}
	}
}

func TestParseCollationRefusals(t *testing.T) {
	for _, c := range []struct {
		spec bson.D
		code int32
	}{
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "upper"}}, CodeNotImplemented},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "alternate", Value: "shifted"}}, CodeNotImplemented},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(5)}}, CodeNotImplemented},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "caseLevel", Value: true}}, CodeNotImplemented},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(9)}}, mongoerr.CodeBadValue},
		{bson.D{{Key: "locale", Value: "zz_nowhere"}}, mongoerr.CodeBadValue},
		{bson.D{{Key: "locale", Value: "en"}, {Key: "frob", Value: 1}}, 40415},
		{bson.D{{Key: "strength", Value: int32(1)}}, 40414},
		{bson.D{{Key: "locale", Value: "simple"}, {Key: "strength", Value: int32(1)}}, mongoerr.CodeBadValue},
	} {
		_, err := ParseCollation(c.spec)
		e, ok := err.(*Error)
		if !ok || e.Code != c.code {
			t.Errorf("%v: %v, want code %d", c.spec, err, c.code)
		}
	}
	if c, err := ParseCollation(bson.D{{Key: "locale", Value: "simple"}}); c != nil || err != nil {
		t.Errorf("simple: %v %v, want nil (binary comparison)", c, err)
	}
}

func TestCollationInFiltersSortsAndExpressions(t *testing.T) {
	s2 := &Vars{Collation: mustCollation(t, bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}})}
	doc := bson.D{{Key: "s", Value: "PING"}, {Key: "a", Value: bson.A{"X", "y"}}}
	for _, f := range []string{`{"s": "ping"}`, `{"s": {"$in": ["x", "Ping"]}}`, `{"a": "x"}`, `{"s": {"$gte": "pinG"}}`,
		`{"$expr": {"$eq": ["$s", "ping"]}}`, `{"s": {"$ne": "pong"}}`} {
		var fd bson.D
		if err := bson.UnmarshalExtJSON([]byte(f), false, &fd); err != nil {
			t.Fatal(err)
		}
		flt, err := CompileFilter(fd)
		if err != nil {
			t.Fatal(err)
		}
		if !flt.Match(doc, s2) {
			t.Errorf("%s does not match %v under strength 2", f, doc)
		}
		if f != `{"s": {"$ne": "pong"}}` && flt.Match(doc, nil) {
			t.Errorf("%s matches %v without a collation", f, doc)
		}
	}
	x, err := CompileExpr(bson.D{{Key: "$setUnion", Value: bson.A{"$a", bson.A{"x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Eval(doc, s2); err == nil || err.(*Error).Code != CodeNotImplemented {
		t.Errorf("$setUnion under a collation: %v, want NotImplemented", err)
	}
	srt, _ := CompileSort(bson.D{{Key: "s", Value: 1}})
	a, b := bson.D{{Key: "s", Value: "a"}}, bson.D{{Key: "s", Value: "B"}}
	if srt.Less(a, b) || !srt.WithCollation(s2.Collation).Less(a, b) {
		t.Errorf("sort: bytewise 'B' < 'a'; under en 'a' < 'B'")
	}
}
