package mongoproj_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// TestSweepPartitionLeavesOtherPartitions: a partition's sweep deletes only
// the stale documents of its own partition under the stream's
// partitioning (the partition a backfill of the same stream scanned),
// whatever their _id type.
func TestSweepPartitionLeavesOtherPartitions(t *testing.T) {
	for _, scheme := range []ferry.Partitioning{ferry.HashRange, ferry.HashMod} {
		t.Run(string(scheme), func(t *testing.T) { testSweepPartitionLeavesOtherPartitions(t, scheme) })
	}
}

func testSweepPartitionLeavesOtherPartitions(t *testing.T, scheme ferry.Partitioning) {
	e := newEnv(t)
	ctx := context.Background()
	const partitions, mine = 4, 2
	old := time.Unix(0, 0)
	ids := []any{"a", "b", "c", bson.D{{Key: "k", Value: int32(1)}}, int64(1) << 40, 2.5}
	for i := range int32(40) {
		ids = append(ids, i)
	}
	var docs []any
	wantLeft := 0
	for _, id := range ids {
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: mongoproj.Field, Value: bson.D{{Key: "at", Value: old}}}})
		h, err := hashkey.Hash(id)
		if err != nil {
			t.Fatal(err)
		}
		if !ferry.InPartition(scheme, h, mine, partitions) {
			wantLeft++
		}
	}
	if _, err := e.target.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if wantLeft == len(ids) || wantLeft == 0 {
		t.Fatalf("test data: %d of %d documents outside partition %d; want some in and some out", wantLeft, len(ids), mine)
	}
	if err := e.s.SweepPartition(scheme, mine, partitions)(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := e.target.CountDocuments(ctx, bson.D{}); err != nil || n != int64(wantLeft) {
		t.Fatalf("after sweeping partition %d of %d: %d documents (%v), want the %d of the other partitions", mine, partitions, n, err, wantLeft)
	}
	// A sweep since the documents were written deletes none of them.
	if err := e.s.SweepPartition(scheme, 0, 1)(ctx, old); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.target.CountDocuments(ctx, bson.D{}); n != int64(wantLeft) {
		t.Fatalf("a sweep since %v deleted documents written at %v", old, old)
	}
	// One partition (or Sweep) sweeps everything stale.
	if err := e.s.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.target.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("Sweep left %d stale documents", n)
	}
	if err := e.s.SweepPartition(scheme, 4, 4)(ctx, time.Now()); err == nil {
		t.Fatal("SweepPartition(4, 4) succeeded")
	}
	if err := e.s.SweepPartition("mod", 0, 4)(ctx, time.Now()); err == nil {
		t.Fatal(`SweepPartition("mod", 0, 4) succeeded`)
	}
}
