package mql_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// The $toHashedIndexKey expression operator registered in
// op_hashedindexkey.go, evaluated through the mql expression
// engine the emulator uses for $match/$expr.
func TestToHashedIndexKeyOperator(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("010203040506070809101112")
	doc := bson.D{
		{Key: "val", Value: "string to hash"},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: oid}}},
		{Key: "n", Value: 42.9},
	}
	cases := []struct {
		expr string
		want any
	}{
		// MongoDB manual, $toHashedIndexKey example.
		{`{"$toHashedIndexKey": "$val"}`, int64(763543691661428748)},
		// src/mongo/db/hasher_test.cpp vectors.
		{`{"$toHashedIndexKey": "$documentKey._id"}`, int64(-5588663249627035708)},
		{`{"$toHashedIndexKey": "$n"}`, int64(-944302157085130861)},
		{`{"$toHashedIndexKey": null}`, int64(2338878944348059895)},
		// Missing hashes like null.
		{`{"$toHashedIndexKey": "$nope"}`, int64(2338878944348059895)},
		{`{"$toHashedIndexKey": ["$val"]}`, int64(763543691661428748)},
		// The partition expression Ferry uses: |-5588663249627035708 mod 7|.
		{`{"$abs": {"$mod": [{"$toHashedIndexKey": "$documentKey._id"}, 7]}}`, int64(-5588663249627035708 % 7 * -1)},
	}
	for _, c := range cases {
		var spec bson.D
		if err := bson.UnmarshalExtJSON([]byte(`{"e": `+c.expr+`}`), false, &spec); err != nil {
			t.Fatal(err)
		}
		e, err := mql.CompileExpr(spec[0].Value)
		if err != nil {
			t.Fatalf("%s: compile: %v", c.expr, err)
		}
		got, err := e.Eval(doc, nil)
		if err != nil {
			t.Fatalf("%s: eval: %v", c.expr, err)
		}
		if got != c.want {
			t.Errorf("%s = %#v, want %#v", c.expr, got, c.want)
		}
	}
	var spec bson.D
	_ = bson.UnmarshalExtJSON([]byte(`{"e": {"$toHashedIndexKey": [1, 2]}}`), false, &spec)
	if _, err := mql.CompileExpr(spec[0].Value); err == nil {
		t.Error("two arguments: no error")
	}
}
