package mql

import (
	"cmp"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func docsB(t testing.TB, s string) []bson.D {
	t.Helper()
	var out []bson.D
	for _, v := range arrB(t, s) {
		out = append(out, v.(bson.D))
	}
	return out
}

func runB(t *testing.T, pipeline, input string) []bson.D {
	t.Helper()
	p, err := CompilePipeline(arrB(t, pipeline))
	if err != nil {
		t.Fatalf("compile %s: %v", pipeline, err)
	}
	in := docsB(t, input)
	out, err := p.Run(in, nil)
	if err != nil {
		t.Fatalf("run %s: %v", pipeline, err)
	}
	return out
}

func sameDocsB(t *testing.T, what string, got []bson.D, want string) {
	t.Helper()
	g := bson.A{}
	for _, d := range got {
		g = append(g, d)
	}
	sameB(t, what, g, arrB(t, want))
}

func TestPipelineStages(t *testing.T) {
	input := `[
		{"_id": 1, "item": "abc", "price": 10, "qty": 2, "tags": ["a", "b"]},
		{"_id": 2, "item": "jkl", "price": 20, "qty": 1, "tags": []},
		{"_id": 3, "item": "xyz", "price": 5, "qty": 10, "tags": "c"},
		{"_id": 4, "item": "xyz", "price": 5, "qty": 20},
		{"_id": 5, "item": "abc", "price": 10, "qty": 10, "tags": null}
	]`
	cases := []struct{ name, pipeline, want string }{
		{"match", `[{"$match": {"item": "xyz"}}]`, `[{"_id": 3, "item": "xyz", "price": 5, "qty": 10, "tags": "c"}, {"_id": 4, "item": "xyz", "price": 5, "qty": 20}]`},
		{"match expr", `[{"$match": {"$expr": {"$gt": [{"$multiply": ["$price", "$qty"]}, 60]}}}, {"$project": {"_id": 1}}]`, `[{"_id": 4}, {"_id": 5}]`},
		{"sort limit skip", `[{"$sort": {"price": -1, "qty": 1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}]`, `[{"_id": 1}, {"_id": 5}]`},
		{"count", `[{"$match": {"price": {"$lt": 15}}}, {"$count": "n"}]`, `[{"n": 4}]`},
		{"count empty", `[{"$match": {"price": 0}}, {"$count": "n"}]`, `[]`},
		{"group", `[{"$group": {"_id": "$item", "total": {"$sum": {"$multiply": ["$price", "$qty"]}}, "avgQty": {"$avg": "$qty"}, "n": {"$sum": 1}, "c": {"$count": {}}}}, {"$sort": {"_id": 1}}]`,
			`[{"_id": "abc", "total": 120, "avgQty": 6.0, "n": 2, "c": 2}, {"_id": "jkl", "total": 20, "avgQty": 1.0, "n": 1, "c": 1}, {"_id": "xyz", "total": 150, "avgQty": 15.0, "n": 2, "c": 2}]`},
		{"group null id", `[{"$group": {"_id": null, "max": {"$max": "$qty"}, "min": {"$min": "$price"}, "first": {"$first": "$item"}, "last": {"$last": "$item"}}}]`,
			`[{"_id": null, "max": 20, "min": 5, "first": "abc", "last": "abc"}]`},
		{"group push addToSet", `[{"$group": {"_id": "$price", "items": {"$push": "$item"}, "set": {"$addToSet": "$item"}}}, {"$sort": {"_id": 1}}]`,
			`[{"_id": 5, "items": ["xyz", "xyz"], "set": ["xyz"]}, {"_id": 10, "items": ["abc", "abc"], "set": ["abc"]}, {"_id": 20, "items": ["jkl"], "set": ["jkl"]}]`},
		{"group compound id", `[{"$group": {"_id": {"i": "$item", "p": "$price"}, "q": {"$sum": "$qty"}}}, {"$sort": {"q": -1}}, {"$limit": 1}]`,
			`[{"_id": {"i": "xyz", "p": 5}, "q": 30}]`},
		{"group numeric ids merge across types", `[{"$project": {"k": {"$cond": [{"$eq": ["$_id", 1]}, 1.0, 1]}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}}}]`, `[{"_id": 1.0, "n": 5}]`},
		{"unwind", `[{"$unwind": "$tags"}, {"$project": {"tags": 1}}]`, `[{"_id": 1, "tags": "a"}, {"_id": 1, "tags": "b"}, {"_id": 3, "tags": "c"}]`},
		{"unwind preserve with index", `[{"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}}, {"$project": {"tags": 1, "i": 1}}]`,
			`[{"_id": 1, "tags": "a", "i": {"$numberLong": "0"}}, {"_id": 1, "tags": "b", "i": {"$numberLong": "1"}}, {"_id": 2, "i": null}, {"_id": 3, "tags": "c", "i": null}, {"_id": 4, "i": null}, {"_id": 5, "tags": null, "i": null}]`},
		{"sortByCount", `[{"$sortByCount": "$item"}, {"$limit": 1}, {"$project": {"count": 1, "_id": 0}}]`, `[{"count": 2}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sameDocsB(t, c.pipeline, runB(t, c.pipeline, input), c.want)
		})
	}
}

func TestPipelineErrors(t *testing.T) {
	cases := []struct {
		pipeline string
		code     int32
		msg      string
	}{
		{`[{"$unsupported": {}}]`, 40324, "Unrecognized pipeline stage name: '$unsupported'"},
		{`[{"$match": {}, "$project": {"a": 1}}]`, 40323, "exactly one field"},
		{`[1]`, 14, "must be an object"},
		{`[{"$limit": 0}]`, 15958, "the limit must be positive"},
		{`[{"$skip": -1}]`, 15956, ""},
		{`[{"$count": ""}]`, 40156, ""},
		{`[{"$count": "a.b"}]`, 40160, ""},
		{`[{"$sort": {}}]`, 15976, "$sort stage must have at least one sort key"},
		{`[{"$sort": {"a": 2}}]`, 15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)"},
		{`[{"$group": {"n": {"$sum": 1}}}]`, 15955, "a group specification must include an _id"},
		{`[{"$group": {"_id": 1, "n": {"$foo": 1}}}]`, 15952, "unknown group operator '$foo'"},
		{`[{"$group": {"_id": 1, "n": 1}}]`, 40234, "must be an accumulator object"},
		{`[{"$group": {"_id": 1, "a.b": {"$sum": 1}}}]`, 40235, "cannot contain '.'"},
		{`[{"$unwind": "tags"}]`, 28818, "should be prefixed with a '$'"},
		{`[{"$unwind": {"path": "$a", "x": 1}}]`, 28811, "unrecognized option"},
		{`[{"$match": 1}]`, 15959, "the match filter must be an expression in an object"},
		{`[{"$project": {"a": {"$nope": 1}}}]`, 168, "Unrecognized expression '$nope'"},
		{`[{"$match": {"$where": "true"}}]`, 2, "not supported by mongotest"},
		{`[{"$lookup": {}}]`, 2, "not supported by mongotest"},
		{`[{"$changeStream": {}}]`, 40602, "$changeStream is only valid as the first stage"},
	}
	for _, c := range cases {
		_, err := CompilePipeline(arrB(t, c.pipeline))
		codeB(t, c.pipeline, err, c.code)
		if err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: message %q lacks %q", c.pipeline, err.Error(), c.msg)
		}
	}
}

func TestPipelinePerDocument(t *testing.T) {
	p, err := CompilePipeline(arrB(t, `[{"$match": {"fullDocument.z": {"$gte": 2}}}, {"$project": {"optype": "$operationType", "ns.coll": 1}}, {"$addFields": {"k": 1}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.PerDocument() {
		t.Error("PerDocument false")
	}
	if got := strings.Join(p.StageNames(), ","); got != "$match,$project,$addFields" {
		t.Errorf("StageNames %s", got)
	}
	ev := docB(t, `{"_id": {"_data": "82"}, "operationType": "insert", "fullDocument": {"z": 3}, "ns": {"db": "d", "coll": "c"}}`)
	out, ok, err := p.ApplyOne(ev, nil)
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	sameB(t, "event", out, docB(t, `{"_id": {"_data": "82"}, "ns": {"coll": "c"}, "optype": "insert", "k": 1}`))
	_, ok, err = p.ApplyOne(docB(t, `{"_id": 1, "fullDocument": {"z": 1}}`), nil)
	if ok || err != nil {
		t.Errorf("filtered event: ok=%v err=%v", ok, err)
	}
	p, _ = CompilePipeline(arrB(t, `[{"$sort": {"a": 1}}]`))
	if p.PerDocument() {
		t.Error("$sort is not per-document")
	}
	if !IsPerDocumentStage("$redact") || IsPerDocumentStage("$group") {
		t.Error("IsPerDocumentStage")
	}
}

func TestRedact(t *testing.T) {
	doc := `{"_id": 1, "level": 1, "a": {"level": 5, "x": 1}, "b": {"level": 1, "y": 2, "c": [{"level": 9}, {"level": 0, "z": 1}, 7]}}`
	out := runB(t, `[{"$redact": {"$cond": {"if": {"$gt": ["$level", 3]}, "then": "$$PRUNE", "else": "$$DESCEND"}}}]`, `[`+doc+`]`)
	sameDocsB(t, "redact", out, `[{"_id": 1, "level": 1, "b": {"level": 1, "y": 2, "c": [{"level": 0, "z": 1}, 7]}}]`)
	out = runB(t, `[{"$redact": "$$KEEP"}]`, `[`+doc+`]`)
	sameDocsB(t, "keep", out, `[`+doc+`]`)
	out = runB(t, `[{"$redact": "$$PRUNE"}]`, `[`+doc+`]`)
	sameDocsB(t, "prune", out, `[]`)
	p, _ := CompilePipeline(arrB(t, `[{"$redact": 1}]`))
	_, _, err := p.ApplyOne(docB(t, doc), nil)
	codeB(t, "bad redact result", err, 17053)
}

func TestSort(t *testing.T) {
	docs := docsB(t, `[
		{"_id": 1, "a": [3, 1]},
		{"_id": 2, "a": 2},
		{"_id": 3},
		{"_id": 4, "a": null},
		{"_id": 5, "a": []},
		{"_id": 6, "a": "s"},
		{"_id": 7, "a": [5]},
		{"_id": 8, "a": {"$minKey": 1}}
	]`)
	ids := func(ds []bson.D) string {
		var s []string
		for _, d := range ds {
			s = append(s, describe(d[0].Value))
		}
		return strings.Join(s, ",")
	}
	asc, err := CompileSort(docB(t, `{"a": 1, "_id": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	// MinKey, empty array, null/missing (tie broken by _id), numbers (arrays by min), strings
	if got := ids(asc.Sort(docs)); got != "8,5,3,4,1,2,7,6" {
		t.Errorf("ascending: %s", got)
	}
	desc, _ := CompileSort(docB(t, `{"a": -1, "_id": 1}`))
	// arrays by max: [5] → 5, [3,1] → 3
	if got := ids(desc.Sort(docs)); got != "6,7,1,2,3,4,5,8" {
		t.Errorf("descending: %s", got)
	}
	nested, _ := CompileSort(docB(t, `{"x.y": 1}`))
	d1, d2 := docB(t, `{"x": [{"y": 5}, {"y": 0}]}`), docB(t, `{"x": {"y": 1}}`)
	if !nested.Less(d1, d2) || nested.Less(d2, d1) {
		t.Error("nested array sort key should be the minimum")
	}
	if _, err := CompileSort(docB(t, `{"a": {"$meta": "textScore"}}`)); err == nil {
		t.Error("$meta sort should be unsupported")
	}
}

func TestCompare(t *testing.T) {
	order := []string{
		`{"$minKey": 1}`, `{"$undefined": true}`, `null`, `{"$numberDouble": "NaN"}`, `{"$numberDouble": "-Infinity"}`,
		`-5`, `{"$numberDecimal": "-0.5"}`, `0`, `{"$numberLong": "1"}`, `1.5`, `{"$numberDecimal": "2"}`, `{"$numberLong": "9223372036854775807"}`, `1e300`,
		`""`, `"A"`, `"a"`, `"ab"`, `{}`, `{"a": 1}`, `{"a": 1, "b": 1}`, `{"b": 0}`, `{"a": "x"}`, `[]`, `[1]`, `[1, 2]`, `[2]`,
		`{"$binary": {"base64": "AA==", "subType": "01"}}`, `{"$binary": {"base64": "AAA=", "subType": "00"}}`,
		`{"$oid": "000000000000000000000000"}`, `{"$oid": "ffffffffffffffffffffffff"}`, `false`, `true`,
		`{"$date": {"$numberLong": "-1"}}`, `{"$date": {"$numberLong": "0"}}`, `{"$timestamp": {"t": 1, "i": 2}}`, `{"$timestamp": {"t": 2, "i": 1}}`,
		`{"$regularExpression": {"pattern": "a", "options": ""}}`, `{"$regularExpression": {"pattern": "a", "options": "i"}}`, `{"$maxKey": 1}`,
	}
	vals := make([]any, len(order))
	for i, s := range order {
		vals[i] = valB(t, s)
	}
	for i := range vals {
		for j := range vals {
			want := cmp.Compare(i, j)
			if got := Compare(vals[i], vals[j]); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	equal := [][2]string{
		{`1`, `1.0`}, {`1`, `{"$numberLong": "1"}`}, {`1`, `{"$numberDecimal": "1.00"}`}, {`0.1`, `0.1`},
		{`{"a": 1}`, `{"a": 1.0}`}, {`[1, {"b": 2}]`, `[1.0, {"b": {"$numberLong": "2"}}]`},
		{`{"$numberDouble": "NaN"}`, `{"$numberDecimal": "NaN"}`}, {`"x"`, `{"$symbol": "x"}`},
	}
	for _, e := range equal {
		if !Equal(valB(t, e[0]), valB(t, e[1])) {
			t.Errorf("Equal(%s, %s) = false", e[0], e[1])
		}
	}
	// exact int64/double comparison near 2^63 and 2^53
	if Compare(int64(9007199254740993), float64(9007199254740992)) != 1 {
		t.Error("2^53+1 > 2^53 as double")
	}
	if Compare(int64(1<<62), float64(1<<62)) != 0 {
		t.Error("2^62 == 2^62.0")
	}
	if Compare(bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "b", Value: 1}}) != -1 {
		t.Error("field names compare after types")
	}
	if Compare(0.1, mustDecB(t, "0.1")) == 0 {
		t.Error("double 0.1 is not exactly decimal 0.1")
	}
	// Go native values are accepted
	if !Equal(7, int64(7)) || !Equal([]any{1}, bson.A{int32(1)}) {
		t.Error("Go native values")
	}
}

func mustDecB(t *testing.T, s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The $project pipelines of MongoDB's change-streams spec tests
// (change-streams.json), applied to an insert event.
func TestChangeStreamSpecProjections(t *testing.T) {
	ev := `{"_id": {"_data": "82AB"}, "operationType": "insert", "clusterTime": {"$timestamp": {"t": 1, "i": 1}},
		"fullDocument": {"_id": 1, "z": 3}, "ns": {"db": "database0", "coll": "collection0"}, "documentKey": {"_id": 1}}`
	cases := []struct{ pipeline, want string }{
		{`[{"$project": {"operationType": "addedInFutureMongoDBVersion", "ns": 1}}]`,
			`{"_id": {"_data": "82AB"}, "ns": {"db": "database0", "coll": "collection0"}, "operationType": "addedInFutureMongoDBVersion"}`},
		{`[{"$project": {"operationType": 1, "ns": 1, "newField": "newFieldValue"}}]`,
			`{"_id": {"_data": "82AB"}, "operationType": "insert", "ns": {"db": "database0", "coll": "collection0"}, "newField": "newFieldValue"}`},
		{`[{"$project": {"operationType": "insert", "ns.viewOn": "db.coll"}}]`,
			// the "ns" child is emitted in document order, computed fields after it
			`{"_id": {"_data": "82AB"}, "ns": {"viewOn": "db.coll"}, "operationType": "insert"}`},
		{`[{"$project": {"operationType": "insert", "ns": {"db": "$ns.db", "coll": "$ns.coll", "viewOn": "db.coll"}}}]`,
			`{"_id": {"_data": "82AB"}, "ns": {"db": "database0", "coll": "collection0", "viewOn": "db.coll"}, "operationType": "insert"}`},
		{`[{"$project": {"optype": "$operationType", "ns": 1, "newField": "value"}}]`,
			`{"_id": {"_data": "82AB"}, "ns": {"db": "database0", "coll": "collection0"}, "optype": "insert", "newField": "value"}`},
		{`[{"$project": {"_id": 0}}]`,
			`{"operationType": "insert", "clusterTime": {"$timestamp": {"t": 1, "i": 1}}, "fullDocument": {"_id": 1, "z": 3}, "ns": {"db": "database0", "coll": "collection0"}, "documentKey": {"_id": 1}}`},
		{`[{"$match": {"fullDocument.z": 3}}]`, ev},
	}
	for _, c := range cases {
		p, err := CompilePipeline(arrB(t, c.pipeline))
		if err != nil {
			t.Fatalf("%s: %v", c.pipeline, err)
		}
		if !p.PerDocument() {
			t.Errorf("%s: not per-document", c.pipeline)
		}
		got, ok, err := p.ApplyOne(docB(t, ev), nil)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", c.pipeline, ok, err)
		}
		sameB(t, c.pipeline, got, docB(t, c.want))
	}
}
