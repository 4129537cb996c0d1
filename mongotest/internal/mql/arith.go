package mql

import (
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// toFloat converts any number to float64.
func toFloat(v any) (float64, bool) {
	n, ok := toNum(v)
	if !ok {
		return 0, false
	}
	return n.float(), true
}

// ratToDecimal converts a rational to the nearest Decimal128 (34 digits).
func ratToDecimal(r *big.Rat) bson.Decimal128 {
	f := new(big.Float).SetPrec(200).SetRat(r)
	d, err := bson.ParseDecimal128(f.Text('e', 33))
	if err != nil {
		return decimalSpecial(0)
	}
	return trimDecimal(d)
}

// trimDecimal removes trailing zeros introduced by the fixed-precision
// conversion (1.000...0E+0 → 1) while keeping the value.
func trimDecimal(d bson.Decimal128) bson.Decimal128 {
	bi, exp, err := d.BigInt()
	if err != nil || bi.Sign() == 0 {
		if err == nil {
			z, _ := bson.ParseDecimal128("0")
			return z
		}
		return d
	}
	ten := big.NewInt(10)
	q, m := new(big.Int), new(big.Int)
	for exp < 0 {
		q.QuoRem(bi, ten, m)
		if m.Sign() != 0 {
			break
		}
		bi.Set(q)
		exp++
	}
	out, ok := bson.ParseDecimal128FromBigInt(bi, exp)
	if !ok {
		return d
	}
	return out
}

// floatToDecimal converts a double to decimal128 (special values kept).
func floatToDecimal(f float64) bson.Decimal128 {
	switch {
	case math.IsNaN(f):
		return decimalSpecial(0)
	case math.IsInf(f, 1):
		return decimalSpecial(1)
	case math.IsInf(f, -1):
		return decimalSpecial(-1)
	}
	d, err := bson.ParseDecimal128(formatDouble(f))
	if err != nil {
		return ratToDecimal(new(big.Rat).SetFloat64(f))
	}
	return d
}

func decimalSpecial(s int) bson.Decimal128 {
	str := "NaN"
	switch s {
	case 1:
		str = "Infinity"
	case -1:
		str = "-Infinity"
	}
	d, _ := bson.ParseDecimal128(str)
	return d
}

// arith applies '+', '-' or '*' to two numbers with MongoDB's type
// promotion: int32 results widen to int64 on overflow and int64 results to
// double; any double gives a double and any decimal a decimal.
func arith(op byte, a, b any) any {
	x, _ := toNum(a)
	y, _ := toNum(b)
	k := x.kind
	if y.kind > k {
		k = y.kind
	}
	switch k {
	case kDecimal:
		ex, ey := exactOf(x), exactOf(y)
		if ex.nan || ey.nan || ex.inf != 0 || ey.inf != 0 {
			return floatToDecimal(floatOp(op, x.float(), y.float()))
		}
		z := new(big.Rat)
		switch op {
		case '+':
			z.Add(ex.r, ey.r)
		case '-':
			z.Sub(ex.r, ey.r)
		default:
			z.Mul(ex.r, ey.r)
		}
		return ratToDecimal(z)
	case kDouble:
		return floatOp(op, x.float(), y.float())
	}
	var z int64
	overflow := false
	switch op {
	case '+':
		z = x.i + y.i
		overflow = (x.i > 0 && y.i > 0 && z < 0) || (x.i < 0 && y.i < 0 && z >= 0)
	case '-':
		z = x.i - y.i
		overflow = (x.i >= 0 && y.i < 0 && z < 0) || (x.i < 0 && y.i > 0 && z >= 0)
	default:
		if x.i != 0 && y.i != 0 {
			z = x.i * y.i
			overflow = z/y.i != x.i || (x.i == -1 && y.i == math.MinInt64) || (y.i == -1 && x.i == math.MinInt64)
		}
	}
	if overflow {
		return floatOp(op, float64(x.i), float64(y.i))
	}
	if k == kInt32 && z >= math.MinInt32 && z <= math.MaxInt32 {
		return int32(z)
	}
	return z
}

func floatOp(op byte, a, b float64) float64 {
	switch op {
	case '+':
		return a + b
	case '-':
		return a - b
	}
	return a * b
}
