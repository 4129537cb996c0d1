package mongotest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest"
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

// BenchmarkFindByIDPath compares, in one run, finds by _id answered from
// the _id map (path=index) with the collection scan they replace
// (path=scan, mongotest.ScanOnly), through the driver, over collections of
// 10,000 and 100,000 ledger-sized documents: op=eq finds one _id, op=in100
// is a ledger batch, find {_id: {$in: [100 ids]}}, half of them recorded.
// Each index run reports how many times faster than the scan run before it
// it is (x-faster-than-scan).
func BenchmarkFindByIDPath(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		c, srv := benchClientServer(b)
		ctx := context.Background()
		for i := 0; i < n; i += 1000 {
			docs := make([]any, 0, 1000)
			for j := i; j < i+1000 && j < n; j++ {
				docs = append(docs, bson.D{{Key: "_id", Value: ledgerID(j)}, {Key: "event", Value: bson.Binary{Data: make([]byte, 40)}}, {Key: "at", Value: bson.DateTime(j)}})
			}
			if _, err := c.InsertMany(ctx, docs); err != nil {
				b.Fatal(err)
			}
		}
		batch := func(i int) bson.A {
			ids := make(bson.A, 0, 100)
			for j := 0; j < 50; j++ {
				ids = append(ids, ledgerID((i*50+j*7919)%n), ledgerID(n+i*50+j))
			}
			return ids
		}
		for _, op := range []struct {
			name   string
			filter func(i int) bson.D
			want   int
		}{
			{"eq", func(i int) bson.D { return bson.D{{Key: "_id", Value: ledgerID(i * 7919 % n)}} }, 1},
			{"in100", func(i int) bson.D { return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: batch(i)}}}} }, 50},
		} {
			perOp := map[bool]time.Duration{}
			for _, scan := range []bool{true, false} {
				path := "index"
				if scan {
					path = "scan"
				}
				b.Run(fmt.Sprintf("docs=%d/op=%s/path=%s", n, op.name, path), func(b *testing.B) {
					mongotest.ScanOnly(srv, scan)
					defer mongotest.ScanOnly(srv, false)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						cur, err := c.Find(ctx, op.filter(i))
						if err != nil {
							b.Fatal(err)
						}
						var got []bson.Raw
						if err := cur.All(ctx, &got); err != nil {
							b.Fatal(err)
						}
						if len(got) != op.want {
							b.Fatalf("found %d documents, want %d", len(got), op.want)
						}
					}
					b.StopTimer()
					perOp[scan] = b.Elapsed() / time.Duration(b.N)
					if !scan && perOp[true] > 0 {
						b.ReportMetric(float64(perOp[true])/float64(perOp[false]), "x-faster-than-scan")
					}
				})
			}
		}
	}
}

func ledgerID(i int) string { return fmt.Sprintf("ev-%08d", i) }
