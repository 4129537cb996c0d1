package group

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
)

// Assign computes the target owner of every partition from the live
// members and the current owners (nil when nobody owns anything yet). Every
// member computes the same result from the same inputs (order and
// duplicates do not matter), so no leader is needed; the leases keep it
// safe while members briefly disagree.
//
// It balances within one and moves as little as balance allows:
//  1. shares: partitions/members each, one more for the first
//     partitions%members members, preferring those that own most now (ties
//     by name);
//  2. a partition stays with its current owner if that owner is live and
//     within its share (it keeps its highest-scoring partitions);
//  3. every other partition goes, by rendezvous hashing (highest score of
//     a hash of (member, partition)), to a member below its share.
//
// So a member joining takes only its share, and one leaving releases only
// its own partitions.
func Assign(members []string, partitions int, current map[int]string) map[int]string {
	out := make(map[int]string, partitions)
	if len(members) == 0 || partitions <= 0 {
		return out
	}
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	ms = dedupe(ms)
	n := len(ms)
	index := make(map[string]int, n)
	for i, m := range ms {
		index[m] = i
	}
	scores := make([][]uint64, partitions) // [partition][member]
	for p := range partitions {
		scores[p] = make([]uint64, n)
		for i, m := range ms {
			scores[p][i] = score(m, p)
		}
	}
	// Current holdings of live members.
	held := make([][]int, n)
	for p := range partitions {
		if i, ok := index[current[p]]; ok {
			held[i] = append(held[i], p)
		}
	}
	base, extra := partitions/n, partitions%n
	byHeld := make([]int, n)
	for i := range byHeld {
		byHeld[i] = i
	}
	sort.SliceStable(byHeld, func(a, b int) bool { return len(held[byHeld[a]]) > len(held[byHeld[b]]) })
	share := make([]int, n)
	for rank, i := range byHeld {
		share[i] = base
		if rank < extra {
			share[i] = base + 1
		}
	}
	owner := make([]int, partitions)
	for p := range owner {
		owner[p] = -1
	}
	load := make([]int, n)
	for i, ps := range held {
		sort.Slice(ps, func(a, b int) bool { return scores[ps[a]][i] > scores[ps[b]][i] })
		for _, p := range ps[:min(len(ps), share[i])] {
			owner[p] = i
			load[i]++
		}
	}
	// The rest by rendezvous among members below their share.
	type cand struct {
		p, m  int
		score uint64
	}
	var cands []cand
	for p := range partitions {
		if owner[p] != -1 {
			continue
		}
		for i := range ms {
			if load[i] < share[i] {
				cands = append(cands, cand{p, i, scores[p][i]})
			}
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].score != cands[b].score {
			return cands[a].score > cands[b].score
		}
		if cands[a].p != cands[b].p {
			return cands[a].p < cands[b].p
		}
		return cands[a].m < cands[b].m
	})
	for _, c := range cands {
		if owner[c.p] != -1 || load[c.m] >= share[c.m] {
			continue
		}
		owner[c.p] = c.m
		load[c.m]++
	}
	for p := range partitions {
		out[p] = ms[owner[p]]
	}
	return out
}

func score(member string, partition int) uint64 {
	h := sha256.New()
	h.Write([]byte(member))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(partition))
	h.Write(b[:])
	sum := h.Sum(nil)
	return binary.BigEndian.Uint64(sum[:8])
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
