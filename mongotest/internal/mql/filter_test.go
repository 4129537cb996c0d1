package mql

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// docA parses relaxed extended JSON into a bson.D (test helper).
func docA(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return d
}

// valA parses a single extended-JSON value.
func valA(t testing.TB, s string) any {
	t.Helper()
	d := docA(t, `{"v": `+s+`}`)
	return d[0].Value
}

func TestFilterMatch(t *testing.T) {
	cases := []struct {
		filter string
		doc    string
		want   bool
	}{
		// equality and implicit array traversal
		{`{"a": 1}`, `{"a": 1}`, true},
		{`{"a": 1}`, `{"a": 1.0}`, true},
		{`{"a": 1}`, `{"a": {"$numberLong": "1"}}`, true},
		{`{"a": 1}`, `{"a": {"$numberDecimal": "1.0"}}`, true},
		{`{"a": 1}`, `{"a": "1"}`, false},
		{`{"a": 1}`, `{"a": [2, 1]}`, true},
		{`{"a": 1}`, `{"a": [[1]]}`, false},
		{`{"a": [1, 2]}`, `{"a": [1, 2]}`, true},
		{`{"a": [1, 2]}`, `{"a": [2, 1]}`, false},
		{`{"a": [1, 2]}`, `{"a": [[1, 2], 3]}`, true},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
		{`{"a": {"b": 1, "c": 2}}`, `{"a": {"c": 2, "b": 1}}`, false},
		{`{"a.b": 1}`, `{"a": {"b": 1}}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": 1}]}`, true},
		{`{"a.b": 1}`, `{"a": [{"b": 2}, {"b": [3, 1]}]}`, true},
		{`{"a.b": 1}`, `{"a": [[{"b": 1}]]}`, false},
		{`{"a.b.c": 1}`, `{"a": [{"b": [{"c": 1}]}]}`, true},
		{`{"a.0": 5}`, `{"a": [5, 6]}`, true},
		{`{"a.1": 5}`, `{"a": [5, 6]}`, false},
		{`{"a.0.b": 1}`, `{"a": [{"b": 1}]}`, true},
		{`{"a.0": 1}`, `{"a": {"0": 1}}`, true},
		{`{"a.0": 1}`, `{"a": [{"0": 1}]}`, true},
		{`{"a.1.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		{`{"_id": {"$oid": "5f0000000000000000000001"}}`, `{"_id": {"$oid": "5f0000000000000000000001"}}`, true},
		// null and missing
		{`{"a": null}`, `{}`, true},
		{`{"a": null}`, `{"a": null}`, true},
		{`{"a": null}`, `{"a": 0}`, false},
		{`{"a": null}`, `{"a": [null]}`, true},
		{`{"a": null}`, `{"a": []}`, false},
		{`{"a.b": null}`, `{"a": 4}`, true},
		{`{"a.b": null}`, `{"a": [{"b": 5}]}`, false},
		{`{"a.b": null}`, `{"a": [{}]}`, true},
		{`{"a.b": null}`, `{"a": []}`, false},
		{`{"a.b": null}`, `{"a": [{}, {"b": 5}]}`, true},
		{`{"a.b": null}`, `{"a": [5, {"b": 5}]}`, false},
		{`{"a.b": {"$in": [null]}}`, `{"a": [{}]}`, true},
		{`{"a": {"$ne": null}}`, `{}`, false},
		{`{"a": {"$ne": null}}`, `{"a": 1}`, true},
		{`{"a": {"$gte": null}}`, `{}`, true},
		{`{"a": {"$gt": null}}`, `{"a": null}`, false},
		{`{"a": {"$lt": null}}`, `{"a": 1}`, false},
		// comparison and type bracketing
		{`{"a": {"$gt": 1}}`, `{"a": 2}`, true},
		{`{"a": {"$gt": 1}}`, `{"a": "2"}`, false},
		{`{"a": {"$gt": 1}}`, `{"a": [0, 5]}`, true},
		{`{"a": {"$gt": 1, "$lt": 3}}`, `{"a": [0, 5]}`, true},
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}`, `{"a": [0, 5]}`, false},
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}`, `{"a": [0, 2]}`, true},
		{`{"a": {"$lte": 2.5}}`, `{"a": {"$numberLong": "2"}}`, true},
		{`{"a": {"$gt": {"$numberDecimal": "0.1"}}}`, `{"a": 0.1}`, true},
		{`{"a": {"$lt": "b"}}`, `{"a": "a"}`, true},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": "x"}`, true},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{}`, true},
		{`{"a": {"$lte": {"$maxKey": 1}}}`, `{}`, true},
		{`{"a": {"$lt": {"$minKey": 1}}}`, `{"a": 1}`, false},
		{`{"a": {"$gte": {"$minKey": 1}}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$lt": {"$maxKey": 1}}}`, `{"a": null}`, true},
		{`{"a": {"$gte": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": {"$date": "2021-01-01T00:00:00Z"}}`, true},
		{`{"a": {"$gt": {"$timestamp": {"t": 1, "i": 1}}}}`, `{"a": {"$timestamp": {"t": 1, "i": 2}}}`, true},
		{`{"a": {"$gt": [1]}}`, `{"a": [2]}`, true},
		{`{"a": {"$lt": 5}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$gte": {"$numberDouble": "NaN"}}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$numberDouble": "NaN"}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		// $in / $nin
		{`{"a": {"$in": [1, 2]}}`, `{"a": 2}`, true},
		{`{"a": {"$in": [1, 2]}}`, `{"a": [3, 2]}`, true},
		{`{"a": {"$in": []}}`, `{"a": 1}`, false},
		{`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, `{"a": "xy"}`, true},
		{`{"a": {"$nin": [1, 2]}}`, `{"a": 3}`, true},
		{`{"a": {"$nin": [1, 2]}}`, `{"a": [3, 2]}`, false},
		{`{"a": {"$nin": [1]}}`, `{}`, true},
		{`{"a": {"$in": [null]}}`, `{}`, true},
		// logical
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 2}`, true},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 3}`, false},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 2}`, true},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, false},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, true},
		{`{"$nor": [{"a": 1}]}`, `{"a": [1]}`, false},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 3}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": [3, 6]}`, false},
		{`{"a": {"$not": {"$regularExpression": {"pattern": "^a", "options": ""}}}}`, `{"a": "bc"}`, true},
		{`{"a": {"$not": {"$gt": 1, "$lt": 3}}}`, `{"a": 5}`, true},
		{`{"a": {"$not": {"$gt": 1, "$lt": 3}}}`, `{"a": 2}`, false},
		{`{"$comment": "hello", "a": 1}`, `{"a": 1}`, true},
		{`{}`, `{"a": 1}`, true},
		// $exists
		{`{"a": {"$exists": true}}`, `{"a": null}`, true},
		{`{"a": {"$exists": true}}`, `{}`, false},
		{`{"a": {"$exists": false}}`, `{}`, true},
		{`{"a": {"$exists": 0}}`, `{"a": 1}`, false},
		{`{"a.b": {"$exists": true}}`, `{"a": [{"c": 1}, {"b": 1}]}`, true},
		{`{"a.b": {"$exists": false}}`, `{"a": [{"c": 1}, {"b": 1}]}`, false},
		{`{"a.b": {"$exists": false}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$exists": true}}`, `{"a": []}`, true},
		{`{"a.1": {"$exists": true}}`, `{"a": [0, 1]}`, true},
		{`{"a.2": {"$exists": true}}`, `{"a": [0, 1]}`, false},
		// $type
		{`{"a": {"$type": "string"}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": {"$numberLong": "5"}}`, true},
		{`{"a": {"$type": "int"}}`, `{"a": {"$numberLong": "5"}}`, false},
		{`{"a": {"$type": "long"}}`, `{"a": {"$numberLong": "5"}}`, true},
		{`{"a": {"$type": "double"}}`, `{"a": [1.5]}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": [1]}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": []}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "null"}}`, `{}`, false},
		{`{"a": {"$type": "null"}}`, `{"a": null}`, true},
		{`{"a": {"$type": ["string", "bool"]}}`, `{"a": true}`, true},
		{`{"a": {"$type": "minKey"}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$type": -1}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$type": 127}}`, `{"a": {"$maxKey": 1}}`, true},
		{`{"a": {"$type": "object"}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"$type": "objectId"}}`, `{"a": {"$oid": "5f0000000000000000000001"}}`, true},
		{`{"a": {"$type": "date"}}`, `{"a": {"$date": "2020-01-01T00:00:00Z"}}`, true},
		{`{"a": {"$type": "decimal"}}`, `{"a": {"$numberDecimal": "1"}}`, true},
		// $regex
		{`{"a": {"$regex": "^ab"}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "^AB", "$options": "i"}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "^AB"}}`, `{"a": "abc"}`, false},
		{`{"a": {"$regularExpression": {"pattern": "c$", "options": ""}}}`, `{"a": ["x", "abc"]}`, true},
		{`{"a": {"$regex": {"$regularExpression": {"pattern": "^A", "options": "i"}}}}`, `{"a": "abc"}`, true},
		{`{"a": {"$regex": "^b", "$options": "m"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a.b", "$options": "s"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a b # comment", "$options": "x"}}`, `{"a": "ab"}`, true},
		{`{"a": {"$regex": "1"}}`, `{"a": 1}`, false},
		{`{"a": {"$regularExpression": {"pattern": "x", "options": "i"}}}`, `{"a": {"$regularExpression": {"pattern": "x", "options": "i"}}}`, true},
		// $size
		{`{"a": {"$size": 2}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$size": 1}}`, `{"a": [[1, 2]]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [[1, 2]]}`, false},
		{`{"a": {"$size": 0}}`, `{}`, false},
		{`{"a.b": {"$size": 1}}`, `{"a": [{"b": [1]}, {"b": 2}]}`, true},
		// $all
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3, 1]}`, true},
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3]}`, false},
		{`{"a": {"$all": [1]}}`, `{"a": 1}`, true},
		{`{"a": {"$all": []}}`, `{"a": [1]}`, false},
		{`{"a": {"$all": [[1, 2]]}}`, `{"a": [[1, 2], 3]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		// $elemMatch (object form)
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 2}]}`, true},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		{`{"a.b": 1, "a.c": 2}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		{`{"a": {"$elemMatch": {"b": {"$gt": 1}}}}`, `{"a": {"b": 5}}`, false},
		{`{"a": {"$elemMatch": {"$or": [{"b": 1}, {"b": 2}]}}}`, `{"a": [{"b": 2}]}`, true},
		{`{"a": {"$elemMatch": {"$in": [3]}}}`, `{"a": [1, 3]}`, true},
		{`{"a": {"$elemMatch": {"$eq": 1}}}`, `{"a": [[1]]}`, false},
		{`{"a": {"$elemMatch": {"$ne": 1}}}`, `{"a": [1, [1]]}`, true},
		{`{"a": {"$elemMatch": {"$not": {"$gt": 5}}}}`, `{"a": [7, 3]}`, true},
		{`{"a": {"$elemMatch": {"$elemMatch": {"$gt": 5}}}}`, `{"a": [[1], [6]]}`, true},
		{`{"a.b": {"$elemMatch": {"c": 1}}}`, `{"a": [{"b": [{"c": 1}]}]}`, true},
		// $mod
		{`{"a": {"$mod": [4, 0]}}`, `{"a": 8}`, true},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": 8}`, false},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": 9.5}`, true},
		{`{"a": {"$mod": [4, -1]}}`, `{"a": -5}`, true},
		{`{"a": {"$mod": [4, 0]}}`, `{"a": "8"}`, false},
		// $expr
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 5, "b": 3}`, true},
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 1, "b": 3}`, false},
		{`{"$expr": {"$eq": ["$a", null]}}`, `{}`, false},
		{`{"$expr": "$a"}`, `{"a": 0}`, false},
		{`{"$expr": "$a"}`, `{"a": []}`, true},
		// bits
		{`{"a": {"$bitsAllSet": 5}}`, `{"a": 7}`, true},
		{`{"a": {"$bitsAllSet": [0, 1]}}`, `{"a": 5}`, false},
		{`{"a": {"$bitsAnySet": [1]}}`, `{"a": 2}`, true},
		{`{"a": {"$bitsAllClear": 2}}`, `{"a": 5}`, true},
		{`{"a": {"$bitsAnyClear": 7}}`, `{"a": 7}`, false},
		// DBRef-like literal documents
		{`{"a": {"$ref": "c", "$id": 1}}`, `{"a": {"$ref": "c", "$id": 1}}`, true},
		// $eq with a regex value is an equality, not a pattern match
		{`{"a": {"$eq": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, `{"a": "x"}`, false},
		{`{"a": {"$alwaysTrue": 1}}`, `{}`, false},
	}
	for _, c := range cases {
		if c.filter == `{"a": {"$alwaysTrue": 1}}` {
			continue // field-level $alwaysTrue is an error, tested below
		}
		f, err := CompileFilter(docA(t, c.filter))
		if err != nil {
			t.Errorf("CompileFilter(%s): %v", c.filter, err)
			continue
		}
		if got := f.Match(docA(t, c.doc), nil); got != c.want {
			t.Errorf("filter %s on %s: got %v, want %v", c.filter, c.doc, got, c.want)
		}
	}
}

func TestFilterErrors(t *testing.T) {
	cases := []struct {
		filter string
		code   int32
		substr string
	}{
		{`{"$foo": 1}`, 2, "unknown top level operator: $foo"},
		{`{"a": {"$foo": 1}}`, 2, "unknown operator: $foo"},
		{`{"$and": []}`, 2, "$and must be a nonempty array"},
		{`{"$or": {}}`, 2, "$or must be a nonempty array"},
		{`{"$nor": [1]}`, 2, "entries must be objects"},
		{`{"a": {"$in": 1}}`, 2, "$in needs an array"},
		{`{"a": {"$nin": {}}}`, 2, "$nin needs an array"},
		{`{"a": {"$size": -1}}`, 2, "$size"},
		{`{"a": {"$size": 1.5}}`, 2, "$size"},
		{`{"a": {"$mod": [0, 1]}}`, 2, "divisor cannot be 0"},
		{`{"a": {"$mod": [1]}}`, 2, "not enough elements"},
		{`{"a": {"$mod": [1, 2, 3]}}`, 2, "too many elements"},
		{`{"a": {"$type": "foo"}}`, 2, "Unknown type name alias: foo"},
		{`{"a": {"$type": 100}}`, 2, "Invalid numerical type code"},
		{`{"a": {"$not": 1}}`, 2, "$not needs a regex or a document"},
		{`{"a": {"$not": {}}}`, 2, "$not cannot be empty"},
		{`{"a": {"$options": "i"}}`, 2, "$options needs a $regex"},
		{`{"a": {"$regex": 1}}`, 2, "$regex has to be a string"},
		{`{"a": {"$elemMatch": 1}}`, 2, "$elemMatch needs an Object"},
		{`{"a": {"$all": 1}}`, 2, "$all needs an array"},
		{`{"$where": "true"}`, 2, "not supported by mongotest"},
		{`{"$text": {"$search": "x"}}`, 2, "not supported by mongotest"},
		{`{"a": {"$near": [0, 0]}}`, 2, "not supported by mongotest"},
		{`{"a": {"$geoWithin": {}}}`, 2, "not supported by mongotest"},
		{`{"$expr": {"$foo": 1}}`, 168, "Unrecognized expression '$foo'"},
		{`{"a": {"$regex": "("}}`, 51091, "Regular expression is invalid"},
		{`{"a": {"$in": [{"$gt": 1}]}}`, 2, "cannot nest $ under $in"},
		{`{"a": {"$alwaysTrue": 1}}`, 2, "unknown operator: $alwaysTrue"},
		{`{"a": {"$undefined": true}}`, 2, "cannot compare to undefined"},
		{`{"a": {"$eq": {"$undefined": true}}}`, 2, "cannot compare to undefined"},
		{`{"a": {"$in": [{"$undefined": true}]}}`, 2, "cannot be undefined"},
		{`{"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}`, 2, "$expr can only be applied to the top-level document"},
		{`{"$or": [{"$expr": {"$foo": 1}}]}`, 168, "Unrecognized expression"},
	}
	for _, c := range cases {
		_, err := CompileFilter(docA(t, c.filter))
		var me *Error
		if !errors.As(err, &me) {
			t.Errorf("CompileFilter(%s): got %v, want *Error code %d", c.filter, err, c.code)
			continue
		}
		if me.Code != c.code || !containsA(me.Msg, c.substr) {
			t.Errorf("CompileFilter(%s): got code %d %q, want %d containing %q", c.filter, me.Code, me.Msg, c.code, c.substr)
		}
	}
}

func containsA(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexA(s, sub) >= 0)
}

func indexA(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestFilterExprVars(t *testing.T) {
	f, err := CompileFilter(docA(t, `{"$expr": {"$lt": ["$ts", "$$CLUSTER_TIME"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	vars := &Vars{ClusterTime: bson.Timestamp{T: 10, I: 1}}
	if !f.Match(bson.D{{Key: "ts", Value: bson.Timestamp{T: 9}}}, vars) {
		t.Error("expected match with $$CLUSTER_TIME")
	}
	if f.Match(bson.D{{Key: "ts", Value: bson.Timestamp{T: 11}}}, vars) {
		t.Error("unexpected match")
	}
}

func TestFilterNativeGoValues(t *testing.T) {
	// Hand-built filters with Go ints and []any behave like decoded BSON.
	f, err := CompileFilter(bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: []any{1, 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(bson.D{{Key: "a", Value: int64(2)}}, nil) {
		t.Error("want match")
	}
	var nilFilter *Filter
	if !nilFilter.Match(bson.D{}, nil) {
		t.Error("nil filter must match everything")
	}
}

func TestLookup(t *testing.T) {
	d := docA(t, `{"a": {"b": [10, {"c": 5}]}, "x": null}`)
	cases := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b.0", int32(10), true},
		{"a.b.1.c", int32(5), true},
		{"a.b.2", nil, false},
		{"a.b.c", nil, false},
		{"x", nil, true},
		{"y", nil, false},
		{"x.y", nil, false},
	}
	for _, c := range cases {
		got, ok := Lookup(d, c.path)
		if ok != c.ok || (ok && Compare(got, c.want) != 0) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}

func TestFilterMatchErr(t *testing.T) {
	f, err := CompileFilter(docA(t, `{"$nor": [{"$expr": {"$gt": [{"$divide": [1, "$d"]}, 0]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.MatchErr(docA(t, `{"d": 2}`), nil)
	if ok || err != nil {
		t.Errorf("d=2: got %v, %v; want false, nil", ok, err)
	}
	ok, err = f.MatchErr(docA(t, `{"d": 0}`), nil)
	var me *Error
	if ok || !errors.As(err, &me) || me.Code != 16608 {
		t.Errorf("d=0: got %v, %v; want false and error 16608", ok, err)
	}
	if f.Match(docA(t, `{"d": 0}`), nil) {
		t.Error("Match must report false when $expr fails")
	}
	plain, _ := CompileFilter(docA(t, `{"a": 1}`))
	if ok, err := plain.MatchErr(docA(t, `{"a": 1}`), nil); !ok || err != nil {
		t.Errorf("plain filter: %v, %v", ok, err)
	}
}
