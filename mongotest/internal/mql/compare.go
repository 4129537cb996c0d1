package mql

import (
	"bytes"
	"cmp"
	"math"
	"math/big"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Compare orders two BSON values the way MongoDB does (no collation):
//
//	MinKey < undefined < null < numbers < string/symbol < object < array <
//	binData < ObjectId < bool < date < timestamp < regex < dbPointer <
//	javascript < javascriptWithScope < MaxKey
//
// Numbers compare by value across int32, int64, double and decimal128 (NaN
// is below every other number and equal to itself). Strings compare
// bytewise. Documents compare field by field (type, then name, then value),
// a shorter document being smaller when it is a prefix; arrays compare
// element-wise. Binary data compares by length, subtype, then bytes.
// It returns -1, 0 or +1.
func Compare(a, b any) int {
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	return compareSameRank(ra, a, b)
}

// Equal reports whether Compare(a, b) == 0.
func Equal(a, b any) bool {
	return Compare(a, b) == 0
}

func compareSameRank(rank int, a, b any) int {
	switch rank {
	case rankMinKey, rankMaxKey, rankNull, rankUndefined:
		return 0
	case rankNumber:
		return compareNumbers(a, b)
	case rankString:
		return strings.Compare(stringOf(a), stringOf(b))
	case rankObject:
		da, _ := asDoc(a)
		db, _ := asDoc(b)
		return compareDocs(da, db)
	case rankArray:
		aa, _ := asArray(a)
		ab, _ := asArray(b)
		return compareArrays(aa, ab)
	case rankBinary:
		ba, bb := binaryOf(a), binaryOf(b)
		if len(ba.Data) != len(bb.Data) {
			return cmp.Compare(len(ba.Data), len(bb.Data))
		}
		if ba.Subtype != bb.Subtype {
			return cmp.Compare(int(ba.Subtype), int(bb.Subtype))
		}
		return bytes.Compare(ba.Data, bb.Data)
	case rankObjectID:
		oa, ob := a.(bson.ObjectID), b.(bson.ObjectID)
		return bytes.Compare(oa[:], ob[:])
	case rankBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case rankDate:
		x, y := dateOf(a), dateOf(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case rankTimestamp:
		x, y := a.(bson.Timestamp), b.(bson.Timestamp)
		if x.T != y.T {
			if x.T < y.T {
				return -1
			}
			return 1
		}
		if x.I != y.I {
			if x.I < y.I {
				return -1
			}
			return 1
		}
		return 0
	case rankRegex:
		x, y := a.(bson.Regex), b.(bson.Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	case rankDBPointer:
		x, y := a.(bson.DBPointer), b.(bson.DBPointer)
		if len(x.DB) != len(y.DB) {
			return cmp.Compare(len(x.DB), len(y.DB))
		}
		if c := strings.Compare(x.DB, y.DB); c != 0 {
			return c
		}
		return bytes.Compare(x.Pointer[:], y.Pointer[:])
	case rankJavaScript:
		return strings.Compare(string(a.(bson.JavaScript)), string(b.(bson.JavaScript)))
	case rankCodeWithScope:
		x, y := a.(bson.CodeWithScope), b.(bson.CodeWithScope)
		if c := strings.Compare(string(x.Code), string(y.Code)); c != 0 {
			return c
		}
		sx, _ := asDoc(normalize(x.Scope))
		sy, _ := asDoc(normalize(y.Scope))
		return compareDocs(sx, sy)
	}
	return 0
}

func stringOf(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case bson.Symbol:
		return string(t)
	}
	return ""
}

func binaryOf(v any) bson.Binary {
	switch t := v.(type) {
	case bson.Binary:
		return t
	case []byte:
		return bson.Binary{Data: t}
	}
	return bson.Binary{}
}

func dateOf(v any) int64 {
	switch t := v.(type) {
	case bson.DateTime:
		return int64(t)
	case time.Time:
		return int64(bson.NewDateTimeFromTime(t))
	}
	return 0
}

func compareDocs(a, b bson.D) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ra, rb := typeRank(a[i].Value), typeRank(b[i].Value)
		if ra != rb {
			return cmp.Compare(ra, rb)
		}
		if c := strings.Compare(a[i].Key, b[i].Key); c != 0 {
			return c
		}
		if c := compareSameRank(ra, a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func compareArrays(a, b bson.A) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// numKind classifies a number for arithmetic and comparison.
type numKind int

const (
	kInt32 numKind = iota
	kInt64
	kDouble
	kDecimal
)

// num is an unpacked BSON number.
type num struct {
	kind numKind
	i    int64
	f    float64
	d    bson.Decimal128
}

func toNum(v any) (num, bool) {
	switch t := v.(type) {
	case int32:
		return num{kind: kInt32, i: int64(t)}, true
	case int64:
		return num{kind: kInt64, i: t}, true
	case float64:
		return num{kind: kDouble, f: t}, true
	case bson.Decimal128:
		return num{kind: kDecimal, d: t}, true
	case int:
		if t >= math.MinInt32 && t <= math.MaxInt32 {
			return num{kind: kInt32, i: int64(t)}, true
		}
		return num{kind: kInt64, i: int64(t)}, true
	case int8, int16, uint8, uint16, uint32, uint, uint64, float32:
		return toNum(normalize(v))
	}
	return num{}, false
}

func (n num) value() any {
	switch n.kind {
	case kInt32:
		return int32(n.i)
	case kInt64:
		return n.i
	case kDouble:
		return n.f
	}
	return n.d
}

func (n num) float() float64 {
	switch n.kind {
	case kInt32, kInt64:
		return float64(n.i)
	case kDouble:
		return n.f
	}
	return decToFloat(n.d)
}

func compareNumbers(a, b any) int {
	x, _ := toNum(a)
	y, _ := toNum(b)
	return compareNum(x, y)
}

func compareNum(x, y num) int {
	if x.kind <= kInt64 && y.kind <= kInt64 {
		return cmpInt64(x.i, y.i)
	}
	if x.kind == kDecimal || y.kind == kDecimal {
		return compareDecimal(x, y)
	}
	if x.kind == kDouble && y.kind == kDouble {
		return cmpFloat(x.f, y.f)
	}
	if x.kind == kDouble {
		return -cmpIntFloat(y.i, x.f)
	}
	return cmpIntFloat(x.i, y.f)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders doubles with NaN below everything and equal to itself.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpIntFloat compares an int64 and a double exactly.
func cmpIntFloat(i int64, f float64) int {
	if math.IsNaN(f) {
		return 1
	}
	if f >= 9223372036854775808.0 {
		return -1
	}
	if f < -9223372036854775808.0 {
		return 1
	}
	t := int64(f) // truncation toward zero, exact in range
	if i != t {
		return cmpInt64(i, t)
	}
	frac := f - float64(t)
	switch {
	case frac > 0:
		return -1
	case frac < 0:
		return 1
	}
	return 0
}

// exactNum is an exact rational view of a number (with special values).
type exactNum struct {
	nan bool
	inf int
	r   *big.Rat
}

func exactOf(n num) exactNum {
	switch n.kind {
	case kInt32, kInt64:
		return exactNum{r: new(big.Rat).SetInt64(n.i)}
	case kDouble:
		if math.IsNaN(n.f) {
			return exactNum{nan: true}
		}
		if math.IsInf(n.f, 0) {
			if n.f > 0 {
				return exactNum{inf: 1}
			}
			return exactNum{inf: -1}
		}
		return exactNum{r: new(big.Rat).SetFloat64(n.f)}
	}
	d := n.d
	if d.IsNaN() {
		return exactNum{nan: true}
	}
	if s := d.IsInf(); s != 0 {
		return exactNum{inf: s}
	}
	return exactNum{r: decToRat(d)}
}

func decToRat(d bson.Decimal128) *big.Rat {
	bi, exp, err := d.BigInt()
	if err != nil {
		return new(big.Rat)
	}
	r := new(big.Rat).SetInt(bi)
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	return r
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func compareDecimal(x, y num) int {
	a, b := exactOf(x), exactOf(y)
	switch {
	case a.nan && b.nan:
		return 0
	case a.nan:
		return -1
	case b.nan:
		return 1
	}
	if a.inf != 0 || b.inf != 0 {
		return cmp.Compare(a.inf, b.inf)
	}
	return a.r.Cmp(b.r)
}

func decIsZero(d bson.Decimal128) bool {
	if d.IsNaN() || d.IsInf() != 0 {
		return false
	}
	bi, _, err := d.BigInt()
	return err == nil && bi.Sign() == 0
}

func decToFloat(d bson.Decimal128) float64 {
	if d.IsNaN() {
		return math.NaN()
	}
	if s := d.IsInf(); s != 0 {
		return math.Inf(s)
	}
	f, _ := decToRat(d).Float64()
	return f
}

// identical reports whether two values are the same BSON value with the same
// types everywhere (1 and 1.0 are equal for Compare but not identical).
func identical(a, b any) bool {
	if bsonType(a) != bsonType(b) {
		return false
	}
	switch x := a.(type) {
	case bson.D:
		y, _ := asDoc(b)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !identical(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y, _ := asArray(b)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !identical(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, _ := b.(float64)
		if math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
		return x == y && math.Signbit(x) == math.Signbit(y)
	case bson.Decimal128:
		y, _ := b.(bson.Decimal128)
		xh, xl := x.GetBytes()
		yh, yl := y.GetBytes()
		return xh == yh && xl == yl
	}
	return Compare(a, b) == 0
}
