package mongotest_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkFindByID measures finds of one document by _id (1 KiB
// documents, 1000 in the collection): the emulator answers them from its
// _id map.
func BenchmarkFindByID(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	docs := make([]any, 0, 1000)
	for i := 0; i < 1000; i++ {
		docs = append(docs, kibDoc(i))
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var got bson.Raw
		if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: i % 1000}}).Decode(&got); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "finds/s")
}
