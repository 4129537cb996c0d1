package group

import (
	"fmt"
	"testing"
)

func members(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("member-%d", i))
	}
	return out
}

func loads(a map[int]string) map[string]int {
	out := map[string]int{}
	for _, m := range a {
		out[m]++
	}
	return out
}

func TestAssignBalancedAndComplete(t *testing.T) {
	for m := 1; m <= 9; m++ {
		for p := 1; p <= 40; p++ {
			a := Assign(members(m), p, nil)
			if len(a) != p {
				t.Fatalf("%d members, %d partitions: %d assigned", m, p, len(a))
			}
			lo, hi := p, 0
			for _, mem := range members(m) {
				n := loads(a)[mem]
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("%d members, %d partitions: loads from %d to %d, want within one", m, p, lo, hi)
			}
		}
	}
}

func TestAssignDeterministic(t *testing.T) {
	a := Assign([]string{"c", "a", "b"}, 8, nil)
	b := Assign([]string{"b", "c", "a", "a"}, 8, nil)
	for p := range 8 {
		if a[p] != b[p] {
			t.Fatalf("partition %d: %s vs %s for the same member set", p, a[p], b[p])
		}
	}
}

// TestAssignMinimalMovement checks that a member joining moves exactly the
// partitions it receives (its share), and a member leaving exactly its own.
func TestAssignMinimalMovement(t *testing.T) {
	for m := 1; m <= 8; m++ {
		for p := 1; p <= 32; p++ {
			before := Assign(members(m), p, nil)
			newcomer := fmt.Sprintf("member-%d", m)
			after := Assign(members(m+1), p, before)
			moved := 0
			for part, owner := range after {
				if before[part] != owner {
					moved++
					if owner != newcomer {
						t.Fatalf("%d→%d members, %d partitions: partition %d moved from %s to %s, not to the newcomer",
							m, m+1, p, part, before[part], owner)
					}
				}
			}
			if want := loads(after)[newcomer]; moved != want {
				t.Fatalf("%d→%d members, %d partitions: %d moved, the newcomer's share is %d", m, m+1, p, moved, want)
			}
			// And back: the newcomer leaves; only its partitions move.
			back := Assign(members(m), p, after)
			for part, owner := range back {
				if after[part] != owner && after[part] != newcomer {
					t.Fatalf("%d→%d members, %d partitions: partition %d of a staying member moved on a leave", m+1, m, p, part)
				}
			}
		}
	}
}
