package mql

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

func eqPred(x any) valuePred {
	switch x.(type) {
	case nil:
		return func(v any, _ *matchCtx) bool {
			switch v.(type) {
			case nil, missingT:
				return true
			}
			return false
		}
	case bson.MinKey, bson.MaxKey:
		t := bsonType(x)
		return func(v any, _ *matchCtx) bool { return bsonType(v) == t }
	}
	rank := typeRank(x)
	if xf, ok := x.(float64); ok && math.IsNaN(xf) {
		return func(v any, _ *matchCtx) bool { return isNaN(v) }
	}
	return func(v any, mc *matchCtx) bool {
		if typeRank(v) != rank {
			return false
		}
		if mc != nil && mc.coll != nil {
			return CompareCollated(v, x, mc.coll) == 0
		}
		return Compare(v, x) == 0
	}
}

func isNaN(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsNaN(x)
	case bson.Decimal128:
		return x.IsNaN()
	}
	return false
}

func cmpPred(op string, x any) valuePred {
	test := func(c int) bool {
		switch op {
		case "$gt":
			return c > 0
		case "$gte":
			return c >= 0
		case "$lt":
			return c < 0
		}
		return c <= 0
	}
	switch x.(type) {
	case nil:
		if op == "$gte" || op == "$lte" {
			return eqPred(nil)
		}
		return func(any, *matchCtx) bool { return false }
	case bson.MinKey, bson.MaxKey:
		// Every other type (missing included) compares above MinKey and
		// below MaxKey.
		return func(v any, _ *matchCtx) bool {
			return test(Compare(v, x))
		}
	}
	rank := typeRank(x)
	xNaN := isNaN(x)
	return func(v any, mc *matchCtx) bool {
		if typeRank(v) != rank {
			return false
		}
		if xNaN || isNaN(v) {
			return xNaN && isNaN(v) && (op == "$gte" || op == "$lte")
		}
		if mc != nil && mc.coll != nil {
			return test(CompareCollated(v, x, mc.coll))
		}
		return test(Compare(v, x))
	}
}

func inPred(arr bson.A) (valuePred, error) {
	var preds []valuePred
	hasNull := false
	// fast path: values hashed by canonical key when simple
	for _, x := range arr {
		x = normalize(x)
		if re, ok := x.(bson.Regex); ok {
			p, err := regexPred(re.Pattern, re.Options)
			if err != nil {
				return nil, err
			}
			preds = append(preds, p)
			continue
		}
		if _, ok := isOperatorDoc(x); ok {
			return nil, errf(mongoerr.CodeBadValue, "cannot nest $ under $in")
		}
		if _, undef := x.(bson.Undefined); undef {
			return nil, errf(mongoerr.CodeBadValue, "InMatchExpression equality cannot be undefined")
		}
		if x == nil {
			hasNull = true
		}
		preds = append(preds, eqPred(x))
	}
	_ = hasNull
	return func(v any, vars *matchCtx) bool {
		for _, p := range preds {
			if p(v, vars) {
				return true
			}
		}
		return false
	}, nil
}

func regexPred(pattern, options string) (valuePred, error) {
	re, err := compileRegex(pattern, options)
	if err != nil {
		return nil, err
	}
	return func(v any, _ *matchCtx) bool {
		switch x := v.(type) {
		case string:
			return re.MatchString(x)
		case bson.Symbol:
			return re.MatchString(string(x))
		case bson.Regex:
			return x.Pattern == pattern && x.Options == options
		}
		return false
	}, nil
}

// typeName returns the $type alias of a value ("missing" for absent).
func typeName(v any) string {
	if n, ok := typeNames[bsonType(v)]; ok {
		return n
	}
	return "unknown"
}

// parseTypeSpec parses one $type argument; -2 stands for "number".
func parseTypeSpec(x any) (int, error) {
	switch y := x.(type) {
	case string:
		if y == "number" {
			return -2, nil
		}
		n, ok := typeNumByAlias[y]
		if !ok {
			return 0, errf(mongoerr.CodeBadValue, "Unknown type name alias: %s", y)
		}
		return n, nil
	case int32, int64, float64, bson.Decimal128:
		n, ok := exactInt(y)
		if !ok {
			return 0, errf(mongoerr.CodeBadValue, "Invalid numerical type code: %s", describe(y))
		}
		if n == typeMinKey || n == typeMaxKey || (n >= 1 && n <= 19) {
			return int(n), nil
		}
		return 0, errf(mongoerr.CodeBadValue, "Invalid numerical type code: %d", n)
	}
	return 0, errf(mongoerr.CodeTypeMismatch, "type must be represented as a number or a string")
}

func typePred(arg any) (valuePred, error) {
	var specs []any
	if arr, ok := arg.(bson.A); ok {
		if len(arr) == 0 {
			return func(any, *matchCtx) bool { return false }, nil
		}
		specs = arr
	} else {
		specs = []any{arg}
	}
	var codes []int
	for _, s := range specs {
		c, err := parseTypeSpec(normalize(s))
		if err != nil {
			return nil, err
		}
		codes = append(codes, c)
	}
	return func(v any, _ *matchCtx) bool {
		if IsMissing(v) {
			return false
		}
		t := bsonType(v)
		for _, c := range codes {
			if c == t || (c == -2 && isNumber(v)) {
				return true
			}
		}
		return false
	}, nil
}

func elemMatchPred(d bson.D) (valuePred, error) {
	valueForm := false
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		switch d[0].Key {
		case "$and", "$or", "$nor", "$expr", "$where", "$text", "$comment", "$alwaysTrue", "$alwaysFalse", "$jsonSchema":
		default:
			valueForm = true
		}
	}
	if valueForm {
		preds, err := compileOperators(d)
		if err != nil {
			return nil, err
		}
		return func(v any, vars *matchCtx) bool {
			arr, ok := v.(bson.A)
			if !ok {
				return false
			}
			for _, e := range arr {
				if predsOnValue(preds, shallow(e), vars) {
					return true
				}
			}
			return false
		}, nil
	}
	m, err := compileAnd(d, false)
	if err != nil {
		return nil, err
	}
	return func(v any, vars *matchCtx) bool {
		arr, ok := v.(bson.A)
		if !ok {
			return false
		}
		for _, e := range arr {
			switch x := shallow(e).(type) {
			case bson.D:
				if m(x, vars) {
					return true
				}
			case bson.A:
				if m(arrayAsDoc(x), vars) {
					return true
				}
			}
		}
		return false
	}, nil
}

func arrayAsDoc(a bson.A) bson.D {
	d := make(bson.D, len(a))
	for i, v := range a {
		d[i] = bson.E{Key: strconv.Itoa(i), Value: v}
	}
	return d
}

func bitsPred(op string, arg any) (valuePred, error) {
	var mask uint64
	var positions []int
	useMask := false
	switch x := arg.(type) {
	case int32, int64, float64, bson.Decimal128:
		n, ok := exactInt(x)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "%s has to be an integer", op)
		}
		if n < 0 {
			return nil, errf(mongoerr.CodeBadValue, "%s has to be a non-negative integer", op)
		}
		mask, useMask = uint64(n), true
	case bson.A:
		for _, p := range x {
			n, ok := exactInt(normalize(p))
			if !ok || n < 0 {
				return nil, errf(mongoerr.CodeBadValue, "bit positions must be non-negative integers")
			}
			positions = append(positions, int(n))
		}
	case bson.Binary:
		for i, b := range x.Data {
			for j := 0; j < 8; j++ {
				if b&(1<<j) != 0 {
					positions = append(positions, i*8+j)
				}
			}
		}
	default:
		return nil, errf(mongoerr.CodeBadValue, "%s takes an Array, a number, or a BinData but received: %v", op, arg)
	}
	if useMask {
		for i := 0; i < 64; i++ {
			if mask&(1<<i) != 0 {
				positions = append(positions, i)
			}
		}
	}
	return func(v any, _ *matchCtx) bool {
		bit := func(int) bool { return false }
		switch x := v.(type) {
		case int32, int64, float64, bson.Decimal128:
			n, ok := exactInt(x)
			if !ok {
				return false
			}
			bit = func(p int) bool {
				if p >= 64 {
					return n < 0
				}
				return uint64(n)&(1<<p) != 0
			}
		case bson.Binary:
			bit = func(p int) bool {
				if p/8 >= len(x.Data) {
					return false
				}
				return x.Data[p/8]&(1<<(p%8)) != 0
			}
		default:
			return false
		}
		switch op {
		case "$bitsAllSet":
			for _, p := range positions {
				if !bit(p) {
					return false
				}
			}
			return true
		case "$bitsAllClear":
			for _, p := range positions {
				if bit(p) {
					return false
				}
			}
			return true
		case "$bitsAnySet":
			for _, p := range positions {
				if bit(p) {
					return true
				}
			}
			return false
		}
		for _, p := range positions {
			if !bit(p) {
				return true
			}
		}
		return false
	}, nil
}

// exactInt converts a number with an exact 64-bit integer value.
func exactInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) || x < -9.223372036854775808e18 || x >= 9.223372036854775808e18 {
			return 0, false
		}
		return int64(x), true
	case bson.Decimal128:
		if x.IsNaN() || x.IsInf() != 0 {
			return 0, false
		}
		r := decToRat(x)
		if !r.IsInt() || !r.Num().IsInt64() {
			return 0, false
		}
		return r.Num().Int64(), true
	}
	return 0, false
}

// truncToInt64 truncates a number toward zero.
func truncToInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, false
		}
		if x < -9.223372036854775808e18 || x >= 9.223372036854775808e18 {
			return 0, false
		}
		return int64(x), true
	case bson.Decimal128:
		f, ok := toFloat(x)
		if !ok {
			return 0, false
		}
		return truncToInt64(f)
	}
	return 0, false
}

// Truthy is MongoDB's truthiness (BSONElement::trueValue, the aggregation
// $cond/$and/$or/$not reading): false, null, missing, undefined and a zero
// of any numeric type (Decimal128 included) are false; every other value
// is true. The emulator reads boolean command options (upsert, multi,
// unique, ...) with it too.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil, missingT, bson.Null, bson.Undefined:
		return false
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		return !decIsZero(x) // bson.Decimal128.IsZero is the all-zero bit pattern only, not 0 or -0
	}
	return true
}
