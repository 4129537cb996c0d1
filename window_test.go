package ferry

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestWindowCreditStaysWithinLimits takes credit as the fetcher does and
// checks what is granted: the bulk when it fits, else one event, else
// nothing; and that the window never holds more than its limits.
func TestWindowCreditStaysWithinLimits(t *testing.T) {
	w := newWindow(10, 1000)
	c := w.tryCredit(credit{}, 8, 800, 100)
	if c != (credit{8, 800}) {
		t.Fatalf("bulk credit in an empty window: got %+v, want {8 800}", c)
	}
	// 8 of 10 events and 800 of 1000 bytes held: a bulk of 4 does not
	// fit, one event does.
	d := w.tryCredit(credit{}, 4, 400, 100)
	if d != (credit{1, 100}) {
		t.Fatalf("credit over the limit: got %+v, want one event {1 100}", d)
	}
	if e := w.tryCredit(credit{}, 4, 400, 150); e != (credit{}) {
		t.Fatalf("credit in a window with 100 bytes free for a 150-byte event: got %+v, want none", e)
	}
	// Giving the unused credit back makes room again, in the same call.
	c = w.tryCredit(c, 4, 400, 100)
	if c != (credit{4, 400}) {
		t.Fatalf("credit after giving 8 events back: got %+v, want {4 400}", c)
	}
	// Settling a run: its events become reservations (counted by depth),
	// the rest is given back.
	w.settle(3, 300, credit{1, 100})
	if n, b := w.depth(); n != 3 || b != 300 {
		t.Fatalf("depth after settling 3 events of 300 bytes: %d events, %d bytes", n, b)
	}
	w.giveBack(d)
	w.take(3, 300)
	for range 3 {
		w.release(100)
	}
	if w.events != 0 || w.aheadN != 0 || w.credN != 0 || w.bytes != 0 || w.aheadB != 0 || w.credB != 0 {
		t.Fatalf("window not empty after everything was released: %+v", w)
	}
}

// TestWindowCreditHoldsOffAcquire checks that credit counts against the
// limits for the reader's acquire, and that giving it back lets a waiting
// acquire through.
func TestWindowCreditHoldsOffAcquire(t *testing.T) {
	w := newWindow(4, 1<<20)
	if err := w.acquire(context.Background(), 10); err != nil { // one dispatched event
		t.Fatal(err)
	}
	c := w.tryCredit(credit{}, 3, 30, 10) // the rest of the window
	if c.n != 3 {
		t.Fatalf("credit: got %+v, want 3 events", c)
	}
	done := make(chan error, 1)
	go func() { done <- w.acquire(context.Background(), 10) }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.acquire(ctx, 10); err == nil {
		t.Fatal("acquire went through while the fetcher's credit filled the window")
	}
	select {
	case err := <-done:
		t.Fatalf("acquire returned (%v) while the window was full", err)
	default:
	}
	w.giveBack(c)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acquire still waiting after the credit was given back")
	}
}

// TestWindowWaitCreditAdmitsABigEventAlone checks that an event larger
// than the byte limit gets credit once the window is empty.
func TestWindowWaitCreditAdmitsABigEventAlone(t *testing.T) {
	w := newWindow(10, 100)
	if c := w.tryCredit(credit{}, 4, 4000, 1000); c != (credit{1, 1000}) {
		t.Fatalf("a 1000-byte event in an empty window of 100 bytes: got %+v, want it admitted alone", c)
	}
	w.settle(1, 1000, credit{})
	w.take(1, 1000)
	got := make(chan credit, 1)
	go func() {
		c, err := w.waitCredit(context.Background(), 2000)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	w.release(1000)
	select {
	case c := <-got:
		if c != (credit{1, 2000}) {
			t.Fatalf("waitCredit: got %+v, want {1 2000}", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitCredit still waiting in an empty window")
	}
}

// TestWindowRandomCreditNeverOverfills runs random fetcher, reader and
// lane steps and checks the limits after each one.
func TestWindowRandomCreditNeverOverfills(t *testing.T) {
	for round := range 100 {
		rng := rand.New(rand.NewPCG(uint64(round), 11))
		maxN, maxB := 1+rng.IntN(20), int64(100+rng.IntN(2000))
		w := newWindow(maxN, maxB)
		var have credit
		var run []int64    // read into credit, not yet settled
		var ahead []int64  // settled, not taken
		var inLane []int64 // dispatched
		for step := range 500 {
			switch rng.IntN(4) {
			case 0: // the fetcher reads an event
				size := int64(1 + rng.IntN(300))
				if !have.has(size) {
					have = w.tryCredit(have, 1+rng.IntN(8), int64(rng.IntN(1000)), size)
					if have.n == 0 {
						continue
					}
				}
				have.n--
				have.b -= size
				run = append(run, size)
			case 1: // the fetcher hands its run over
				var b int64
				for _, s := range run {
					b += s
				}
				back := credit{}
				if rng.IntN(2) == 0 {
					back, have = have, credit{}
				}
				w.settle(len(run), b, back)
				ahead = append(ahead, run...)
				run = nil
			case 2: // the reader dispatches
				var b int64
				for _, s := range ahead {
					b += s
				}
				w.take(len(ahead), b)
				inLane = append(inLane, ahead...)
				ahead = nil
			case 3: // a lane finishes an event
				if len(inLane) > 0 {
					w.release(inLane[0])
					inLane = inLane[1:]
				}
			}
			var runB int64
			for _, s := range run {
				runB += s
			}
			if w.credN != have.n+len(run) || w.credB != have.b+runB || have.b < 0 {
				t.Fatalf("round %d step %d: the window counts %d events and %d bytes of credit; the fetcher holds %+v unused and %d events of %d bytes read",
					round, step, w.credN, w.credB, have, len(run), runB)
			}
			held := w.events + w.aheadN + w.credN
			bytes := w.bytes + w.aheadB + w.credB
			if held > maxN || bytes > maxB && held > 1 {
				t.Fatalf("round %d step %d: the window holds %d events and %d bytes, over its limits of %d and %d",
					round, step, held, bytes, maxN, maxB)
			}
		}
	}
}
