package hashkey

import (
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// twoTo63 is 2^63, the least double that overflows an int64
// (BSONElement::kLongLongMaxPlusOneAsDouble).
const twoTo63 = float64(1 << 63)

// doubleToInt64 squashes a double to the int64 the server hashes
// (BSONElement::safeNumberLongForHash): NaN is 0; exactly 2^63 is MinInt64,
// a historical overflow the server keeps for compatibility with on-disk
// indexes; anything larger, +Inf included, is MaxInt64; anything below
// -2^63, -Inf included, is MinInt64; everything else truncates toward zero.
func doubleToInt64(d float64) int64 {
	switch {
	case math.IsNaN(d):
		return 0
	case d == twoTo63:
		return math.MinInt64
	case !(d < twoTo63):
		return math.MaxInt64
	case d < -twoTo63:
		return math.MinInt64
	}
	return int64(d) // truncates toward zero; d is in range here
}

var (
	bigMaxInt64    = big.NewInt(math.MaxInt64)
	bigAbsMinInt64 = new(big.Int).Lsh(big.NewInt(1), 63) // |MinInt64|
	maxCoefficient = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(34), nil), big.NewInt(1))
	bigTen         = big.NewInt(10)
)

// decimalToInt64 squashes a Decimal128 to the int64 the server hashes
// (BSONElement::safeNumberLong for NumberDecimal): NaN is 0; values above
// MaxInt64 (+Inf included) are MaxInt64; values below MinInt64 (-Inf
// included) are MinInt64; everything else is rounded to the nearest integer,
// ties to even (Decimal128::toLong's default rounding mode).
func decimalToInt64(d bson.Decimal128) int64 {
	high, low := d.GetBytes()
	negative := high>>63 == 1
	switch high >> 58 & 0x1F {
	case 0x1F: // NaN (quiet or signalling)
		return 0
	case 0x1E: // ±Infinity
		if negative {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	if high>>61&3 == 3 {
		// The "11" combination form encodes a coefficient of at least
		// 2^113 > 10^34 - 1: non-canonical, which IEEE 754 reads as zero.
		return 0
	}
	exp := int(high>>49&(1<<14-1)) - 6176
	coef := new(big.Int).SetUint64(high & (1<<49 - 1))
	coef.Lsh(coef, 64)
	coef.Or(coef, new(big.Int).SetUint64(low))
	if coef.Sign() == 0 || coef.Cmp(maxCoefficient) > 0 {
		return 0 // zero, or a non-canonical coefficient (read as zero)
	}

	limit := bigMaxInt64
	if negative {
		limit = bigAbsMinInt64
	}
	clamped := int64(math.MaxInt64)
	if negative {
		clamped = math.MinInt64
	}

	// |value| = coef * 10^exp = q + r/div, with 0 <= r < div.
	var q, r, div *big.Int
	switch {
	case exp >= 19:
		return clamped // coef >= 1, so |value| >= 10^19 > 2^63
	case exp >= 0:
		q = new(big.Int).Mul(coef, new(big.Int).Exp(bigTen, big.NewInt(int64(exp)), nil))
		r, div = new(big.Int), big.NewInt(1)
	case exp < -40:
		// coef < 10^34, so |value| < 10^-6: rounds to zero.
		return 0
	default:
		div = new(big.Int).Exp(bigTen, big.NewInt(int64(-exp)), nil)
		q, r = new(big.Int).QuoRem(coef, div, new(big.Int))
	}

	// The server clamps on the exact value before rounding.
	if c := q.Cmp(limit); c > 0 || (c == 0 && r.Sign() > 0) {
		return clamped
	}
	// Round half to even. Values within half of the limit round to at most
	// the limit (MaxInt64 is odd, |MinInt64| even), so this cannot overflow.
	twice := new(big.Int).Lsh(r, 1)
	if c := twice.Cmp(div); c > 0 || (c == 0 && q.Bit(0) == 1) {
		q.Add(q, big.NewInt(1))
	}
	if negative {
		q.Neg(q)
	}
	return q.Int64()
}
