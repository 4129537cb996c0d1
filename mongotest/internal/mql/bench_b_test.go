package mql

import (
	"testing"
)

// benchDocB is a stored document of roughly 1 KiB.
func benchDocB(tb testing.TB) string {
	return `{"_id": 1, "customer": {"id": 12345, "name": "Ada Lovelace", "tier": "gold", "tags": ["vip", "eu", "newsletter"]},
		"status": "pending", "total": 249.95,
		"items": [{"sku": "A-100", "qty": 1, "price": 19.99}, {"sku": "B-200", "qty": 2, "price": 49.99},
			{"sku": "C-300", "qty": 1, "price": 99.99}, {"sku": "D-400", "qty": 4, "price": 7.5}],
		"shipping": {"method": "express", "address": {"city": "London", "zip": "NW1 6XE", "country": "UK"}},
		"history": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
		"notes": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`
}

func BenchmarkDiff(b *testing.B) {
	before := docB(b, benchDocB(b))
	u, err := CompileUpdate(docB(b, `{"$set": {"status": "shipped", "items.1.qty": 3, "shipping.address.zip": "NW1"}, "$pop": {"history": 1}}`))
	if err != nil {
		b.Fatal(err)
	}
	after, _, err := u.Apply(before, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d := Diff(before, after); d.Empty() {
			b.Fatal("empty diff")
		}
	}
}

func BenchmarkUpdateApply(b *testing.B) {
	doc := docB(b, benchDocB(b))
	u, err := CompileUpdate(docB(b, `{"$set": {"status": "shipped"}, "$inc": {"items.1.qty": 1}, "$push": {"history": 17}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, d, err := u.Apply(doc, nil, false); err != nil || d.Empty() {
			b.Fatal(err)
		}
	}
}

// BenchmarkChangeStreamPipeline is the per-event work of a change stream
// with a $match and a $project after $changeStream.
func BenchmarkChangeStreamPipeline(b *testing.B) {
	ev := benchEventA(b)
	p, err := CompilePipeline(arrB(b, `[{"$match": {"operationType": {"$in": ["insert", "update"]}, "fullDocument.total": {"$gt": 100}}},
		{"$project": {"operationType": 1, "documentKey": 1, "fullDocument.status": 1}}]`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok, err := p.ApplyOne(ev, nil); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
