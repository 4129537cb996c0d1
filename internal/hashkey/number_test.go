package hashkey

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDoubleToInt64(t *testing.T) {
	cases := []struct {
		in   float64
		want int64
	}{
		{0, 0},
		{math.Copysign(0, -1), 0},
		{math.NaN(), 0},
		{3.9, 3},
		{-3.9, -3},
		{0.999, 0},
		{-0.999, 0},
		{1e18, 1e18},
		// The server's own bounds tests (src/mongo/bson/bsonelement_test.cpp,
		// SafeNumberLongPositiveBound / NegativeBound): exactly 2^63 maps to
		// MinInt64 for hashing, one quantum below converts exactly, one
		// above clamps.
		{twoTo63, math.MinInt64},
		{math.Nextafter(twoTo63, 0), 0x7ffffffffffffc00},
		{math.Nextafter(twoTo63, math.Inf(1)), math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
		{-twoTo63, math.MinInt64},
		{math.Nextafter(-twoTo63, 0), -0x7ffffffffffffc00},
		{math.Nextafter(-twoTo63, math.Inf(-1)), math.MinInt64},
		{math.Inf(-1), math.MinInt64},
	}
	for _, c := range cases {
		if got := doubleToInt64(c.in); got != c.want {
			t.Errorf("doubleToInt64(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestDecimalToInt64(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"-0", 0},
		{"0E-6176", 0},
		{"1E-6176", 0},
		{"NaN", 0},
		{"-NaN", 0},
		{"Infinity", math.MaxInt64},
		{"-Infinity", math.MinInt64},
		{"3", 3},
		{"3.000", 3},
		{"30E-1", 3},
		{"1.2", 1},
		{"1.5", 2}, // ties to even
		{"2.5", 2},
		{"3.5", 4},
		{"-2.5", -2},
		{"-3.5", -4},
		{"2.4999999999", 2},
		{"2.5000000001", 3},
		{"3.9", 4}, // unlike a double, which truncates
		{"0.5", 0},
		{"-0.5", 0},
		{"0.5000001", 1},
		{"1E+3", 1000},
		{"12345678901234567890123456789012.34E-30", 12},
		{"9223372036854775807", math.MaxInt64},
		{"9223372036854775806.5", math.MaxInt64 - 1},
		{"9223372036854775806.6", math.MaxInt64},
		{"9223372036854775807.4", math.MaxInt64},
		{"9223372036854775808", math.MaxInt64},
		{"-9223372036854775808", math.MinInt64},
		{"-9223372036854775808.4", math.MinInt64},
		{"-9223372036854775807.5", math.MinInt64},
		{"-9223372036854775809", math.MinInt64},
		{"1E+19", math.MaxInt64},
		{"-1E+19", math.MinInt64},
		{"1E+6111", math.MaxInt64},
		{"-9.999999999999999999999999999999999E+6144", math.MinInt64},
		{"9.999999999999999999999999999999999E-6143", 0},
		{"9999999999999999999999999999999999E-34", 1},
	}
	for _, c := range cases {
		d, err := bson.ParseDecimal128(c.in)
		if err != nil {
			t.Fatalf("ParseDecimal128(%q): %v", c.in, err)
		}
		if got := decimalToInt64(d); got != c.want {
			t.Errorf("decimalToInt64(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestDecimalNonCanonicalIsZero(t *testing.T) {
	// Coefficient 10^34 (just above the maximum 10^34-1), exponent 0.
	hi := uint64(0x0001ed09bead87c0) | uint64(6176)<<49
	lo := uint64(0x378d8e6400000000)
	if got := decimalToInt64(bson.NewDecimal128(hi, lo)); got != 0 {
		t.Errorf("non-canonical coefficient: got %d, want 0", got)
	}
	// The "11" combination form is always non-canonical.
	if got := decimalToInt64(bson.NewDecimal128(0x6000000000000000|uint64(6176)<<47, 5)); got != 0 {
		t.Errorf("11-form: got %d, want 0", got)
	}
}

// Values that compare equal across numeric types hash equal; the
// server's ConsistentHashOfIntLongAndDouble test.
func TestNumericTypesHashEqual(t *testing.T) {
	groups := [][]any{
		{int32(3), int64(3), 3.0, 3.1, 3.99, mustDec(t, "3"), mustDec(t, "3.00"), mustDec(t, "2.5000001"), int(3), uint8(3), uint64(3), float32(3.5)},
		{int32(-7), int64(-7), -7.0, -7.9, mustDec(t, "-7.4"), mustDec(t, "-6.5000001"), int8(-7)},
		{int64(1) << 40, float64(int64(1) << 40), mustDec(t, "1099511627776")},
	}
	for _, g := range groups {
		want, err := Hash(g[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range g[1:] {
			got, err := Hash(v)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("Hash(%T %v) = %d, want %d (same as %T %v)", v, v, got, want, g[0], g[0])
			}
		}
	}
	a, _ := Hash(int32(3))
	b, _ := Hash(int32(4))
	if a == b {
		t.Error("3 and 4 hash equal")
	}
	c, _ := Hash("3")
	if a == c {
		t.Error("3 and \"3\" hash equal")
	}
}
