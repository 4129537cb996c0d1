package extjson

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// decimalBits builds a finite decimal128 of 64-bit coefficient c, unbiased
// exponent exp and sign.
func decimalBits(neg bool, exp int, c uint64) (h, l uint64) {
	h = uint64(exp+6176) << 49
	if neg {
		h |= 1 << 63
	}
	return h, c
}

// TestDecimalMatchesDriver compares appendDecimal with the driver's
// Decimal128.String over every exponent for a spread of coefficients
// (zero, one digit, powers of ten, trailing zeros, the 64-bit maximum),
// both signs, and on random bit patterns, which take the driver's path.
func TestDecimalMatchesDriver(t *testing.T) {
	coeffs := []uint64{0, 1, 5, 10, 100, 1999, 123456, 1000000, 1234567, 100000000000000000, 18446744073709551615}
	check := func(h, l uint64) {
		t.Helper()
		want := bson.NewDecimal128(h, l).String()
		if got := string(appendDecimal(nil, h, l)); got != want {
			t.Fatalf("decimal h=%#x l=%#x: got %q, driver %q", h, l, got, want)
		}
	}
	for exp := -6176; exp <= 6111; exp++ {
		for _, c := range coeffs {
			for _, neg := range []bool{false, true} {
				check(decimalBits(neg, exp, c))
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		check(decimalBits(r.IntN(2) == 0, r.IntN(6111+6176+1)-6176, r.Uint64()>>r.IntN(64)))
		check(r.Uint64(), r.Uint64())
	}
	for _, special := range []string{"NaN", "Infinity", "-Infinity", "-0", "0E+6111", "1E-6176"} {
		d, err := bson.ParseDecimal128(special)
		if err != nil {
			t.Fatal(err)
		}
		check(d.GetBytes())
	}
}

// FuzzDecimal compares appendDecimal with the driver on any 16 bytes and
// on any finite value with a 64-bit coefficient.
func FuzzDecimal(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 16 {
			return
		}
		l, h := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		for _, hl := range [][2]uint64{{h, l}, {h &^ (1<<49 - 1) &^ (1 << 62), l}} {
			want := bson.NewDecimal128(hl[0], hl[1]).String()
			if got := string(appendDecimal(nil, hl[0], hl[1])); got != want {
				t.Fatalf("decimal h=%#x l=%#x: got %q, driver %q", hl[0], hl[1], got, want)
			}
		}
	})
}
