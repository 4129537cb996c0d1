package ferry_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
)

// rangeStartBig is MinInt64 + ⌊p·2^64/n⌋ in arbitrary precision.
func rangeStartBig(p, n int) *big.Int {
	q := new(big.Int).Lsh(big.NewInt(int64(p)), 64)
	q.Quo(q, big.NewInt(int64(n)))
	return q.Add(q, big.NewInt(math.MinInt64))
}

// TestPartitionRangeCoversTheHashSpace: under HashRange the n partitions
// are contiguous ranges that cover [-2^63, 2^63) without overlap, each
// starting at MinInt64 + ⌊p·2^64/n⌋ exactly, their sizes differing by at
// most one.
func TestPartitionRangeCoversTheHashSpace(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 10, 16, 100, 200, 1000, 4093} {
		total := new(big.Int)
		var minSize, maxSize *big.Int
		next := big.NewInt(math.MinInt64)
		for p := range n {
			lo, hi := ferry.PartitionRange(p, n)
			if want := rangeStartBig(p, n); want.Cmp(big.NewInt(lo)) != 0 {
				t.Fatalf("PartitionRange(%d, %d) starts at %d, want %s", p, n, lo, want)
			}
			if big.NewInt(lo).Cmp(next) != 0 {
				t.Fatalf("PartitionRange(%d, %d) starts at %d, want %s (right after the previous one)", p, n, lo, next)
			}
			if hi < lo {
				t.Fatalf("PartitionRange(%d, %d) = [%d, %d] is empty", p, n, lo, hi)
			}
			size := new(big.Int).Sub(big.NewInt(hi), big.NewInt(lo))
			size.Add(size, big.NewInt(1))
			total.Add(total, size)
			if minSize == nil || size.Cmp(minSize) < 0 {
				minSize = size
			}
			if maxSize == nil || size.Cmp(maxSize) > 0 {
				maxSize = size
			}
			next = new(big.Int).Add(big.NewInt(hi), big.NewInt(1))
		}
		if _, hi := ferry.PartitionRange(n-1, n); hi != math.MaxInt64 {
			t.Errorf("the last of %d partitions ends at %d, want MaxInt64", n, hi)
		}
		if total.Cmp(two64) != 0 {
			t.Errorf("the %d ranges hold %s hashes, want 2^64", n, total)
		}
		if d := new(big.Int).Sub(maxSize, minSize); d.Cmp(big.NewInt(1)) > 0 {
			t.Errorf("the %d ranges' sizes differ by %s, want at most 1", n, d)
		}
	}
	for _, c := range []struct {
		p, n   int
		lo, hi int64
	}{
		{0, 1, math.MinInt64, math.MaxInt64},
		{0, 2, math.MinInt64, -1},
		{1, 2, 0, math.MaxInt64},
		{1, 4, -1 << 62, -1},
		{1, 3, -3074457345618258603, 3074457345618258601},
	} {
		if lo, hi := ferry.PartitionRange(c.p, c.n); lo != c.lo || hi != c.hi {
			t.Errorf("PartitionRange(%d, %d) = [%d, %d], want [%d, %d]", c.p, c.n, lo, hi, c.lo, c.hi)
		}
	}
	for _, c := range [][2]int{{4, 4}, {-1, 4}, {0, 0}, {0, -3}} {
		if lo, hi := ferry.PartitionRange(c[0], c[1]); lo <= hi {
			t.Errorf("PartitionRange(%d, %d) = [%d, %d], want an empty range", c[0], c[1], lo, hi)
		}
	}
}

// TestInPartitionEachHashInOne: every hash belongs to exactly one
// partition under each scheme: under HashRange the one whose range holds
// it, under HashMod the one numbered |hash mod n|.
func TestInPartitionEachHashInOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	for range 2000 {
		hashes = append(hashes, int64(rng.Uint64()))
	}
	for _, n := range []int{1, 2, 3, 4, 7, 8, 200} {
		for p := range n {
			lo, _ := ferry.PartitionRange(p, n)
			hashes = append(hashes, lo, lo-1, lo+1)
		}
		for _, h := range hashes {
			for _, scheme := range []ferry.Partitioning{ferry.HashRange, ferry.HashMod, ""} {
				var in []int
				for p := range n {
					if ferry.InPartition(scheme, h, p, n) {
						in = append(in, p)
					}
				}
				if len(in) != 1 {
					t.Fatalf("%q: hash %d is in partitions %v of %d, want exactly one", scheme, h, in, n)
				}
				want := 0
				switch {
				case scheme == ferry.HashMod:
					want = int(h % int64(n))
					if want < 0 {
						want = -want
					}
				default:
					for p := range n {
						if lo, hi := ferry.PartitionRange(p, n); lo <= h && h <= hi {
							want = p
						}
					}
				}
				if in[0] != want {
					t.Fatalf("%q: hash %d is in partition %d of %d, want %d", scheme, h, in[0], n, want)
				}
			}
		}
	}
	if ferry.InPartition(ferry.HashRange, 0, 4, 4) || ferry.InPartition(ferry.HashMod, 0, -1, 4) {
		t.Error("InPartition holds a hash in a partition out of range")
	}
}

// TestPartitionMatchAgreesWithTheServer: the expression PartitionMatch
// builds, evaluated by the server over _id values of several types, puts
// each document in exactly the partition InPartition computes from the
// server's own $toHashedIndexKey.
func TestPartitionMatchAgreesWithTheServer(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("docs")
	var ids []any
	for i := range 150 {
		ids = append(ids, int32(i), fmt.Sprintf("doc-%d", i))
	}
	for i := range 50 {
		ids = append(ids, bson.NewObjectID(), int64(i+1)<<40, float64(i)+0.5)
	}
	for _, id := range ids {
		insert(t, c, bson.D{{Key: "_id", Value: id}})
	}
	for _, scheme := range []ferry.Partitioning{ferry.HashRange, ferry.HashMod} {
		for _, n := range []int{1, 2, 3, 4, 8} {
			seen := map[string]int{}
			for p := range n {
				for _, d := range partitionDocs(t, c, ferry.PartitionMatch(scheme, "$_id", p, n)) {
					h := d.Lookup("h").Int64()
					if !ferry.InPartition(scheme, h, p, n) {
						t.Errorf("%s, partition %d of %d: the server matched _id %v (hash %d), which is not in it", scheme, p, n, d.Lookup("_id"), h)
					}
					seen[d.Lookup("_id").String()]++
				}
			}
			if len(seen) != len(ids) {
				t.Errorf("%s, %d partitions: %d of %d documents matched a partition", scheme, n, len(seen), len(ids))
			}
			for id, k := range seen {
				if k != 1 {
					t.Errorf("%s, %d partitions: _id %s matched %d partitions", scheme, n, id, k)
				}
			}
		}
		if got := partitionDocs(t, c, ferry.PartitionMatch(scheme, "$_id", 4, 4)); len(got) != 0 {
			t.Errorf("%s: partition 4 of 4 matched %d documents, want none", scheme, len(got))
		}
	}
}

// partitionDocs returns the documents of c the server matches with expr,
// with their hashed _id as h.
func partitionDocs(t *testing.T, c *mongo.Collection, expr bson.D) []bson.Raw {
	t.Helper()
	ctx := context.Background()
	cur, err := c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "$expr", Value: expr}}}},
		{{Key: "$project", Value: bson.D{{Key: "h", Value: bson.D{{Key: "$toHashedIndexKey", Value: "$_id"}}}}}},
	})
	if err != nil {
		t.Fatalf("aggregate with %v: %v", expr, err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
