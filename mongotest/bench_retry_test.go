package mongotest_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkUpdateOne measures single-document updates by _id per second:
// retryable writes (the driver's default), each one recorded for a retry.
func BenchmarkUpdateOne(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if _, err := c.InsertOne(ctx, kibDoc(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: i % 100}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
}
