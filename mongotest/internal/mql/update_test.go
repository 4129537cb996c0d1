package mql

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestUpdateOperators(t *testing.T) {
	cases := []struct {
		name, doc, update, want string
		// expected description: updatedFields, removedFields, truncatedArrays
		updated, removed string
	}{
		{"set new", `{"_id": 1}`, `{"$set": {"x": 1}}`, `{"_id": 1, "x": 1}`, `{"x": 1}`, `[]`},
		{"set existing", `{"_id": 1, "x": 1, "y": 2}`, `{"$set": {"x": 5}}`, `{"_id": 1, "x": 5, "y": 2}`, `{"x": 5}`, `[]`},
		{"set same value is a no-op", `{"_id": 1, "x": 1}`, `{"$set": {"x": 1}}`, `{"_id": 1, "x": 1}`, `{}`, `[]`},
		{"set other numeric type is a change", `{"_id": 1, "x": 1}`, `{"$set": {"x": 1.0}}`, `{"_id": 1, "x": 1.0}`, `{"x": 1.0}`, `[]`},
		{"set dotted creates docs", `{"_id": 1}`, `{"$set": {"a.b.c": 1}}`, `{"_id": 1, "a": {"b": {"c": 1}}}`, `{"a": {"b": {"c": 1}}}`, `[]`},
		{"set dotted into existing", `{"_id": 1, "a": {"x": 1}}`, `{"$set": {"a.b": 1}}`, `{"_id": 1, "a": {"x": 1, "b": 1}}`, `{"a.b": 1}`, `[]`},
		{"set two new siblings", `{"_id": 1}`, `{"$set": {"a.c": 2, "a.b": 1}}`, `{"_id": 1, "a": {"b": 1, "c": 2}}`, `{"a": {"b": 1, "c": 2}}`, `[]`},
		{"fields applied in lexicographic order", `{"_id": 1}`, `{"$set": {"b": 1, "a": 1, "10": 1, "9": 1}}`, `{"_id": 1, "9": 1, "10": 1, "a": 1, "b": 1}`, `{"9": 1, "10": 1, "a": 1, "b": 1}`, `[]`},
		{"set array index", `{"_id": 1, "a": [1, 2, 3]}`, `{"$set": {"a.1": 9}}`, `{"_id": 1, "a": [1, 9, 3]}`, `{"a.1": 9}`, `[]`},
		{"set array index pads", `{"_id": 1, "a": [1]}`, `{"$set": {"a.3": 9}}`, `{"_id": 1, "a": [1, null, null, 9]}`, `{"a.3": 9}`, `[]`},
		{"set numeric field on doc", `{"_id": 1, "a": {}}`, `{"$set": {"a.0": 9}}`, `{"_id": 1, "a": {"0": 9}}`, `{"a.0": 9}`, `[]`},
		{"set inside array element", `{"_id": 1, "a": [{"b": 1}]}`, `{"$set": {"a.0.b": 2}}`, `{"_id": 1, "a": [{"b": 2}]}`, `{"a.0.b": 2}`, `[]`},
		{"set whole subdocument", `{"_id": 1, "a": {"b": 1}}`, `{"$set": {"a": {"b": 1, "c": 2}}}`, `{"_id": 1, "a": {"b": 1, "c": 2}}`, `{"a": {"b": 1, "c": 2}}`, `[]`},
		{"set same _id", `{"_id": 1, "a": 1}`, `{"$set": {"_id": 1, "a": 2}}`, `{"_id": 1, "a": 2}`, `{"a": 2}`, `[]`},
		{"unset", `{"_id": 1, "x": 1, "y": 2}`, `{"$unset": {"y": ""}}`, `{"_id": 1, "x": 1}`, `{}`, `["y"]`},
		{"unset missing is a no-op", `{"_id": 1}`, `{"$unset": {"y": "", "a.b": 1}}`, `{"_id": 1}`, `{}`, `[]`},
		{"unset nested", `{"_id": 1, "a": {"b": 1, "c": 1}}`, `{"$unset": {"a.b": 1}}`, `{"_id": 1, "a": {"c": 1}}`, `{}`, `["a.b"]`},
		{"unset array element sets null", `{"_id": 1, "a": [1, 2]}`, `{"$unset": {"a.0": 1}}`, `{"_id": 1, "a": [null, 2]}`, `{"a.0": null}`, `[]`},
		{"inc int", `{"_id": 1, "n": 1}`, `{"$inc": {"n": 2}}`, `{"_id": 1, "n": 3}`, `{"n": 3}`, `[]`},
		{"inc missing", `{"_id": 1}`, `{"$inc": {"n": 2}}`, `{"_id": 1, "n": 2}`, `{"n": 2}`, `[]`},
		{"inc double", `{"_id": 1, "n": 1}`, `{"$inc": {"n": 0.5}}`, `{"_id": 1, "n": 1.5}`, `{"n": 1.5}`, `[]`},
		{"inc int32 overflow to long", `{"_id": 1, "n": 2147483647}`, `{"$inc": {"n": 1}}`, `{"_id": 1, "n": {"$numberLong": "2147483648"}}`, `{"n": {"$numberLong": "2147483648"}}`, `[]`},
		{"inc long", `{"_id": 1, "n": {"$numberLong": "5"}}`, `{"$inc": {"n": 1}}`, `{"_id": 1, "n": {"$numberLong": "6"}}`, `{"n": {"$numberLong": "6"}}`, `[]`},
		{"inc by zero is a no-op", `{"_id": 1, "n": 5}`, `{"$inc": {"n": 0}}`, `{"_id": 1, "n": 5}`, `{}`, `[]`},
		{"inc decimal", `{"_id": 1, "n": 1}`, `{"$inc": {"n": {"$numberDecimal": "0.1"}}}`, `{"_id": 1, "n": {"$numberDecimal": "1.1"}}`, `{"n": {"$numberDecimal": "1.1"}}`, `[]`},
		{"mul", `{"_id": 1, "n": 3}`, `{"$mul": {"n": 2}}`, `{"_id": 1, "n": 6}`, `{"n": 6}`, `[]`},
		{"mul missing gives zero", `{"_id": 1}`, `{"$mul": {"n": 2.5}}`, `{"_id": 1, "n": 0.0}`, `{"n": 0.0}`, `[]`},
		{"min lowers", `{"_id": 1, "n": 5}`, `{"$min": {"n": 3}}`, `{"_id": 1, "n": 3}`, `{"n": 3}`, `[]`},
		{"min keeps", `{"_id": 1, "n": 5}`, `{"$min": {"n": 7}}`, `{"_id": 1, "n": 5}`, `{}`, `[]`},
		{"max raises across types", `{"_id": 1, "n": 5}`, `{"$max": {"n": "a"}}`, `{"_id": 1, "n": "a"}`, `{"n": "a"}`, `[]`},
		{"max missing sets", `{"_id": 1}`, `{"$max": {"n": 1}}`, `{"_id": 1, "n": 1}`, `{"n": 1}`, `[]`},
		{"rename", `{"_id": 1, "a": 1, "b": 2}`, `{"$rename": {"a": "c"}}`, `{"_id": 1, "b": 2, "c": 1}`, `{"c": 1}`, `["a"]`},
		{"rename onto existing", `{"_id": 1, "a": 1, "b": 2}`, `{"$rename": {"a": "b"}}`, `{"_id": 1, "b": 1}`, `{"b": 1}`, `["a"]`},
		{"rename nested", `{"_id": 1, "a": {"x": 1}}`, `{"$rename": {"a.x": "b.y"}}`, `{"_id": 1, "a": {}, "b": {"y": 1}}`, `{"b": {"y": 1}}`, `["a.x"]`},
		{"rename applies at its destination", `{"_id": 1, "z": 1}`, `{"$rename": {"z": "a"}, "$set": {"b": 1}}`, `{"_id": 1, "a": 1, "b": 1}`, `{"a": 1, "b": 1}`, `["z"]`},
		{"rename missing is a no-op", `{"_id": 1}`, `{"$rename": {"a": "b"}}`, `{"_id": 1}`, `{}`, `[]`},
		{"push appends", `{"_id": 1, "a": [1]}`, `{"$push": {"a": 2}}`, `{"_id": 1, "a": [1, 2]}`, `{"a.1": 2}`, `[]`},
		{"push each appends", `{"_id": 1, "a": [1]}`, `{"$push": {"a": {"$each": [2, 3]}}}`, `{"_id": 1, "a": [1, 2, 3]}`, `{"a.1": 2, "a.2": 3}`, `[]`},
		{"push creates", `{"_id": 1}`, `{"$push": {"a": 1}}`, `{"_id": 1, "a": [1]}`, `{"a": [1]}`, `[]`},
		{"push array value", `{"_id": 1, "a": []}`, `{"$push": {"a": [1, 2]}}`, `{"_id": 1, "a": [[1, 2]]}`, `{"a.0": [1, 2]}`, `[]`},
		{"push position", `{"_id": 1, "a": [1, 2]}`, `{"$push": {"a": {"$each": [0], "$position": 0}}}`, `{"_id": 1, "a": [0, 1, 2]}`, `{"a": [0, 1, 2]}`, `[]`},
		{"push negative position", `{"_id": 1, "a": [1, 2]}`, `{"$push": {"a": {"$each": [9], "$position": -1}}}`, `{"_id": 1, "a": [1, 9, 2]}`, `{"a": [1, 9, 2]}`, `[]`},
		{"push slice", `{"_id": 1, "a": [1, 2]}`, `{"$push": {"a": {"$each": [3], "$slice": -2}}}`, `{"_id": 1, "a": [2, 3]}`, `{"a": [2, 3]}`, `[]`},
		{"push slice zero", `{"_id": 1, "a": [1, 2]}`, `{"$push": {"a": {"$each": [3], "$slice": 0}}}`, `{"_id": 1, "a": []}`, `{"a": []}`, `[]`},
		{"push sort", `{"_id": 1, "a": [3, 1]}`, `{"$push": {"a": {"$each": [2], "$sort": 1}}}`, `{"_id": 1, "a": [1, 2, 3]}`, `{"a": [1, 2, 3]}`, `[]`},
		{"push sort desc", `{"_id": 1, "a": [3, 1]}`, `{"$push": {"a": {"$each": [2], "$sort": -1}}}`, `{"_id": 1, "a": [3, 2, 1]}`, `{"a": [3, 2, 1]}`, `[]`},
		{"push sort by field", `{"_id": 1, "a": [{"s": 3}, {"s": 1}]}`, `{"$push": {"a": {"$each": [{"s": 2}], "$sort": {"s": 1}, "$slice": 2}}}`, `{"_id": 1, "a": [{"s": 1}, {"s": 2}]}`, `{"a": [{"s": 1}, {"s": 2}]}`, `[]`},
		{"push empty each is a no-op", `{"_id": 1, "a": [1]}`, `{"$push": {"a": {"$each": []}}}`, `{"_id": 1, "a": [1]}`, `{}`, `[]`},
		{"addToSet adds", `{"_id": 1, "a": [1]}`, `{"$addToSet": {"a": 2}}`, `{"_id": 1, "a": [1, 2]}`, `{"a": [1, 2]}`, `[]`},
		{"addToSet existing is a no-op", `{"_id": 1, "a": [1, 2]}`, `{"$addToSet": {"a": 2.0}}`, `{"_id": 1, "a": [1, 2]}`, `{}`, `[]`},
		{"addToSet each", `{"_id": 1, "a": [1]}`, `{"$addToSet": {"a": {"$each": [1, 2, 2, 3]}}}`, `{"_id": 1, "a": [1, 2, 3]}`, `{"a": [1, 2, 3]}`, `[]`},
		{"addToSet creates", `{"_id": 1}`, `{"$addToSet": {"a": {"$each": [1, 1]}}}`, `{"_id": 1, "a": [1]}`, `{"a": [1]}`, `[]`},
		{"pull value", `{"_id": 1, "a": [1, 2, 1, 3]}`, `{"$pull": {"a": 1}}`, `{"_id": 1, "a": [2, 3]}`, `{"a": [2, 3]}`, `[]`},
		{"pull condition", `{"_id": 1, "a": [1, 5, 6, 2]}`, `{"$pull": {"a": {"$gte": 5}}}`, `{"_id": 1, "a": [1, 2]}`, `{"a": [1, 2]}`, `[]`},
		{"pull in", `{"_id": 1, "a": ["x", "y", "z"]}`, `{"$pull": {"a": {"$in": ["x", "z"]}}}`, `{"_id": 1, "a": ["y"]}`, `{"a": ["y"]}`, `[]`},
		{"pull document condition", `{"_id": 1, "a": [{"b": 1, "c": 1}, {"b": 2}, 3]}`, `{"$pull": {"a": {"b": 1}}}`, `{"_id": 1, "a": [{"b": 2}, 3]}`, `{"a": [{"b": 2}, 3]}`, `[]`},
		{"pull nothing is a no-op", `{"_id": 1, "a": [1]}`, `{"$pull": {"a": 5}}`, `{"_id": 1, "a": [1]}`, `{}`, `[]`},
		{"pull missing is a no-op", `{"_id": 1}`, `{"$pull": {"a": 5}}`, `{"_id": 1}`, `{}`, `[]`},
		{"pullAll", `{"_id": 1, "a": [0, 2, 5, 5, 1, 0]}`, `{"$pullAll": {"a": [0, 5]}}`, `{"_id": 1, "a": [2, 1]}`, `{"a": [2, 1]}`, `[]`},
		{"pop last", `{"_id": 1, "a": [1, 2, 3]}`, `{"$pop": {"a": 1}}`, `{"_id": 1, "a": [1, 2]}`, `{"a": [1, 2]}`, `[]`},
		{"pop first", `{"_id": 1, "a": [1, 2, 3]}`, `{"$pop": {"a": -1}}`, `{"_id": 1, "a": [2, 3]}`, `{"a": [2, 3]}`, `[]`},
		{"pop empty is a no-op", `{"_id": 1, "a": []}`, `{"$pop": {"a": 1}}`, `{"_id": 1, "a": []}`, `{}`, `[]`},
		{"all positional", `{"_id": 1, "a": [1, 2]}`, `{"$inc": {"a.$[]": 10}}`, `{"_id": 1, "a": [11, 12]}`, `{"a.0": 11, "a.1": 12}`, `[]`},
		{"all positional nested", `{"_id": 1, "a": [{"b": 1}, {"b": 2}]}`, `{"$set": {"a.$[].c": 0}}`, `{"_id": 1, "a": [{"b": 1, "c": 0}, {"b": 2, "c": 0}]}`, `{"a.0.c": 0, "a.1.c": 0}`, `[]`},
		{"bit and", `{"_id": 1, "n": 13}`, `{"$bit": {"n": {"and": 10}}}`, `{"_id": 1, "n": 8}`, `{"n": 8}`, `[]`},
		{"bit or long", `{"_id": 1, "n": 5}`, `{"$bit": {"n": {"or": {"$numberLong": "2"}}}}`, `{"_id": 1, "n": {"$numberLong": "7"}}`, `{"n": {"$numberLong": "7"}}`, `[]`},
		{"several operators", `{"_id": 1, "a": 1, "b": [1], "c": 1}`, `{"$set": {"a": 2}, "$push": {"b": 2}, "$unset": {"c": 1}}`, `{"_id": 1, "a": 2, "b": [1, 2]}`, `{"a": 2, "b.1": 2}`, `["c"]`},
		{"setOnInsert ignored on update", `{"_id": 1}`, `{"$setOnInsert": {"a": 1}}`, `{"_id": 1}`, `{}`, `[]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := CompileUpdate(docB(t, c.update))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			if u.Kind() != UpdateOperators {
				t.Fatalf("kind %v", u.Kind())
			}
			in := docB(t, c.doc)
			before := docB(t, c.doc)
			got, desc, err := u.Apply(in, nil, false)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			sameB(t, "document", got, docB(t, c.want))
			sameB(t, "input untouched", in, before)
			sameB(t, "updatedFields", desc.UpdatedFields, docB(t, c.updated))
			rem := bson.A{}
			for _, r := range desc.RemovedFields {
				rem = append(rem, r)
			}
			sameB(t, "removedFields", rem, valB(t, c.removed))
			if desc.Empty() != (c.updated == `{}` && c.removed == `[]`) {
				t.Errorf("Empty() = %v", desc.Empty())
			}
		})
	}
}

func TestUpdateSetOnInsertAndCurrentDate(t *testing.T) {
	u, err := CompileUpdate(docB(t, `{"$setOnInsert": {"a": 1}, "$set": {"b": 2}, "$currentDate": {"d": true, "ts": {"$type": "timestamp"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	vars := &Vars{Now: bson.DateTime(1700000000123), ClusterTime: bson.Timestamp{T: 1700000000, I: 7}}
	got, _, err := u.Apply(docB(t, `{"_id": 5}`), vars, true)
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: int32(5)}, {Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)},
		{Key: "d", Value: bson.DateTime(1700000000123)}, {Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 7}}}
	// Fields are created in path order: a, b, d, ts.
	sameB(t, "insert", got, want)
}

func TestUpdatePositional(t *testing.T) {
	u, err := CompileUpdate(docB(t, `{"$set": {"a.$.b": 5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !u.NeedsPositional() {
		t.Fatal("NeedsPositional false")
	}
	doc := docB(t, `{"_id": 1, "a": [{"b": 1}, {"b": 2}]}`)
	got, desc, err := u.ApplyPositional(doc, nil, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "doc", got, docB(t, `{"_id": 1, "a": [{"b": 1}, {"b": 5}]}`))
	sameB(t, "updatedFields", desc.UpdatedFields, docB(t, `{"a.1.b": 5}`))
	_, _, err = u.Apply(doc, nil, false)
	codeB(t, "no position", err, 2)
}

func TestUpdateArrayFilters(t *testing.T) {
	u, err := CompileUpdateWithOptions(docB(t, `{"$set": {"a.$[x].ok": true}}`), UpdateOptions{ArrayFilters: bson.A{docB(t, `{"x.n": {"$gte": 2}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := u.Apply(docB(t, `{"_id": 1, "a": [{"n": 1}, {"n": 2}, {"n": 3}]}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "doc", got, docB(t, `{"_id": 1, "a": [{"n": 1}, {"n": 2, "ok": true}, {"n": 3, "ok": true}]}`))

	u, err = CompileUpdateWithOptions(docB(t, `{"$inc": {"a.$[big]": 100}}`), UpdateOptions{ArrayFilters: bson.A{docB(t, `{"big": {"$gt": 5}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err = u.Apply(docB(t, `{"_id": 1, "a": [1, 6, 10]}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "doc", got, docB(t, `{"_id": 1, "a": [1, 106, 110]}`))

	_, err = CompileUpdateWithOptions(docB(t, `{"$set": {"a.$[y]": 1}}`), UpdateOptions{ArrayFilters: bson.A{docB(t, `{"x": 1}`)}})
	codeB(t, "unknown identifier", err, 2)
	_, err = CompileUpdateWithOptions(docB(t, `{"$set": {"a": 1}}`), UpdateOptions{ArrayFilters: bson.A{docB(t, `{"x": 1}`)}})
	codeB(t, "unused filter", err, 9)
}

func TestUpdateErrors(t *testing.T) {
	cases := []struct {
		name, doc, update string
		code              int32
		msg               string
	}{
		{"unknown modifier", `{"_id": 1}`, `{"$foo": {"a": 1}}`, 9, "Unknown modifier: $foo"},
		{"modifier not a document", `{"_id": 1}`, `{"$set": 1}`, 9, "Modifiers operate on fields but we found type int instead"},
		{"conflict", `{"_id": 1}`, `{"$set": {"a": 1, "a.b": 2}}`, 40, "Updating the path 'a.b' would create a conflict at 'a'"},
		{"conflict across operators", `{"_id": 1}`, `{"$set": {"a": 1}, "$inc": {"a": 2}}`, 40, "would create a conflict at 'a'"},
		{"empty field name", `{"_id": 1}`, `{"$set": {"a..b": 1}}`, 56, "contains an empty field name"},
		{"change _id", `{"_id": 1}`, `{"$set": {"_id": 2}}`, 66, "would modify the immutable field '_id'"},
		{"inc _id", `{"_id": 1}`, `{"$inc": {"_id": 1}}`, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"},
		{"unset _id", `{"_id": 1}`, `{"$unset": {"_id": 1}}`, 66, "immutable field '_id'"},
		{"inc non-number arg", `{"_id": 1}`, `{"$inc": {"a": "x"}}`, 14, "Cannot increment with non-numeric argument"},
		{"inc non-number field", `{"_id": 1, "a": "x"}`, `{"$inc": {"a": 1}}`, 14, "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string"},
		{"inc long overflow", `{"_id": 1, "a": {"$numberLong": "9223372036854775807"}}`, `{"$inc": {"a": 1}}`, 2, "Failed to apply $inc operations"},
		{"set below scalar", `{"_id": 1, "a": 1}`, `{"$set": {"a.b": 1}}`, 28, "Cannot create field 'b' in element {a: 1}"},
		{"set named field in array", `{"_id": 1, "a": [1]}`, `{"$set": {"a.x": 1}}`, 28, "Cannot create field 'x'"},
		{"push to non-array", `{"_id": 1, "a": 1}`, `{"$push": {"a": 1}}`, 2, "The field 'a' must be an array but is of type int in document {_id: 1}"},
		{"push each not array", `{"_id": 1}`, `{"$push": {"a": {"$each": 1}}}`, 2, "The argument to $each in $push must be an array"},
		{"addToSet non-array", `{"_id": 1, "a": 1}`, `{"$addToSet": {"a": 1}}`, 2, "Cannot apply $addToSet to non-array field"},
		{"pull non-array", `{"_id": 1, "a": 1}`, `{"$pull": {"a": 1}}`, 2, "Cannot apply $pull to a non-array value"},
		{"pullAll not array", `{"_id": 1}`, `{"$pullAll": {"a": 1}}`, 2, "$pullAll requires an array argument"},
		{"pop bad value", `{"_id": 1}`, `{"$pop": {"a": 2}}`, 9, "$pop expects 1 or -1, found: 2"},
		{"pop non-array", `{"_id": 1, "a": 1}`, `{"$pop": {"a": 1}}`, 14, "Path 'a' contains an element of non-array type 'int'"},
		{"rename to non-string", `{"_id": 1}`, `{"$rename": {"a": 1}}`, 2, "The 'to' field for $rename must be a string"},
		{"rename same", `{"_id": 1}`, `{"$rename": {"a": "a"}}`, 2, "must differ"},
		{"currentDate bad", `{"_id": 1}`, `{"$currentDate": {"a": 1}}`, 2, "is not valid type for $currentDate"},
		{"array update on missing", `{"_id": 1}`, `{"$set": {"a.$[]": 1}}`, 2, "The path 'a' must exist in the document in order to apply array updates."},
		{"array update on scalar", `{"_id": 1, "a": 1}`, `{"$set": {"a.$[]": 1}}`, 2, "Cannot apply array updates to non-array element a: 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := CompileUpdate(docB(t, c.update))
			if err == nil {
				_, _, err = u.Apply(docB(t, c.doc), nil, false)
			}
			codeB(t, c.name, err, c.code)
			if err != nil && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q does not contain %q", err.Error(), c.msg)
			}
		})
	}
}

func TestUpdateReplacement(t *testing.T) {
	u, err := CompileUpdate(docB(t, `{"b": 2, "a": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if u.Kind() != UpdateReplacement {
		t.Fatalf("kind %v", u.Kind())
	}
	got, desc, err := u.Apply(docB(t, `{"_id": 7, "x": 1}`), nil, false)
	if err != nil || !desc.Replacement || desc.Empty() {
		t.Fatalf("apply: %v %+v", err, desc)
	}
	sameB(t, "keeps _id first", got, docB(t, `{"_id": 7, "b": 2, "a": 1}`))
	_, desc, _ = u.Apply(docB(t, `{"_id": 7, "b": 2, "a": 1}`), nil, false)
	if !desc.Empty() {
		t.Errorf("identical replacement must be a no-op: %+v", desc)
	}

	u, _ = CompileUpdate(docB(t, `{"a": 1, "_id": 7}`))
	got, _, err = u.Apply(docB(t, `{"_id": 7}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "moves _id first", got, docB(t, `{"_id": 7, "a": 1}`))

	u, _ = CompileUpdate(docB(t, `{"_id": 8, "a": 1}`))
	_, _, err = u.Apply(docB(t, `{"_id": 7}`), nil, false)
	codeB(t, "changed _id", err, 66)

	_, err = CompileUpdate(docB(t, `{"a": 1, "$set": {"b": 1}}`))
	codeB(t, "dollar field in replacement", err, 52)
}

func TestUpdatePipeline(t *testing.T) {
	// MongoDB's change-stream spec test "Test array truncation".
	u, err := CompileUpdate(bson.A{docB(t, `{"$set": {"array": ["foo", {"a": "bar"}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if u.Kind() != UpdatePipeline {
		t.Fatalf("kind %v", u.Kind())
	}
	got, desc, err := u.Apply(docB(t, `{"_id": 1, "a": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "doc", got, docB(t, `{"_id": 1, "a": 1, "array": ["foo", {"a": "bar"}]}`))
	sameB(t, "updatedFields", desc.UpdatedFields, bson.D{})
	if len(desc.RemovedFields) != 0 || len(desc.TruncatedArrays) != 1 || desc.TruncatedArrays[0] != (TruncatedArray{Field: "array", NewSize: 2}) {
		t.Errorf("desc = %+v", desc)
	}

	u, err = CompileUpdate(bson.A{
		docB(t, `{"$set": {"total": {"$add": ["$a", "$b"]}, "b": "$$REMOVE"}}`),
		docB(t, `{"$unset": "a"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, desc, err = u.Apply(docB(t, `{"_id": 1, "a": 1, "b": 2}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "doc", got, docB(t, `{"_id": 1, "total": 3}`))
	sameB(t, "updatedFields", desc.UpdatedFields, docB(t, `{"total": 3}`))
	if strings.Join(desc.RemovedFields, ",") != "a,b" {
		t.Errorf("removed %v", desc.RemovedFields)
	}

	// $replaceWith without _id keeps the original _id.
	u, _ = CompileUpdate(bson.A{docB(t, `{"$replaceWith": {"x": "$a"}}`)})
	got, _, err = u.Apply(docB(t, `{"_id": 3, "a": 9}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "replaceWith", got, docB(t, `{"_id": 3, "x": 9}`))

	u, _ = CompileUpdate(bson.A{docB(t, `{"$set": {"_id": 4}}`)})
	_, _, err = u.Apply(docB(t, `{"_id": 3}`), nil, false)
	codeB(t, "pipeline changing _id", err, 66)

	_, err = CompileUpdate(bson.A{docB(t, `{"$group": {"_id": 1}}`)})
	codeB(t, "stage not allowed in updates", err, 72)
}

func TestDisambiguatedPaths(t *testing.T) {
	cases := []struct{ doc, update, paths string }{
		// MongoDB's examples (change-streams-disambiguatedPaths spec tests).
		{`{"_id": 1, "a": {"1": 1}}`, `{"$set": {"a.1": 2}}`, `{"a.1": ["a", "1"]}`},
		{`{"_id": 1, "a": [{"1": 1}]}`, `{"$set": {"a.0.1": 2}}`, `{"a.0.1": ["a", {"$numberInt": "0"}, "1"]}`},
		{`{"_id": 1, "a": [1, 2]}`, `{"$set": {"a.1": 5}}`, `{}`},
		{`{"_id": 1, "a": {"1": 1}}`, `{"$unset": {"a.1": 1}}`, `{"a.1": ["a", "1"]}`},
	}
	for _, c := range cases {
		u, err := CompileUpdate(docB(t, c.update))
		if err != nil {
			t.Fatal(err)
		}
		_, desc, err := u.Apply(docB(t, c.doc), nil, false)
		if err != nil {
			t.Fatal(err)
		}
		got := desc.DisambiguatedPaths
		if got == nil {
			got = bson.D{}
		}
		sameB(t, c.update, got, docB(t, c.paths))
	}
}

func TestUpsertSeed(t *testing.T) {
	cases := []struct{ filter, want string }{
		{`{"a": 1, "b.c": 2, "$and": [{"d": 3}]}`, `{"a": 1, "b": {"c": 2}, "d": 3}`},
		{`{"a": {"$eq": 1}, "b": {"$gt": 1}, "c": {"$in": [5]}, "d": {"$in": [1, 2]}}`, `{"a": 1, "c": 5}`},
		{`{"x": 1, "_id": 5}`, `{"_id": 5, "x": 1}`},
		{`{"a": {"$regex": "x"}, "b": {"$lt": 3}}`, `{}`},
		{`{"a.b": 1, "a.c": 2}`, `{"a": {"b": 1, "c": 2}}`},
		{`{"$or": [{"a": 1}]}`, `{"a": 1}`},
		{`{"a": {"x": 1}}`, `{"a": {"x": 1}}`},
	}
	for _, c := range cases {
		got, err := UpsertSeed(docB(t, c.filter))
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		sameB(t, c.filter, got, docB(t, c.want))
	}
	_, err := UpsertSeed(docB(t, `{"a": 1, "$and": [{"a": 2}]}`))
	codeB(t, "twice", err, 54)
	_, err = UpsertSeed(docB(t, `{"a": 1, "a.b": 2}`))
	codeB(t, "prefix", err, 54)
}

func TestUpsertApply(t *testing.T) {
	seed, err := UpsertSeed(docB(t, `{"name": "x", "_id": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := CompileUpdate(docB(t, `{"$set": {"a": 1}, "$setOnInsert": {"created": true}}`))
	got, _, err := u.Apply(seed, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "upsert", got, docB(t, `{"_id": 3, "name": "x", "a": 1, "created": true}`))

	u, _ = CompileUpdate(docB(t, `{"$set": {"_id": 9, "a": 1}}`))
	got, _, err = u.Apply(docB(t, `{"name": "x"}`), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	sameB(t, "_id set by the update comes first", got, docB(t, `{"_id": 9, "name": "x", "a": 1}`))

	_, _, err = u.Apply(docB(t, `{"_id": 3}`), nil, true)
	codeB(t, "query _id is immutable", err, 66)
}

func TestApplyForQuery(t *testing.T) {
	cases := []struct{ query, update, doc, want string }{
		{`{"grades": 80}`, `{"$set": {"grades.$": 82}}`, `{"_id": 1, "grades": [85, 80, 80]}`, `{"_id": 1, "grades": [85, 82, 80]}`},
		{`{"_id": 1, "items.sku": "b"}`, `{"$inc": {"items.$.qty": 1}}`, `{"_id": 1, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}]}`, `{"_id": 1, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}`},
		{`{"items": {"$elemMatch": {"sku": "a", "qty": {"$gt": 0}}}}`, `{"$set": {"items.$.ok": true}}`, `{"_id": 1, "items": [{"sku": "a", "qty": 1}]}`, `{"_id": 1, "items": [{"sku": "a", "qty": 1, "ok": true}]}`},
	}
	for _, c := range cases {
		u, err := CompileUpdate(docB(t, c.update))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := u.ApplyForQuery(docB(t, c.doc), nil, false, docB(t, c.query))
		if err != nil {
			t.Fatalf("%s: %v", c.update, err)
		}
		sameB(t, c.update, got, docB(t, c.want))
	}
	u, _ := CompileUpdate(docB(t, `{"$set": {"a.$": 1}}`))
	_, _, err := u.ApplyForQuery(docB(t, `{"_id": 1, "a": [1]}`), nil, false, docB(t, `{"_id": 1}`))
	codeB(t, "no array condition in the query", err, 2)
}
