package mql

import (
	"sync"
	"testing"
)

// Compiled values are shared by concurrent evaluations (run with -race).
func TestConcurrentUse(t *testing.T) {
	u, err := CompileUpdate(docB(t, `{"$set": {"a.b": 1}, "$push": {"arr": 3}, "$inc": {"n": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := CompilePipeline(arrB(t, `[{"$match": {"n": {"$gte": 0}}}, {"$project": {"n": 1, "twice": {"$multiply": ["$n", 2]}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	doc := docB(t, `{"_id": 1, "n": 1, "arr": [1, 2]}`)
	want := docB(t, `{"_id": 1, "n": 2, "arr": [1, 2, 3], "a": {"b": 1}}`)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				got, d, err := u.Apply(doc, nil, false)
				if err != nil || d.Empty() || !identical(got, want) {
					t.Errorf("apply: %v %s", err, jsonB(got))
					return
				}
				out, ok, err := p.ApplyOne(got, nil)
				if err != nil || !ok || !identical(out, docB(t, `{"_id": 1, "n": 2, "twice": 4}`)) {
					t.Errorf("pipeline: %v %v %s", ok, err, jsonB(out))
					return
				}
			}
		}()
	}
	wg.Wait()
	sameB(t, "input untouched", doc, docB(t, `{"_id": 1, "n": 1, "arr": [1, 2]}`))
}
