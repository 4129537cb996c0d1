package mql

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name, before, after string
		updated             string
		removed             string // comma separated
		truncated           string // field:size,...
	}{
		{"identical", `{"_id": 1, "a": [1, {"b": 2}]}`, `{"_id": 1, "a": [1, {"b": 2}]}`, `{}`, "", ""},
		{"spec test array truncation", `{"_id": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`, `{"_id": 1, "array": ["foo", {"a": "bar"}]}`, `{}`, "", "array:2"},
		{"new field", `{"_id": 1}`, `{"_id": 1, "a": {"b": 1}}`, `{"a": {"b": 1}}`, "", ""},
		{"changed scalar", `{"_id": 1, "a": 1}`, `{"_id": 1, "a": 2}`, `{"a": 2}`, "", ""},
		{"type change counts", `{"_id": 1, "a": 1}`, `{"_id": 1, "a": 1.0}`, `{"a": 1.0}`, "", ""},
		{"removed", `{"_id": 1, "a": 1, "b": 2}`, `{"_id": 1, "b": 2}`, `{}`, "a", ""},
		{"nested change", `{"_id": 1, "a": {"b": 1, "c": 1}}`, `{"_id": 1, "a": {"b": 2, "c": 1}}`, `{"a.b": 2}`, "", ""},
		{"nested removal", `{"_id": 1, "a": {"b": 1, "c": 1}}`, `{"_id": 1, "a": {"c": 1}}`, `{}`, "a.b", ""},
		{"array append", `{"_id": 1, "a": [1]}`, `{"_id": 1, "a": [1, 2, 3]}`, `{"a.1": 2, "a.2": 3}`, "", ""},
		{"array element change", `{"_id": 1, "a": [1, 2]}`, `{"_id": 1, "a": [1, 5]}`, `{"a.1": 5}`, "", ""},
		{"array element document change", `{"_id": 1, "a": [{"x": 1, "y": 1}]}`, `{"_id": 1, "a": [{"x": 2, "y": 1}]}`, `{"a.0.x": 2}`, "", ""},
		{"array shrink and change", `{"_id": 1, "a": [1, 2, 3]}`, `{"_id": 1, "a": [9]}`, `{"a.0": 9}`, "", "a:1"},
		{"array to scalar", `{"_id": 1, "a": [1]}`, `{"_id": 1, "a": 1}`, `{"a": 1}`, "", ""},
		// fields are compared by position: a field inserted before others
		// makes the following ones "inserted" too (server computeDocDiff)
		{"insert in the middle", `{"_id": 1, "b": 2}`, `{"_id": 1, "a": 1, "b": 2}`, `{"a": 1, "b": 2}`, "", ""},
		{"reorder", `{"_id": 1, "a": 1, "b": 2}`, `{"_id": 1, "b": 2, "a": 1}`, `{"a": 1}`, "", ""},
		// a sub-diff that is not smaller than the new value logs the value
		{"whole subdocument", `{"_id": 1, "x": "some padding here", "a": {"p": 1, "q": 1}}`, `{"_id": 1, "x": "some padding here", "a": {"p": 2, "q": 2}}`, `{"a": {"p": 2, "q": 2}}`, "", ""},
		{"doc to array", `{"_id": 1, "a": {"0": 1}}`, `{"_id": 1, "a": [1]}`, `{"a": [1]}`, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Diff(docB(t, c.before), docB(t, c.after))
			sameB(t, "updatedFields", d.UpdatedFields, docB(t, c.updated))
			if got := strings.Join(d.RemovedFields, ","); got != c.removed {
				t.Errorf("removedFields %q, want %q", got, c.removed)
			}
			var tr []string
			for _, x := range d.TruncatedArrays {
				tr = append(tr, x.Field+":"+itoaB(int(x.NewSize)))
			}
			if got := strings.Join(tr, ","); got != c.truncated {
				t.Errorf("truncatedArrays %q, want %q", got, c.truncated)
			}
			empty := c.updated == `{}` && c.removed == "" && c.truncated == ""
			if d.Empty() != empty {
				t.Errorf("Empty() = %v", d.Empty())
			}
		})
	}
}

func TestDiffReplacement(t *testing.T) {
	small := Diff(docB(t, `{"_id": 1, "a": 1, "pad": "xxxxxxxxxxxxxxxxxxxxxxxx"}`), docB(t, `{"_id": 1, "a": 2, "pad": "xxxxxxxxxxxxxxxxxxxxxxxx"}`))
	if small.Replacement {
		t.Error("a small change is a delta")
	}
	big := Diff(docB(t, `{"_id": 1, "a": 1, "b": 2}`), docB(t, `{"_id": 1, "c": 3, "d": 4}`))
	if !big.Replacement {
		t.Error("rewriting every field is logged as a replacement")
	}
}

func itoaB(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for i > 0 {
		s = string(rune('0'+i%10)) + s
		i /= 10
	}
	return s
}

func TestUpdateDescriptionDocument(t *testing.T) {
	d := Diff(docB(t, `{"_id": 1, "a": {"1": 1}, "b": [1, 2]}`), docB(t, `{"_id": 1, "a": {"1": 2}, "b": [1]}`))
	want := docB(t, `{"updatedFields": {"a.1": 2}, "removedFields": [], "truncatedArrays": [{"field": "b", "newSize": 1}], "disambiguatedPaths": {"a.1": ["a", "1"]}}`)
	sameB(t, "with disambiguatedPaths", d.Document(true), want)
	sameB(t, "without", d.Document(false), want[:3])
	var nilDesc *UpdateDescription
	if !nilDesc.Empty() {
		t.Error("nil description should be empty")
	}
	_ = bson.D{}
}
