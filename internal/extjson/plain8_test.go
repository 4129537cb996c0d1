package extjson

import (
	"bytes"
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

// TestPlainPrefix checks the run skip against the byte table: for every
// length up to 70 and a special byte (of each kind) at every position,
// the prefix it reports is plain, ends at most 7 bytes before the special
// byte, and is all of a string that has none.
func TestPlainPrefix(t *testing.T) {
	specials := []byte{0, 0x1F, '"', '\\', 0x80, 0xE2, 0xFF}
	for n := range 71 {
		plain := make([]byte, n)
		for i := range plain {
			plain[i] = byte(0x20 + (i*7)%0x5F) // printable ASCII, never '"' or '\\'
			if plain[i] == '"' || plain[i] == '\\' {
				plain[i] = 'x'
			}
		}
		if got := plainPrefix(plain); got != n {
			t.Fatalf("plainPrefix of %d plain bytes = %d, want %d", n, got, n)
		}
		for pos := range n {
			for _, b := range specials {
				s := append([]byte(nil), plain...)
				s[pos] = b
				got := plainPrefix(s)
				if got > pos || got < pos-7 || got < 0 {
					t.Fatalf("plainPrefix(%q) = %d, want from %d to %d (special byte %#x at %d)", s, got, max(0, pos-7), pos, b, pos)
				}
			}
		}
	}
}

// TestCString checks the name scan against bytes.IndexByte and the byte
// table: for every name length up to 40, with and without a special byte
// in the name, followed by more bytes or by nothing.
func TestCString(t *testing.T) {
	specials := []byte{0x1F, '"', '\\', 0x80, 0xE2, 0xFF}
	check := func(s []byte) {
		t.Helper()
		k, plain := cstring(s)
		wantK := bytes.IndexByte(s, 0)
		if k != wantK {
			t.Fatalf("cstring(%q) ends at %d, want %d", s, k, wantK)
		}
		if wantK < 0 {
			return
		}
		wantPlain := true
		for _, b := range s[:wantK] {
			wantPlain = wantPlain && b < utf8.RuneSelf && safe[b]
		}
		if plain != wantPlain {
			t.Fatalf("cstring(%q): plain %v, want %v", s, plain, wantPlain)
		}
	}
	for n := range 41 {
		name := bytes.Repeat([]byte("k"), n)
		for _, tail := range [][]byte{nil, {0}, []byte("\x00rest of the document \x02\x00"), []byte("no terminator")} {
			check(append(append([]byte(nil), name...), tail...))
			for pos := range n {
				for _, b := range specials {
					s := append(append([]byte(nil), name...), tail...)
					s[pos] = b
					check(s)
				}
			}
		}
	}
}
