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
