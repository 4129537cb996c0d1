package ferry

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func tok(i int) bson.Raw {
	b, _ := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("%08d", i)}})
	return b
}

// TestTrackerNeverPassesUnfinished finishes events in random orders and
// checks after every step that the checkpointable position is exactly the
// last event of the finished prefix.
func TestTrackerNeverPassesUnfinished(t *testing.T) {
	for round := range 200 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		n := 1 + rng.IntN(50)
		tr := &tracker{}
		for i := range n {
			if seq := tr.add(tok(i), bson.Timestamp{T: uint32(i)}); seq != int64(i) {
				t.Fatalf("seq %d for event %d", seq, i)
			}
		}
		order := rng.Perm(n)
		finished := make([]bool, n)
		for _, i := range order {
			tr.finish(int64(i))
			finished[i] = true
			prefix := 0
			for prefix < n && finished[prefix] {
				prefix++
			}
			got, _, _ := tr.position()
			switch {
			case prefix == 0 && got != nil:
				t.Fatalf("round %d: position %s with event 0 unfinished", round, got)
			case prefix > 0 && !bytesEqual(got, tok(prefix-1)):
				t.Fatalf("round %d: position %s, want the token of event %d (prefix of %d finished)", round, got, prefix-1, prefix)
			}
		}
	}
}

// TestTrackerIdleToken checks that a postBatchResumeToken becomes the
// position only once every event read before it finished, and never
// replaces a newer event token.
func TestTrackerIdleToken(t *testing.T) {
	tr := &tracker{}
	a := tr.add(tok(1), bson.Timestamp{T: 1})
	idle := tok(2)
	tr.setIdle(idle)
	if got, _, _ := tr.position(); got != nil {
		t.Fatalf("idle token used while event 1 is unfinished: %s", got)
	}
	tr.finish(a)
	if got, _, isIdle := tr.position(); !bytesEqual(got, idle) || !isIdle {
		t.Fatalf("position = %s (idle %v), want the idle token", got, isIdle)
	}
	// An event read after an idle token supersedes it.
	tr.setIdle(tok(3))
	b := tr.add(tok(4), bson.Timestamp{T: 4})
	tr.setIdle(tok(5))
	tr.finish(b)
	if got, _, _ := tr.position(); !bytesEqual(got, tok(5)) {
		t.Fatalf("position = %s, want the idle token read after event 4", got)
	}
	c := tr.add(tok(6), bson.Timestamp{T: 6})
	tr.setIdle(tok(7))
	d := tr.add(tok(8), bson.Timestamp{T: 8})
	tr.finish(d)
	if got, _, _ := tr.position(); !bytesEqual(got, tok(5)) {
		t.Fatalf("position moved past unfinished event 6: %s", got)
	}
	tr.finish(c)
	if got, _, _ := tr.position(); !bytesEqual(got, tok(8)) {
		t.Fatalf("position = %s, want event 8 (newer than the idle token before it)", got)
	}
}

// TestTrackerReusesItsBuffer reads and finishes events in random orders
// with a bounded number in flight, as a running consumer does, and checks
// the position after every step and that the tracker's buffer stays
// within a small multiple of the most events it held (it moves the
// pending events down rather than growing).
func TestTrackerReusesItsBuffer(t *testing.T) {
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 13))
		limit := 1 + rng.IntN(40)
		tr := &tracker{}
		var open []int64 // read, not finished
		finished := map[int64]bool{}
		next := int64(0)
		most := 0 // the most events pending at once (finished ones behind an unfinished one included)
		for step := range 3000 {
			if len(open) < limit && (len(open) == 0 || rng.IntN(2) == 0) {
				n := 1 + rng.IntN(limit-len(open))
				first := tr.addN(n, func(i int) (bson.Raw, bson.Timestamp) {
					return tok(int(next) + i), bson.Timestamp{T: uint32(next) + uint32(i)}
				})
				if first != next {
					t.Fatalf("round %d: addN numbered from %d, want %d", round, first, next)
				}
				for i := range int64(n) {
					open = append(open, next+i)
				}
				next += int64(n)
			} else {
				// Mostly the oldest, as lanes finish in about stream order.
				i := 0
				if rng.IntN(3) == 0 {
					i = rng.IntN(len(open))
				}
				tr.finish(open[i])
				finished[open[i]] = true
				open = append(open[:i], open[i+1:]...)
			}
			prefix := tr.base
			for finished[prefix] {
				prefix++
			}
			if prefix != tr.base {
				t.Fatalf("round %d step %d: the tracker's prefix ends at %d, but events up to %d are finished", round, step, tr.base, prefix)
			}
			got, _, _ := tr.position()
			if prefix > 0 && string(got) != string(tok(int(prefix-1))) {
				t.Fatalf("round %d step %d: position %v, want the token of event %d", round, step, got, prefix-1)
			}
			for i, p := range tr.pending {
				if step%16 == 0 && string(p.token) != string(tok(int(tr.base)+i)) {
					t.Fatalf("round %d step %d: pending event %d (of %d) has the token %v, want that of event %d", round, step, i, len(tr.pending), p.token, int(tr.base)+i)
				}
			}
			most = max(most, len(tr.pending))
			if cap(tr.buf) > 4*most+8 {
				t.Fatalf("round %d step %d: the buffer has %d entries, with at most %d events pending so far", round, step, cap(tr.buf), most)
			}
			for _, p := range tr.buf[:cap(tr.buf)] {
				if step%64 == 0 && p.token != nil && !isIn(tr.pending, p) {
					t.Fatalf("round %d step %d: the buffer keeps a token outside the pending events", round, step)
				}
			}
		}
	}
}

func isIn(pending []tracked, p tracked) bool {
	for _, q := range pending {
		if &q.token[0] == &p.token[0] {
			return true
		}
	}
	return false
}
