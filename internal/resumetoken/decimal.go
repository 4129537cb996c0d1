package resumetoken

import (
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decimal128 support is partial: zeros, NaN, infinities and finite values
// exactly equal to a double are encoded like the server does. Other values
// need the server's "decimal continuation" and are rejected.

const (
	decExponentBias      = 6176
	decMaxBiasedExponent = 12287
	decMaxDigits         = 34
)

var (
	bigTen      = big.NewInt(10)
	bigMaxCoeff = new(big.Int).Exp(bigTen, big.NewInt(decMaxDigits), nil) // exclusive
)

func decInfHigh(neg bool) uint64 {
	if neg {
		return 0xF800000000000000
	}
	return 0x7800000000000000
}

// appendDecimal encodes a Decimal128 given as its two 64-bit halves.
func (e *encoder) appendDecimal(hi, lo uint64) error {
	d := bson.NewDecimal128(hi, lo)
	neg := hi>>63 != 0
	switch {
	case d.IsNaN():
		e.tb.bits(tbDecimal, 2)
		e.buf = append(e.buf, ctNumericNaN)
		return nil
	case d.IsInf() != 0:
		e.tb.bits(tbDecimal, 2)
		if neg {
			e.buf = append(e.buf, ctNegativeLarge)
		} else {
			e.buf = append(e.buf, ctPositiveLarge)
		}
		e.buf = appendU64BE(e.buf, ^uint64(0), neg)
		return nil
	}
	coef, exp, err := d.BigInt()
	if err != nil {
		return newErr(codeUnsupported, "decimal128: %v", err)
	}
	biased := uint32(exp + decExponentBias)
	if coef.Sign() == 0 {
		which := biased
		if neg {
			which += decMaxBiasedExponent + 1
		}
		e.tb.bits(uint32(which>>12)+tbDecimalZero0xxx, 5)
		e.tb.bits(which&0xFFF, 12)
		e.buf = append(e.buf, ctNumericZero)
		return nil
	}
	r := new(big.Rat).SetInt(coef)
	scale := new(big.Int).Exp(bigTen, big.NewInt(int64(abs(exp))), nil)
	if exp >= 0 {
		r.Mul(r, new(big.Rat).SetInt(scale))
	} else {
		r.Quo(r, new(big.Rat).SetInt(scale))
	}
	f, exact := r.Float64()
	if !exact || math.IsInf(f, 0) {
		return newErr(codeUnsupported, "decimal128 %s is not exactly a double; only such decimals are supported in resume tokens", d)
	}
	e.tb.bits(tbDecimal, 2)
	e.tb.bits(biased&(1<<tbStoredDecimalExpBits-1), tbStoredDecimalExpBits)
	e.buf = appendDouble(e.buf, f)
	return nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// exactDecimal appends the Decimal128 equal to v whose biased exponent has
// the low 6 bits read from the type bits. Among the representations of v
// (coefficients below 10**34) at most one has such an exponent, since they
// span fewer than 64 exponents.
func (d *decoder) exactDecimal(dst []byte, key string, v float64) ([]byte, error) {
	stored, err := d.tb.bits(tbStoredDecimalExpBits)
	if err != nil {
		return nil, err
	}
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, ksErr(50829, "Expected non-zero number for decimal.")
	}
	r := new(big.Rat).SetFloat64(v)
	// v = num / 2**k exactly; v = num*5**k / 10**k.
	num := new(big.Int).Set(r.Num())
	den := r.Denom()
	k := den.BitLen() - 1 // den is a power of two
	num.Mul(num, new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(k)), nil))
	exp := -k
	neg := num.Sign() < 0
	num.Abs(num)
	// Normalize: strip trailing zeros (the highest possible exponent).
	q, rem := new(big.Int), new(big.Int)
	for {
		q.QuoRem(num, bigTen, rem)
		if rem.Sign() != 0 {
			break
		}
		num.Set(q)
		exp++
	}
	if num.Cmp(bigMaxCoeff) >= 0 {
		return nil, ksErr(50814, "Unexpected exponent values after adjusting Decimal.")
	}
	// Lower the exponent (scale the coefficient up) until the stored bits match.
	for (uint32(exp+decExponentBias) & (1<<tbStoredDecimalExpBits - 1)) != stored {
		num.Mul(num, bigTen)
		exp--
		if num.Cmp(bigMaxCoeff) >= 0 {
			return nil, ksErr(50814, "Unexpected exponent values after adjusting Decimal.")
		}
	}
	biased := exp + decExponentBias
	if biased < 0 || biased > decMaxBiasedExponent {
		return nil, ksErr(50845, "Unexpected exponent values after adjusting Decimal.")
	}
	var lo, hi uint64
	var b [16]byte
	num.FillBytes(b[:]) // num < 10**34 < 2**113 fits
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	hi |= uint64(biased) << 49
	if neg {
		hi |= 1 << 63
	}
	return appendDecimalElem(dst, key, hi, lo), nil
}
