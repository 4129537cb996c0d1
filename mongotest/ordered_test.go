package mongotest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderedMatchesSortedSlice runs inserts (random, increasing,
// decreasing keys, repeats among them) and loads on an ordered set and on
// a sorted slice, and compares them as it goes: contents, order, length,
// block sizes, and the items from a seek on.
func TestOrderedMatchesSortedSlice(t *testing.T) {
	for _, pattern := range []string{"random", "increasing", "decreasing", "reload"} {
		t.Run(pattern, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(pattern))))
			o := newOrdered(cmp.Compare[int])
			var ref []int
			next := 0
			for op := 0; op < 20_000; op++ {
				if pattern == "reload" && op%5000 == 4999 {
					// Keep every other item, as a compaction does.
					kept := ref[:0]
					for i, k := range ref {
						if i%2 == 0 {
							kept = append(kept, k)
						}
					}
					ref = kept
					o.load(slices.Clone(ref))
					checkOrdered(t, o, ref, rng)
				}
				var k int
				switch pattern {
				case "increasing":
					next++
					k = next
				case "decreasing":
					next--
					k = next
				default:
					k = rng.IntN(8000)
				}
				i, found := slices.BinarySearch(ref, k)
				if !found {
					ref = slices.Insert(ref, i, k)
				}
				if got := o.insert(k); got == found {
					t.Fatalf("op %d: insert(%d) = %v, want %v", op, k, got, !found)
				}
				if op%997 == 0 {
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
		k := rng.IntN(9000) - 500
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
