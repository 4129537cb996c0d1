package mql

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// benchEventA is a change event of roughly 1 KiB.
func benchEventA(tb testing.TB) bson.D {
	tb.Helper()
	return docA(tb, `{
		"_id": {"_data": "8263F0A1B2000000012B022C0100296E5A1004ABCDEF0123456789ABCDEF0123456789463C5F6964003C6F6964000004"},
		"operationType": "update",
		"clusterTime": {"$timestamp": {"t": 1676700082, "i": 1}},
		"wallTime": {"$date": "2023-02-18T06:01:22.000Z"},
		"ns": {"db": "shop", "coll": "orders"},
		"documentKey": {"_id": {"$oid": "63f0a1b2c3d4e5f601234567"}},
		"updateDescription": {
			"updatedFields": {"status": "shipped", "items.3.qty": 4, "audit": {"by": "svc-fulfil", "at": {"$date": "2023-02-18T06:01:22.000Z"}}},
			"removedFields": ["draft", "tmp.flag"],
			"truncatedArrays": []
		},
		"fullDocument": {
			"_id": {"$oid": "63f0a1b2c3d4e5f601234567"},
			"customer": {"id": 12345, "name": "Ada Lovelace", "tier": "gold", "tags": ["vip", "eu", "newsletter"]},
			"status": "shipped",
			"total": 249.95,
			"items": [
				{"sku": "A-100", "qty": 1, "price": 19.99},
				{"sku": "B-200", "qty": 2, "price": 49.99},
				{"sku": "C-300", "qty": 1, "price": 99.99},
				{"sku": "D-400", "qty": 4, "price": 7.5}
			],
			"shipping": {"method": "express", "address": {"city": "London", "zip": "NW1 6XE", "country": "UK"}},
			"notes": "`+strings.Repeat("x", 200)+`"
		}
	}`)
}

func BenchmarkFilterMatch(b *testing.B) {
	doc := benchEventA(b)
	for _, bc := range []struct{ name, filter string }{
		{"eq", `{"operationType": "update"}`},
		{"in+dotted", `{"operationType": {"$in": ["insert", "update", "replace"]}, "ns.coll": "orders"}`},
		{"array-traversal", `{"fullDocument.items.sku": "D-400", "fullDocument.customer.tags": "eu"}`},
		{"or+regex", `{"$or": [{"fullDocument.status": {"$regex": "^ship"}}, {"fullDocument.total": {"$gt": 1000}}]}`},
		{"expr", `{"$expr": {"$gt": ["$fullDocument.total", 100]}}`},
	} {
		f, err := CompileFilter(docA(b, bc.filter))
		if err != nil {
			b.Fatal(err)
		}
		if !f.Match(doc, nil) {
			b.Fatalf("%s: benchmark filter must match", bc.name)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !f.Match(doc, nil) {
					b.Fatal("no match")
				}
			}
		})
	}
}
