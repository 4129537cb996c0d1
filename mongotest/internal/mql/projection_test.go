package mql

import (
	"strings"
	"testing"
)

func TestProjectStage(t *testing.T) {
	doc := `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, 5, {"x": 3}, [{"x": 4}]], "s": "str"}`
	cases := []struct{ spec, want string }{
		{`{"a": 1}`, `{"_id": 1, "a": 1}`},
		{`{"a": true, "_id": 0}`, `{"a": 1}`},
		{`{"_id": 0}`, `{"a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, 5, {"x": 3}, [{"x": 4}]], "s": "str"}`},
		{`{"_id": 1}`, `{"_id": 1}`},
		{`{"a": 0, "arr": 0, "s": 0}`, `{"_id": 1, "b": {"c": 2, "d": 3}}`},
		{`{"b.c": 1}`, `{"_id": 1, "b": {"c": 2}}`},
		{`{"b": {"d": 1}}`, `{"_id": 1, "b": {"d": 3}}`},
		{`{"b.c": 0, "arr": 0}`, `{"_id": 1, "a": 1, "b": {"d": 3}, "s": "str"}`},
		// inclusion through arrays drops scalars, recurses into nested arrays ($project)
		{`{"arr.x": 1, "_id": 0}`, `{"arr": [{"x": 1}, {"x": 3}, [{"x": 4}]]}`},
		// exclusion through arrays keeps scalars
		{`{"arr.x": 0, "_id": 0, "b": 0, "a": 0, "s": 0}`, `{"arr": [{"y": 2}, 5, {}, [{}]]}`},
		// computed fields come after included fields, in spec order
		{`{"z": "$a", "a": 1, "lit": {"$literal": 1}, "str": "hello"}`, `{"_id": 1, "a": 1, "z": 1, "lit": 1, "str": "hello"}`},
		{`{"b.e": "$a"}`, `{"_id": 1, "b": {"e": 1}}`},
		{`{"a.q": "$s"}`, `{"_id": 1, "a": {"q": "str"}}`},
		// scalars inside arrays are dropped by the inclusion part first
		{`{"arr.z": "$a", "_id": 0}`, `{"arr": [{"z": 1}, {"z": 1}, [{"z": 1}]]}`},
		{`{"missing": "$nope", "a": 1}`, `{"_id": 1, "a": 1}`},
		{`{"optype": "$s", "_id": 0}`, `{"optype": "str"}`},
		{`{"_id": "$s", "n": {"$add": ["$a", 1]}}`, `{"_id": "str", "n": 2}`},
	}
	for _, c := range cases {
		p, err := CompilePipeline(arrB(t, `[{"$project": `+c.spec+`}]`))
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		got, ok, err := p.ApplyOne(docB(t, doc), nil)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", c.spec, ok, err)
		}
		sameB(t, c.spec, got, docB(t, c.want))
	}
}

func TestProjectErrors(t *testing.T) {
	cases := []struct {
		spec string
		code int32
		msg  string
	}{
		{`{}`, 51272, "Invalid $project :: caused by :: projection specification must have at least one field"},
		{`{"a": 1, "b": 0}`, 31254, "Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection"},
		{`{"a": 0, "b": 1}`, 31253, "Cannot do inclusion on field b in exclusion projection"},
		{`{"a": 0, "b": "$x"}`, 31252, "Cannot use expression other than $meta in exclusion projection"},
		{`{"a": 1, "a.b": 1}`, 31249, "Path collision at a.b remaining portion b"},
		{`{"a.b": 1, "a": 1}`, 31250, "Path collision at a"},
		{`{"a": {}}`, 51270, "An empty sub-projection is not a valid value"},
		{`{"$a": 1}`, 16410, "FieldPath field names may not start with '$'"},
		{`{"a": {"$foo": 1}}`, 168, "Unrecognized expression '$foo'"},
	}
	for _, c := range cases {
		_, err := CompilePipeline(arrB(t, `[{"$project": `+c.spec+`}]`))
		codeB(t, c.spec, err, c.code)
		if err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: message %q lacks %q", c.spec, err.Error(), c.msg)
		}
	}
	_, err := CompilePipeline(arrB(t, `[{"$project": 1}]`))
	codeB(t, "not an object", err, 15969)
}

func TestAddFieldsAndUnset(t *testing.T) {
	doc := `{"_id": 1, "a": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2]}`
	cases := []struct{ stage, want string }{
		{`{"$addFields": {"b": {"$add": ["$a", 1]}}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2], "b": 2}`},
		{`{"$set": {"a": "x"}}`, `{"_id": 1, "a": "x", "specs": {"doors": 4}, "arr": [{"x": 1}, 2]}`},
		{`{"$set": {"specs.fuel": "unleaded"}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4, "fuel": "unleaded"}, "arr": [{"x": 1}, 2]}`},
		{`{"$set": {"specs": {"fuel": "unleaded"}}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4, "fuel": "unleaded"}, "arr": [{"x": 1}, 2]}`},
		{`{"$set": {"e": {}}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2], "e": {}}`},
		{`{"$set": {"a": "$$REMOVE"}}`, `{"_id": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2]}`},
		{`{"$set": {"arr.y": 0}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4}, "arr": [{"x": 1, "y": 0}, {"y": 0}]}`},
		{`{"$set": {"n": 1, "t": true}}`, `{"_id": 1, "a": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2], "n": 1, "t": true}`},
		{`{"$unset": "a"}`, `{"_id": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2]}`},
		{`{"$unset": ["a", "specs.doors", "arr.x"]}`, `{"_id": 1, "specs": {}, "arr": [{}, 2]}`},
		{`{"$replaceRoot": {"newRoot": "$specs"}}`, `{"doors": 4}`},
		{`{"$replaceWith": {"$mergeObjects": [{"a": 0, "z": 0}, "$$ROOT"]}}`, `{"a": 1, "z": 0, "_id": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 2]}`},
	}
	for _, c := range cases {
		p, err := CompilePipeline(arrB(t, `[`+c.stage+`]`))
		if err != nil {
			t.Fatalf("%s: %v", c.stage, err)
		}
		got, ok, err := p.ApplyOne(docB(t, doc), nil)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", c.stage, ok, err)
		}
		sameB(t, c.stage, got, docB(t, c.want))
	}
	p, _ := CompilePipeline(arrB(t, `[{"$replaceRoot": {"newRoot": "$a"}}]`))
	_, _, err := p.ApplyOne(docB(t, doc), nil)
	codeB(t, "newRoot not a document", err, 40228)
	_, err = CompilePipeline(arrB(t, `[{"$unset": 1}]`))
	codeB(t, "$unset spec", err, 31002)
}

func TestFindProjection(t *testing.T) {
	doc := `{"_id": 1, "a": 1, "arr": [1, 2, 3, 4, 5], "docs": [{"k": 1}, {"k": 2}, {"k": 2, "z": 1}], "nested": [[{"x": 1}]]}`
	cases := []struct{ spec, want string }{
		{`{}`, doc},
		{`{"a": 1}`, `{"_id": 1, "a": 1}`},
		{`{"arr": {"$slice": 2}}`, `{"_id": 1, "a": 1, "arr": [1, 2], "docs": [{"k": 1}, {"k": 2}, {"k": 2, "z": 1}], "nested": [[{"x": 1}]]}`},
		{`{"arr": {"$slice": -2}, "a": 1}`, `{"_id": 1, "a": 1, "arr": [4, 5]}`},
		{`{"arr": {"$slice": [1, 2]}, "_id": 0, "a": 1}`, `{"a": 1, "arr": [2, 3]}`},
		{`{"arr": {"$slice": [-2, 10]}, "_id": 0, "a": 1}`, `{"a": 1, "arr": [4, 5]}`},
		{`{"docs": {"$elemMatch": {"k": 2}}}`, `{"_id": 1, "docs": [{"k": 2}]}`},
		{`{"docs": {"$elemMatch": {"k": 9}}}`, `{"_id": 1}`},
		{`{"nested.x": 1, "_id": 0}`, `{"nested": []}`},
		{`{"b": "$a", "_id": 0}`, `{"b": 1}`},
	}
	for _, c := range cases {
		p, err := CompileProjection(docB(t, c.spec))
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		got, err := p.Apply(docB(t, doc), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		sameB(t, c.spec, got, docB(t, c.want))
	}
	_, err := CompileProjection(docB(t, `{"a": 1, "b": 0}`))
	codeB(t, "mixed", err, 31254)
	if err != nil && strings.Contains(err.Error(), "Invalid") {
		t.Errorf("find projection errors carry no stage prefix: %v", err)
	}
}

func TestFindProjectionPositionalUnsupported(t *testing.T) {
	_, err := CompileProjection(docB(t, `{"a.$": 1}`))
	codeB(t, "positional", err, 2)
	if err != nil && !strings.Contains(err.Error(), "not supported by mongotest") {
		t.Errorf("message: %v", err)
	}
}
