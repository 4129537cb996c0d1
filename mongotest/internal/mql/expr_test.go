package mql

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestExprEval(t *testing.T) {
	const doc = `{"_id": 1, "a": 5, "b": {"$numberLong": "3"}, "f": 2.5, "s": "Hello", "n": null,
		"arr": [1, 2, 3], "docs": [{"x": 1}, {"x": 2}, {"y": 3}, 7], "sub": {"c": {"d": 4}},
		"nested": [{"in": [{"v": 1}, {"v": 2}]}, {"in": {"v": 3}}],
		"dt": {"$date": "2021-01-01T00:00:00Z"}, "oid": {"$oid": "5f0000000000000000000001"},
		"ts": {"$timestamp": {"t": 100, "i": 7}}, "dec": {"$numberDecimal": "1.5"}}`
	cases := []struct {
		expr string
		want string // extended JSON value, or "MISSING"
	}{
		// paths and variables
		{`"$a"`, `5`},
		{`"$sub.c.d"`, `4`},
		{`"$missing"`, `MISSING`},
		{`"$a.b"`, `MISSING`},
		{`"$docs.x"`, `[1, 2]`},
		{`"$nested.in.v"`, `[[1, 2], 3]`},
		{`"$arr.0"`, `[]`},
		{`"$$ROOT.a"`, `5`},
		{`"$$CURRENT.s"`, `"Hello"`},
		{`"$$REMOVE"`, `MISSING`},
		{`{"$literal": "$a"}`, `"$a"`},
		{`"plain"`, `"plain"`},
		{`["$a", "$missing"]`, `[5, null]`},
		{`{"x": "$a", "y": "$missing", "z": {"w": 1}}`, `{"x": 5, "z": {"w": 1}}`},
		// comparison
		{`{"$eq": ["$a", 5]}`, `true`},
		{`{"$eq": ["$a", 5.0]}`, `true`},
		{`{"$eq": ["$missing", null]}`, `false`},
		{`{"$ne": ["$a", 5]}`, `false`},
		{`{"$gt": ["$a", "$b"]}`, `true`},
		{`{"$gt": ["$s", 1]}`, `true`},
		{`{"$lt": ["$n", 0]}`, `true`},
		{`{"$lte": ["$missing", null]}`, `true`},
		{`{"$cmp": ["$a", 7]}`, `-1`},
		{`{"$cmp": ["$a", 5]}`, `0`},
		// logical
		{`{"$and": [1, "$a", true]}`, `true`},
		{`{"$and": [1, 0]}`, `false`},
		{`{"$and": []}`, `true`},
		{`{"$or": [0, null, "$missing"]}`, `false`},
		{`{"$or": [0, []]}`, `true`},
		{`{"$not": ["$n"]}`, `true`},
		{`{"$not": 0}`, `true`},
		{`{"$in": [2, "$arr"]}`, `true`},
		{`{"$in": [2.0, "$arr"]}`, `true`},
		{`{"$in": [9, "$arr"]}`, `false`},
		// conditionals
		{`{"$cond": [{"$gt": ["$a", 1]}, "big", "small"]}`, `"big"`},
		{`{"$cond": {"if": "$n", "then": 1, "else": 2}}`, `2`},
		{`{"$ifNull": ["$missing", "$n", "dflt"]}`, `"dflt"`},
		{`{"$ifNull": ["$a", "dflt"]}`, `5`},
		{`{"$ifNull": ["$missing", "$missing2"]}`, `MISSING`},
		{`{"$switch": {"branches": [{"case": {"$eq": ["$a", 1]}, "then": "one"}, {"case": {"$eq": ["$a", 5]}, "then": "five"}], "default": "other"}}`, `"five"`},
		{`{"$switch": {"branches": [{"case": false, "then": 1}], "default": "d"}}`, `"d"`},
		// arithmetic and type promotion
		{`{"$add": [1, 2]}`, `3`},
		{`{"$add": [2147483647, 1]}`, `{"$numberLong": "2147483648"}`},
		{`{"$add": [{"$numberLong": "9223372036854775807"}, 1]}`, `9.223372036854775807e18`},
		{`{"$add": ["$a", "$b"]}`, `{"$numberLong": "8"}`},
		{`{"$add": ["$a", "$f"]}`, `7.5`},
		{`{"$add": ["$a", "$dec"]}`, `{"$numberDecimal": "6.5"}`},
		{`{"$add": ["$a", null]}`, `null`},
		{`{"$add": ["$a", "$missing"]}`, `null`},
		{`{"$add": ["$dt", 1000]}`, `{"$date": "2021-01-01T00:00:01Z"}`},
		{`{"$subtract": ["$dt", {"$date": "2020-12-31T23:59:59Z"}]}`, `{"$numberLong": "1000"}`},
		{`{"$subtract": ["$dt", 1000]}`, `{"$date": "2020-12-31T23:59:59Z"}`},
		{`{"$subtract": [5, 7]}`, `-2`},
		{`{"$multiply": [2, 3, 1.5]}`, `9.0`},
		{`{"$multiply": [{"$numberLong": "3037000500"}, {"$numberLong": "3037000500"}]}`, `9.22337203700025e18`},
		{`{"$divide": [7, 2]}`, `3.5`},
		{`{"$divide": [6, 3]}`, `2.0`},
		{`{"$divide": [{"$numberDecimal": "1"}, 4]}`, `{"$numberDecimal": "0.25"}`},
		{`{"$mod": [7, 3]}`, `1`},
		{`{"$mod": [-7, 3]}`, `-1`},
		{`{"$mod": [7.5, 2]}`, `1.5`},
		{`{"$mod": [{"$numberLong": "7"}, 3]}`, `{"$numberLong": "1"}`},
		{`{"$abs": -5}`, `5`},
		{`{"$abs": -2147483648}`, `{"$numberLong": "2147483648"}`},
		{`{"$abs": null}`, `null`},
		{`{"$floor": 2.7}`, `2.0`},
		{`{"$ceil": 2.1}`, `3.0`},
		{`{"$max": [1, "$a", null]}`, `5`},
		{`{"$max": "$arr"}`, `3`},
		{`{"$min": "$arr"}`, `1`},
		{`{"$min": [null, "$missing"]}`, `null`},
		{`{"$sum": "$arr"}`, `6`},
		{`{"$avg": "$arr"}`, `2.0`},
		// strings
		{`{"$concat": ["$s", " ", "world"]}`, `"Hello world"`},
		{`{"$concat": ["$s", "$missing"]}`, `null`},
		{`{"$toString": "$a"}`, `"5"`},
		{`{"$toString": 2.5}`, `"2.5"`},
		{`{"$toString": "$oid"}`, `"5f0000000000000000000001"`},
		{`{"$toString": "$dt"}`, `"2021-01-01T00:00:00.000Z"`},
		{`{"$toString": true}`, `"true"`},
		{`{"$toString": "$missing"}`, `null`},
		{`{"$toLower": "$s"}`, `"hello"`},
		{`{"$toUpper": "$s"}`, `"HELLO"`},
		{`{"$split": ["a,b", ","]}`, `["a", "b"]`},
		{`{"$strLenBytes": "$s"}`, `5`},
		// types
		{`{"$type": "$a"}`, `"int"`},
		{`{"$type": "$b"}`, `"long"`},
		{`{"$type": "$f"}`, `"double"`},
		{`{"$type": "$missing"}`, `"missing"`},
		{`{"$type": "$n"}`, `"null"`},
		{`{"$type": "$arr"}`, `"array"`},
		{`{"$type": "$sub"}`, `"object"`},
		{`{"$type": "$oid"}`, `"objectId"`},
		{`{"$type": "$ts"}`, `"timestamp"`},
		{`{"$type": "$dec"}`, `"decimal"`},
		{`{"$isArray": ["$arr"]}`, `true`},
		{`{"$isArray": "$a"}`, `false`},
		{`{"$toInt": "42"}`, `42`},
		{`{"$toLong": 4.9}`, `{"$numberLong": "4"}`},
		{`{"$toDouble": "$a"}`, `5.0`},
		{`{"$toBool": 0}`, `false`},
		// arrays and objects
		{`{"$size": "$arr"}`, `3`},
		{`{"$arrayElemAt": ["$arr", 0]}`, `1`},
		{`{"$arrayElemAt": ["$arr", -1]}`, `3`},
		{`{"$arrayElemAt": ["$arr", 5]}`, `MISSING`},
		{`{"$arrayElemAt": ["$missing", 0]}`, `null`},
		{`{"$first": "$arr"}`, `1`},
		{`{"$last": "$arr"}`, `3`},
		{`{"$concatArrays": ["$arr", [4]]}`, `[1, 2, 3, 4]`},
		{`{"$reverseArray": "$arr"}`, `[3, 2, 1]`},
		{`{"$mergeObjects": [{"a": 1, "b": 2}, null, {"a": 3, "c": 4}]}`, `{"a": 3, "b": 2, "c": 4}`},
		{`{"$mergeObjects": ["$sub", {"e": 1}]}`, `{"c": {"d": 4}, "e": 1}`},
		{`{"$objectToArray": {"a": 1}}`, `[{"k": "a", "v": 1}]`},
		{`{"$arrayToObject": [[["a", 1], ["b", 2]]]}`, `{"a": 1, "b": 2}`},
		{`{"$arrayToObject": [[{"k": "a", "v": 1}]]}`, `{"a": 1}`},
		{`{"$getField": "a"}`, `5`},
		{`{"$getField": {"field": "c", "input": "$sub"}}`, `{"d": 4}`},
		{`{"$getField": {"field": "zz", "input": "$sub"}}`, `MISSING`},
		{`{"$getField": {"field": {"$literal": "a.b"}, "input": {"$literal": {"a.b": 9}}}}`, `9`},
		// variables and iteration
		{`{"$let": {"vars": {"x": "$a", "y": 2}, "in": {"$multiply": ["$$x", "$$y"]}}}`, `10`},
		{`{"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": 2}, "in": "$$x"}}}}`, `2`},
		{`{"$let": {"vars": {"CURRENT": "$sub"}, "in": "$c.d"}}`, `4`},
		{`{"$map": {"input": "$arr", "as": "e", "in": {"$multiply": ["$$e", 10]}}}`, `[10, 20, 30]`},
		{`{"$map": {"input": "$arr", "in": {"$add": ["$$this", "$a"]}}}`, `[6, 7, 8]`},
		{`{"$map": {"input": "$missing", "in": 1}}`, `null`},
		{`{"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}}}`, `[2, 3]`},
		{`{"$filter": {"input": "$arr", "as": "x", "cond": {"$gte": ["$$x", 2]}, "limit": 1}}`, `[2]`},
		{`{"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}`, `6`},
		{`{"$tsSecond": "$ts"}`, `{"$numberLong": "100"}`},
		{`{"$tsIncrement": "$ts"}`, `{"$numberLong": "7"}`},
	}
	d := docA(t, doc)
	for _, c := range cases {
		e, err := CompileExpr(valA(t, c.expr))
		if err != nil {
			t.Errorf("CompileExpr(%s): %v", c.expr, err)
			continue
		}
		got, isMissing, err := e.EvalMissing(d, nil)
		if err != nil {
			t.Errorf("Eval(%s): %v", c.expr, err)
			continue
		}
		if c.want == "MISSING" {
			if !isMissing {
				t.Errorf("Eval(%s) = %v, want missing", c.expr, describe(got))
			}
			continue
		}
		want := valA(t, c.want)
		if isMissing || !identical(got, want) {
			t.Errorf("Eval(%s) = %s (%T, missing=%v), want %s (%T)", c.expr, describe(got), got, isMissing, describe(want), want)
		}
	}
}

func TestExprVarsAndRegistry(t *testing.T) {
	now := bson.DateTime(1600000000000)
	vars := &Vars{Now: now, ClusterTime: bson.Timestamp{T: 5, I: 1}, User: map[string]any{"target": 3}}
	for expr, want := range map[string]any{
		`"$$NOW"`:          now,
		`"$$CLUSTER_TIME"`: bson.Timestamp{T: 5, I: 1},
		`"$$target"`:       int32(3),
	} {
		e, err := CompileExpr(valA(t, expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got, err := e.Eval(bson.D{}, vars)
		if err != nil || !identical(got, want) {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}

	RegisterOperator("$testDouble", 1, 1, func(args []any) (any, error) {
		n, _ := toFloat(args[0])
		return n * 2, nil
	})
	e, err := CompileExpr(valA(t, `{"$testDouble": "$a"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Eval(docA(t, `{"a": 4}`), nil)
	if err != nil || got != 8.0 {
		t.Errorf("$testDouble = %v, %v", got, err)
	}
	if _, err := CompileExpr(valA(t, `{"$testDouble": [1, 2]}`)); err == nil {
		t.Error("arity not enforced for registered operator")
	}
	found := false
	for _, n := range OperatorNames() {
		if n == "$testDouble" {
			found = true
		}
	}
	if !found {
		t.Error("OperatorNames misses registered operator")
	}
}

func TestExprErrors(t *testing.T) {
	cases := []struct {
		expr    string
		doc     string
		code    int32
		compile bool // error expected at compile time
	}{
		{`{"$foo": 1}`, `{}`, 168, true},
		{`{"$add": 1, "$sub": 2}`, `{}`, 15983, true},
		{`{"$eq": [1]}`, `{}`, 16020, true},
		{`"$"`, `{}`, 16872, true},
		{`"$a..b"`, `{}`, 15998, true},
		{`"$$undefinedVar"`, `{}`, 17276, false},
		{`{"$let": {"vars": {"Bad": 1}, "in": 1}}`, `{}`, 16867, true},
		{`{"$let": {"in": 1}}`, `{}`, 16876, true},
		{`{"$cond": {"then": 1, "else": 2}}`, `{}`, 17080, true},
		{`{"$cond": [1, 2]}`, `{}`, 16020, true},
		{`{"$switch": {"branches": []}}`, `{}`, 40068, true},
		{`{"$switch": {"branches": [{"case": false, "then": 1}]}}`, `{}`, 40066, false},
		{`{"$add": ["x", 1]}`, `{}`, 16554, false},
		{`{"$add": [{"$date": "2020-01-01T00:00:00Z"}, {"$date": "2020-01-01T00:00:00Z"}]}`, `{}`, 16612, false},
		{`{"$multiply": ["x", 1]}`, `{}`, 16555, false},
		{`{"$divide": [1, 0]}`, `{}`, 16608, false},
		{`{"$mod": [1, 0]}`, `{}`, 16610, false},
		{`{"$subtract": ["x", 1]}`, `{}`, 16556, false},
		{`{"$concat": ["x", 1]}`, `{}`, 16702, false},
		{`{"$size": "$a"}`, `{"a": 1}`, 17124, false},
		{`{"$size": "$a"}`, `{}`, 17124, false},
		{`{"$in": [1, "$a"]}`, `{"a": 1}`, 40081, false},
		{`{"$arrayElemAt": [1, 0]}`, `{}`, 28689, false},
		{`{"$arrayElemAt": [[1], "x"]}`, `{}`, 28690, false},
		{`{"$arrayElemAt": [[1], 1.5]}`, `{}`, 28691, false},
		{`{"$mergeObjects": [1]}`, `{}`, 40400, false},
		{`{"$toString": {"$literal": {"a": 1}}}`, `{}`, 241, false},
		{`{"$map": {"input": 1, "in": 1}}`, `{}`, 16883, false},
		{`{"$filter": {"input": 1, "cond": true}}`, `{}`, 28651, false},
		{`{"a.b": 1}`, `{}`, 16412, true},
		{`{"$ifNull": [1]}`, `{}`, 1257300, true},
	}
	for _, c := range cases {
		e, err := CompileExpr(valA(t, c.expr))
		if err == nil {
			if c.compile {
				t.Errorf("CompileExpr(%s): want compile error %d", c.expr, c.code)
				continue
			}
			_, err = e.Eval(docA(t, c.doc), nil)
		} else if !c.compile {
			t.Errorf("CompileExpr(%s): unexpected compile error %v", c.expr, err)
			continue
		}
		var me *Error
		if !errors.As(err, &me) || me.Code != c.code {
			t.Errorf("%s: got %v, want code %d", c.expr, err, c.code)
		}
	}
}
