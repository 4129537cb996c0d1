package mongotest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderedMatchesSortedSlice runs random inserts, deletes, seeks and
// loads on an ordered set and on a sorted slice, and compares them after
// every operation: contents, order, length, and the items from a seek on.
func TestOrderedMatchesSortedSlice(t *testing.T) {
	for _, pattern := range []string{"random", "increasing", "decreasing", "churn"} {
		t.Run(pattern, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(pattern))))
			o := newOrdered(cmp.Compare[int])
			var ref []int
			next := 0
			key := func() int {
				switch pattern {
				case "increasing":
					next++
					return next
				case "decreasing":
					next--
					return next
				}
				return rng.IntN(5000)
			}
			for op := 0; op < 20_000; op++ {
				if pattern == "churn" && op == 10_000 {
					// A bulk load in the middle, then more churn.
					ref = ref[:0]
					for k := 0; k < 3000; k += 2 {
						ref = append(ref, k)
					}
					o.load(slices.Clone(ref))
				}
				del := pattern == "churn" && rng.IntN(2) == 0 || pattern == "random" && rng.IntN(4) == 0
				if del && len(ref) > 0 {
					k := ref[rng.IntN(len(ref))]
					if rng.IntN(8) == 0 {
						k = -1 - rng.IntN(10) // absent
					}
					i, found := slices.BinarySearch(ref, k)
					if found {
						ref = slices.Delete(ref, i, i+1)
					}
					if got := o.delete(k); got != found {
						t.Fatalf("op %d: delete(%d) = %v, want %v", op, k, got, found)
					}
				} else {
					k := key()
					i, found := slices.BinarySearch(ref, k)
					if !found {
						ref = slices.Insert(ref, i, k)
					}
					if got := o.insert(k); got == found {
						t.Fatalf("op %d: insert(%d) = %v, want %v", op, k, got, !found)
					}
				}
				if op%997 == 0 || op > 19_900 {
					checkOrdered(t, o, ref, rng)
				}
			}
			checkOrdered(t, o, ref, rng)
		})
	}
}

func checkOrdered(t *testing.T, o *ordered[int], ref []int, rng *rand.Rand) {
	t.Helper()
	var got []int
	o.ascend(position{}, func(x int) bool { got = append(got, x); return true })
	if !slices.Equal(got, ref) || o.Len() != len(ref) {
		t.Fatalf("contents: %d items (Len %d), want %d; equal=%v", len(got), o.Len(), len(ref), slices.Equal(got, ref))
	}
	for _, blk := range o.blocks {
		if len(blk) == 0 || len(blk) > maxBlock {
			t.Fatalf("a block of %d items (want 1..%d)", len(blk), maxBlock)
		}
	}
	for range 20 {
		k := rng.IntN(6000) - 500
		i, _ := slices.BinarySearch(ref, k)
		var from []int
		o.ascend(o.seek(func(x int) int { return cmp.Compare(x, k) }), func(x int) bool {
			from = append(from, x)
			return len(from) < 5
		})
		want := ref[i:min(i+5, len(ref))]
		if !slices.Equal(from, want) {
			t.Fatalf("seek(%d): %v, want %v", k, from, want)
		}
	}
}

// TestOrderedIncreasingFillsBlocks: keys appended in increasing order
// (ObjectIds) leave full blocks, so an index costs what its entries do.
func TestOrderedIncreasingFillsBlocks(t *testing.T) {
	o := newOrdered(cmp.Compare[int])
	for i := range 10 * maxBlock {
		o.insert(i)
	}
	if len(o.blocks) != 10 {
		t.Fatalf("%d blocks for %d increasing items, want 10", len(o.blocks), 10*maxBlock)
	}
}
