package unified

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// val parses an Extended JSON value.
func val(t *testing.T, js string) bson.RawValue {
	t.Helper()
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+js+`}`), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", js, err)
	}
	return d.Lookup("v")
}

// fakeEntities serves $$matchesEntity and $$sessionLsid in tests.
type fakeEntities map[string]bson.RawValue

func (f fakeEntities) bsonValue(name string) (bson.RawValue, error) {
	v, ok := f[name]
	if !ok {
		return bson.RawValue{}, errors.New("no entity " + name)
	}
	return v, nil
}

func (f fakeEntities) sessionLsid(name string) (bson.Raw, error) {
	v, ok := f["lsid:"+name]
	if !ok {
		return nil, errors.New("no session " + name)
	}
	return v.Document(), nil
}

func TestMatch(t *testing.T) {
	ents := fakeEntities{}
	cases := []struct {
		name, exp, act string
		wantErr        string // "" means must match; else a substring of the failure
	}{
		// Root and nested documents.
		{"root extra field", `{"x": 1}`, `{"x": 1, "y": 1}`, ""},
		{"root missing field", `{"x": 1, "y": 1}`, `{"x": 1}`, "y: missing"},
		{"nested extra field", `{"x": {"y": 1}}`, `{"x": {"y": 1, "z": 1}}`, "x.z: unexpected field"},
		{"nested in array extra field", `{"p": [{"a": {}}]}`, `{"p": [{"a": {"b": 1}}]}`, "p[0].a.b: unexpected field"},
		{"key order", `{"x": 1, "y": 2}`, `{"y": 2, "x": 1}`, ""},
		{"not a document", `{"x": {"y": 1}}`, `{"x": 5}`, "x: expected a document"},
		{"null is not missing", `{"x": null}`, `{"x": null}`, ""},
		{"null vs missing", `{"x": null}`, `{}`, "x: missing"},

		// Arrays.
		{"array same", `{"a": [1, 2, 3]}`, `{"a": [1, 2, 3]}`, ""},
		{"array longer", `{"a": [1, 2, 3]}`, `{"a": [1, 2, 3, 4]}`, "a: expected 3 elements, got 4"},
		{"array element", `{"a": [1, 2]}`, `{"a": [1, 3]}`, "a[1]: expected int 2, got int 3"},
		{"array vs doc", `{"a": []}`, `{"a": {}}`, "a: expected an array"},

		// Flexible numbers.
		{"int vs double", `{"ok": 1}`, `{"ok": 1.0}`, ""},
		{"int vs long", `{"n": 1}`, `{"n": {"$numberLong": "1"}}`, ""},
		{"int vs 1.5", `{"n": 1}`, `{"n": 1.5}`, "n: expected int 1, got double 1.5"},
		{"number vs string", `{"n": 1}`, `{"n": "1"}`, "n: expected int 1"},
		{"decimal not flexible", `{"n": {"$numberDecimal": "1"}}`, `{"n": 1}`, "n: expected decimal"},
		{"string", `{"s": "a"}`, `{"s": "b"}`, `expected string "a", got string "b"`},

		// $$exists.
		{"exists true", `{"x": {"$$exists": true}}`, `{"x": null}`, ""},
		{"exists true missing", `{"x": {"$$exists": true}}`, `{}`, "x: missing; expected it to exist"},
		{"exists false", `{"x": {"$$exists": false}}`, `{}`, ""},
		{"exists false present", `{"x": {"$$exists": false}}`, `{"x": 1}`, "x: expected no such field"},
		{"exists in nested does not count as extra", `{"d": {"x": {"$$exists": false}, "y": 1}}`, `{"d": {"y": 1}}`, ""},

		// $$type.
		{"type one", `{"x": {"$$type": "string"}}`, `{"x": "s"}`, ""},
		{"type list", `{"x": {"$$type": ["int", "long"]}}`, `{"x": {"$numberLong": "5"}}`, ""},
		{"type wrong", `{"x": {"$$type": ["int", "long"]}}`, `{"x": 5.5}`, "x: expected type int or long, got double 5.5"},
		{"type missing", `{"x": {"$$type": "int"}}`, `{}`, "x: missing"},
		{"type of array ignores elements", `{"x": {"$$type": "array"}}`, `{"x": [1, "a"]}`, ""},
		{"type number", `{"x": {"$$type": "number"}}`, `{"x": 2.5}`, ""},
		{"type timestamp", `{"x": {"$$type": "timestamp"}}`, `{"x": {"$timestamp": {"t": 1, "i": 2}}}`, ""},
		{"type object", `{"x": {"$$type": "object"}}`, `{"x": {"a": 1}}`, ""},
		{"type date", `{"x": {"$$type": "date"}}`, `{"x": {"$date": "2020-01-01T00:00:00Z"}}`, ""},
		{"type unknown", `{"x": {"$$type": "nope"}}`, `{"x": 1}`, "not supported"},

		// $$unsetOrMatches.
		{"unset", `{"x": {"$$unsetOrMatches": 2}}`, `{}`, ""},
		{"set and matches", `{"x": {"$$unsetOrMatches": 2}}`, `{"x": 2}`, ""},
		{"set and differs", `{"x": {"$$unsetOrMatches": 2}}`, `{"x": 3}`, "x: expected int 2, got int 3"},
		{"unsetOrMatches exists", `{"r": {"$$unsetOrMatches": {"$$exists": true}}}`, `{"r": {"_data": "x"}}`, ""},
		{"unsetOrMatches exists unset", `{"r": {"$$unsetOrMatches": {"$$exists": true}}}`, `{}`, ""},
		{"unsetOrMatches nested stays nested", `{"d": {"$$unsetOrMatches": {"a": 1}}}`, `{"d": {"a": 1, "b": 2}}`, "d.b: unexpected field"},

		// $$lte.
		{"lte equal", `{"x": {"$$lte": 1}}`, `{"x": 1.0}`, ""},
		{"lte less", `{"x": {"$$lte": 1}}`, `{"x": 0}`, ""},
		{"lte more", `{"x": {"$$lte": 1}}`, `{"x": 1.1}`, "x: expected a number <= 1"},
		{"lte not number", `{"x": {"$$lte": 1}}`, `{"x": "0"}`, "expected a number"},

		// $$matchAsDocument / $$matchAsRoot.
		{"matchAsDocument", `{"s": {"$$matchAsDocument": {"a": 1}}}`, `{"s": "{\"a\": {\"$numberInt\": \"1\"}}"}`, ""},
		{"matchAsDocument no extra", `{"s": {"$$matchAsDocument": {"a": 1}}}`, `{"s": "{\"a\": 1, \"b\": 2}"}`, "s.b: unexpected field"},
		{"matchAsDocument with root", `{"s": {"$$matchAsDocument": {"$$matchAsRoot": {"a": 1}}}}`, `{"s": "{\"a\": 1, \"b\": 2}"}`, ""},
		{"matchAsRoot nested", `{"d": {"$$matchAsRoot": {"a": 1}}}`, `{"d": {"a": 1, "b": 2}}`, ""},
		{"matchAsRoot only top", `{"d": {"$$matchAsRoot": {"a": {"x": 1}}}}`, `{"d": {"a": {"x": 1, "y": 1}}}`, "d.a.y: unexpected field"},

		// $$matchesHexBytes.
		{"hex bytes", `{"b": {"$$matchesHexBytes": "6162"}}`, `{"b": "ab"}`, ""},
		{"hex bytes binary", `{"b": {"$$matchesHexBytes": "0102"}}`, `{"b": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, ""},
		{"hex bytes differ", `{"b": {"$$matchesHexBytes": "6162"}}`, `{"b": "ac"}`, "expected bytes 6162"},

		// Unknown operator.
		{"unknown operator", `{"x": {"$$nope": 1}}`, `{"x": 1}`, "special operator $$nope not supported"},
		// A single $ key is a plain field, as in pipelines.
		{"dollar key", `{"pipeline": [{"$changeStream": {}}]}`, `{"pipeline": [{"$changeStream": {}}]}`, ""},
		{"dollar key extra", `{"pipeline": [{"$changeStream": {}}]}`, `{"pipeline": [{"$changeStream": {"fullDocument": "default"}}]}`, "pipeline[0].$changeStream.fullDocument: unexpected field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &matcher{ents: ents}
			err := m.match("", val(t, c.exp), val(t, c.act), true, true)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("expected a match, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("expected a mismatch containing %q, got a match", c.wantErr)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("expected a mismatch containing %q, got %q", c.wantErr, err)
			}
		})
	}
}

func TestMatchEntities(t *testing.T) {
	lsid := val(t, `{"id": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}}}`)
	ents := fakeEntities{
		"token":         val(t, `{"_data": "8264"}`),
		"n":             val(t, `5`),
		"lsid:session0": lsid,
	}
	m := &matcher{ents: ents}
	ok := []struct{ exp, act string }{
		{`{"t": {"$$matchesEntity": "token"}}`, `{"t": {"_data": "8264"}}`},
		{`{"n": {"$$matchesEntity": "n"}}`, `{"n": {"$numberLong": "5"}}`},
		{`{"lsid": {"$$sessionLsid": "session0"}}`, `{"lsid": {"id": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}}}}`},
	}
	for _, c := range ok {
		if err := m.match("", val(t, c.exp), val(t, c.act), true, true); err != nil {
			t.Errorf("%s vs %s: %v", c.exp, c.act, err)
		}
	}
	bad := []struct{ exp, act, want string }{
		{`{"t": {"$$matchesEntity": "token"}}`, `{"t": {"_data": "8265"}}`, "t._data"},
		{`{"t": {"$$matchesEntity": "token"}}`, `{"t": {"_data": "8264", "x": 1}}`, "t.x: unexpected field"},
		{`{"t": {"$$matchesEntity": "nope"}}`, `{"t": 1}`, "no entity nope"},
		{`{"lsid": {"$$sessionLsid": "session0"}}`, `{"lsid": {"id": 1}}`, "expected the lsid of session0"},
		{`{"lsid": {"$$sessionLsid": "session1"}}`, `{"lsid": {}}`, "no session session1"},
	}
	for _, c := range bad {
		err := m.match("", val(t, c.exp), val(t, c.act), true, true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s vs %s: expected an error containing %q, got %v", c.exp, c.act, c.want, err)
		}
	}
}

func TestMatchRootValue(t *testing.T) {
	// A whole result may itself be a special operator, a scalar or missing.
	m := &matcher{}
	if err := m.match("", val(t, `{"$$unsetOrMatches": {"a": 1}}`), bson.RawValue{}, false, true); err != nil {
		t.Errorf("unset root result: %v", err)
	}
	if err := m.match("", val(t, `{"$$type": "string"}`), val(t, `"x_1"`), true, true); err != nil {
		t.Errorf("root $$type: %v", err)
	}
	if err := m.match("", val(t, `"x_1"`), val(t, `"x_2"`), true, true); err == nil {
		t.Error("root string mismatch matched")
	}
	if err := m.match("", val(t, `{"a": 1}`), bson.RawValue{}, false, true); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing root result: %v", err)
	}
	if err := Match(val(t, `{"a": 1}`), val(t, `{"a": 1, "b": 2}`)); err != nil {
		t.Errorf("Match allows root extras: %v", err)
	}
}

func TestMatchArrayOfRootDocuments(t *testing.T) {
	m := &matcher{}
	exp, act := val(t, `[{"x": 1}, {"x": 2}]`), val(t, `[{"x": 1, "y": 1}, {"x": 2, "y": 2}]`)
	if err := m.matchArray("", exp.Array(), act.Array(), true); err != nil {
		t.Errorf("iterable result elements are root documents: %v", err)
	}
	if err := m.match("", exp, act, true, true); err == nil {
		t.Error("plain array elements are nested documents, yet extra fields matched")
	}
}

func TestSameValue(t *testing.T) {
	if !sameValue(val(t, `{"a": 1, "b": [1, {"c": 2}]}`), val(t, `{"b": [1.0, {"c": 2}], "a": 1}`)) {
		t.Error("key order or numeric type made equal documents differ")
	}
	if sameValue(val(t, `{"a": 1}`), val(t, `{"a": 1, "b": 2}`)) {
		t.Error("extra field made documents equal")
	}
	if sameValue(val(t, `{"a": {"$$exists": true}}`), val(t, `{"a": 1}`)) {
		t.Error("sameValue must not interpret operators")
	}
}

func TestShowShortens(t *testing.T) {
	long := strings.Repeat("x", 500)
	if s := show(val(t, `"`+long+`"`)); len(s) > maxShown {
		t.Errorf("show returned %d characters", len(s))
	}
}
