package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzExpr checks that compiling and evaluating arbitrary expressions never
// panics. The expression is the value of the single field "e" of the first
// input document.
func FuzzExpr(f *testing.F) {
	for _, s := range [][2]string{
		{`{"e": {"$add": ["$a", 1, {"$numberDecimal": "1.5"}]}}`, `{"a": 2}`},
		{`{"e": {"$map": {"input": "$arr", "in": {"$multiply": ["$$this", 2]}}}}`, `{"arr": [1, 2]}`},
		{`{"e": {"$cond": [{"$gt": ["$a", 1]}, "$b.c", {"$literal": "$x"}]}}`, `{"a": 3, "b": [{"c": 1}]}`},
		{`{"e": {"$switch": {"branches": [{"case": "$a", "then": {"$concat": ["x", "$s"]}}], "default": null}}}`, `{"s": "y"}`},
		{`{"e": {"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$mod": ["$$value", "$$this"]}}}}`, `{"arr": [3, 0]}`},
		{`{"e": {"$dateToString": {"date": "$d", "format": "%Y-%j %%"}}}`, `{"d": {"$date": "2020-01-01T00:00:00Z"}}`},
		{`{"e": {"$let": {"vars": {"CURRENT": "$a"}, "in": "$b"}}}`, `{"a": {"b": 1}}`},
	} {
		eb, _ := bson.Marshal(docA(f, s[0]))
		db, _ := bson.Marshal(docA(f, s[1]))
		f.Add(eb, db)
	}
	f.Fuzz(func(t *testing.T, exprBytes, docBytes []byte) {
		var ed, dd bson.D
		if bson.Unmarshal(exprBytes, &ed) != nil || bson.Unmarshal(docBytes, &dd) != nil || len(ed) == 0 {
			return
		}
		e, err := CompileExpr(ed[0].Value)
		if err != nil {
			return
		}
		_, _ = e.Eval(dd, &Vars{Now: 1})
	})
}
