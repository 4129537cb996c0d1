package extjson

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestPlain8 checks the eight-byte skip against the byte table it
// stands for: every byte value in every position of an otherwise plain
// word, and random words.
func TestPlain8(t *testing.T) {
	want := func(w []byte) bool {
		for _, b := range w {
			if b >= utf8.RuneSelf || !safe[b] {
				return false
			}
		}
		return true
	}
	w := []byte("abcdefgh")
	for pos := range 8 {
		for b := range 256 {
			x := append([]byte(nil), w...)
			x[pos] = byte(b)
			if got := plain8(binary.LittleEndian.Uint64(x)); got != want(x) {
				t.Fatalf("plain8(%q) = %v, want %v", x, got, want(x))
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], r.Uint64())
		for i := range x { // mostly printable ASCII, so both answers occur
			if r.IntN(4) != 0 {
				x[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		if got := plain8(binary.LittleEndian.Uint64(x[:])); got != want(x[:]) {
			t.Fatalf("plain8(%q) = %v, want %v", x, got, want(x[:]))
		}
	}
}
