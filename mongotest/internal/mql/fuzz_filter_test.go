package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzFilter checks that compiling and matching arbitrary filters against
// arbitrary documents never panics, and that a successfully compiled filter
// is deterministic.
func FuzzFilter(f *testing.F) {
	seeds := [][2]string{
		{`{"a": 1}`, `{"a": [1, 2]}`},
		{`{"a.b": {"$in": [null, 2]}}`, `{"a": [{"b": 2}, 3]}`},
		{`{"$or": [{"a": {"$gt": 1}}, {"b": {"$exists": false}}]}`, `{"b": {"c": 1}}`},
		{`{"a": {"$elemMatch": {"b": {"$size": 1}}}}`, `{"a": [{"b": [1]}]}`},
		{`{"$expr": {"$add": ["$a", 1]}}`, `{"a": 1.5}`},
		{`{"a": {"$not": {"$type": "string"}}}`, `{"a": "x"}`},
		{`{"a.0.b": {"$all": [1, 2]}}`, `{"a": [{"b": [2, 1]}]}`},
	}
	for _, s := range seeds {
		fd := docA(f, s[0])
		dd := docA(f, s[1])
		fb, _ := bson.Marshal(fd)
		db, _ := bson.Marshal(dd)
		f.Add(fb, db)
	}
	f.Fuzz(func(t *testing.T, filterBytes, docBytes []byte) {
		var fd, dd bson.D
		if bson.Unmarshal(filterBytes, &fd) != nil || bson.Unmarshal(docBytes, &dd) != nil {
			return
		}
		flt, err := CompileFilter(fd)
		if err != nil {
			return
		}
		a := flt.Match(dd, nil)
		if b := flt.Match(dd, &Vars{}); a != b {
			t.Fatalf("non-deterministic match for %v on %v", fd, dd)
		}
	})
}
