package mql

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Less common expression operators: math, strings, sets, conversions.

func init() {
	fixed("$sqrt", 1, 1, mathOp("$sqrt", func(f float64) (float64, error) {
		if f < 0 {
			return 0, errf(28714, "$sqrt's argument must be greater than or equal to 0")
		}
		return math.Sqrt(f), nil
	}))
	fixed("$exp", 1, 1, mathOp("$exp", func(f float64) (float64, error) { return math.Exp(f), nil }))
	fixed("$ln", 1, 1, mathOp("$ln", func(f float64) (float64, error) {
		if f <= 0 {
			return 0, errf(28766, "$ln's argument must be a positive number, but is %s", formatDouble(f))
		}
		return math.Log(f), nil
	}))
	fixed("$log10", 1, 1, mathOp("$log10", func(f float64) (float64, error) {
		if f <= 0 {
			return 0, errf(28761, "$log10's argument must be a positive number, but is %s", formatDouble(f))
		}
		return math.Log10(f), nil
	}))
	fixed("$log", 2, 2, opLog)
	fixed("$pow", 2, 2, opPow)
	fixed("$round", 1, 2, placeOp("$round", roundHalfEven))
	fixed("$trunc", 1, 2, placeOp("$trunc", math.Trunc))

	fixed("$substr", 3, 3, substrBytes("$substr"))
	fixed("$substrBytes", 3, 3, substrBytes("$substrBytes"))
	fixed("$substrCP", 3, 3, opSubstrCP)
	fixed("$strLenCP", 1, 1, func(a []any) (any, error) {
		s, ok := a[0].(string)
		if !ok {
			return nil, errf(34471, "$strLenCP requires a string argument, found: %s", typeName(a[0]))
		}
		return int32(utf8.RuneCountInString(s)), nil
	})
	fixed("$strcasecmp", 2, 2, func(a []any) (any, error) {
		x, err := coerceString(a[0], "$strcasecmp")
		if err != nil {
			return nil, err
		}
		y, err := coerceString(a[1], "$strcasecmp")
		if err != nil {
			return nil, err
		}
		return int32(strings.Compare(strings.ToLower(x), strings.ToLower(y))), nil
	})
	fixed("$indexOfBytes", 2, 4, indexOfStr("$indexOfBytes", false))
	fixed("$indexOfCP", 2, 4, indexOfStr("$indexOfCP", true))
	registerInternal("$trim", compileTrim(true, true))
	registerInternal("$ltrim", compileTrim(true, false))
	registerInternal("$rtrim", compileTrim(false, true))
	registerInternal("$regexMatch", compileRegexOp("$regexMatch"))
	registerInternal("$regexFind", compileRegexOp("$regexFind"))
	registerInternal("$regexFindAll", compileRegexOp("$regexFindAll"))
	registerInternal("$replaceOne", compileReplace("$replaceOne", false))
	registerInternal("$replaceAll", compileReplace("$replaceAll", true))

	fixed("$slice", 2, 3, opSlice)
	fixed("$indexOfArray", 2, 4, opIndexOfArray)
	fixed("$range", 2, 3, opRange)
	fixed("$setUnion", 0, -1, setOp("$setUnion"))
	fixed("$setIntersection", 0, -1, setOp("$setIntersection"))
	fixed("$setDifference", 2, 2, setOp("$setDifference"))
	fixed("$setEquals", 2, -1, setOp("$setEquals"))
	fixed("$setIsSubset", 2, 2, setOp("$setIsSubset"))
	fixed("$anyElementTrue", 1, 1, elementsTrue("$anyElementTrue", true))
	fixed("$allElementsTrue", 1, 1, elementsTrue("$allElementsTrue", false))
	registerInternal("$sortArray", compileSortArray)
	registerInternal("$firstN", compileFirstLastN("$firstN", true))
	registerInternal("$lastN", compileFirstLastN("$lastN", false))
	registerInternal("$setField", compileSetField("$setField", false))
	registerInternal("$unsetField", compileSetField("$unsetField", true))

	registerInternal("$rand", func(_ *compiler, _ string, arg any) (exprFn, error) {
		// {$rand: {}} (the documented form) or {$rand: []}.
		if d, ok := arg.(bson.D); ok && len(d) == 0 {
			arg = bson.A{}
		}
		if a, ok := arg.(bson.A); !ok || len(a) != 0 {
			return nil, errf(16020, "Expression $rand takes exactly 0 arguments.")
		}
		return func(*evalCtx) (any, error) { return rand.Float64(), nil }, nil
	})
	fixed("$binarySize", 1, 1, func(a []any) (any, error) {
		switch x := a[0].(type) {
		case nil, missingT:
			return nil, nil
		case string:
			return int32(len(x)), nil
		case bson.Binary:
			return int32(len(x.Data)), nil
		}
		return nil, errf(51276, "$binarySize requires a string or BinData argument, found: %s", typeName(a[0]))
	})
	fixed("$bsonSize", 1, 1, func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		d, ok := a[0].(bson.D)
		if !ok {
			return nil, errf(31393, "$bsonSize requires a document input, found: %s", typeName(a[0]))
		}
		b, err := bson.Marshal(d)
		if err != nil {
			return nil, errf(mongoerr.CodeBadValue, "$bsonSize: %v", err)
		}
		return int32(len(b)), nil
	})
}

func mathOp(name string, f func(float64) (float64, error)) evalFunc {
	return func(a []any) (any, error) {
		v := a[0]
		if isNullish(v) {
			return nil, nil
		}
		x, ok := toFloat(v)
		if !ok {
			return nil, errf(28765, "%s only supports numeric types, not %s", name, typeName(v))
		}
		r, err := f(x)
		if err != nil {
			return nil, err
		}
		if _, isDec := v.(bson.Decimal128); isDec {
			return floatToDecimal(r), nil
		}
		return r, nil
	}
}

func opLog(a []any) (any, error) {
	if isNullish(a[0]) || isNullish(a[1]) {
		return nil, nil
	}
	x, ok1 := toFloat(a[0])
	b, ok2 := toFloat(a[1])
	if !ok1 {
		return nil, errf(28756, "$log's argument must be numeric, not %s", typeName(a[0]))
	}
	if !ok2 {
		return nil, errf(28757, "$log's base must be numeric, not %s", typeName(a[1]))
	}
	if x <= 0 {
		return nil, errf(28758, "$log's argument must be a positive number, but is %s", formatDouble(x))
	}
	if b <= 0 || b == 1 {
		return nil, errf(28759, "$log's base must be a positive number not equal to 1, but is %s", formatDouble(b))
	}
	return math.Log(x) / math.Log(b), nil
}

func opPow(a []any) (any, error) {
	if isNullish(a[0]) || isNullish(a[1]) {
		return nil, nil
	}
	if !isNumber(a[0]) {
		return nil, errf(28762, "$pow's base must be numeric, not %s", typeName(a[0]))
	}
	if !isNumber(a[1]) {
		return nil, errf(28763, "$pow's exponent must be numeric, not %s", typeName(a[1]))
	}
	bx, _ := toNum(a[0])
	ex, _ := toNum(a[1])
	if (bx.kind == kInt32 || bx.kind == kInt64) && (ex.kind == kInt32 || ex.kind == kInt64) {
		if bx.i == 0 && ex.i < 0 {
			return nil, errf(28764, "$pow cannot take a base of 0 and a negative exponent")
		}
		if ex.i >= 0 {
			// exact integer power while it fits, else double
			res := int64(1)
			ok := true
			switch {
			case bx.i == 0 || bx.i == 1:
				if ex.i > 0 {
					res = bx.i
				}
			case bx.i == -1:
				if ex.i%2 == 1 {
					res = -1
				}
			default: // |base| >= 2 overflows within 64 steps
				for i := int64(0); i < ex.i && ok; i++ {
					n := res * bx.i
					if n/bx.i != res {
						ok = false
					}
					res = n
				}
			}
			if ok {
				if bx.kind == kInt32 && ex.kind == kInt32 && res >= math.MinInt32 && res <= math.MaxInt32 {
					return int32(res), nil
				}
				return res, nil
			}
		}
		return math.Pow(float64(bx.i), float64(ex.i)), nil
	}
	r := math.Pow(bx.float(), ex.float())
	if bx.kind == kDecimal || ex.kind == kDecimal {
		return floatToDecimal(r), nil
	}
	return r, nil
}

func roundHalfEven(f float64) float64 { return math.RoundToEven(f) }

// placeOp implements $round / $trunc with an optional place argument.
func placeOp(name string, f func(float64) float64) evalFunc {
	return func(a []any) (any, error) {
		v := a[0]
		if isNullish(v) {
			return nil, nil
		}
		place := int64(0)
		if len(a) > 1 {
			if isNullish(a[1]) {
				return nil, nil
			}
			p, ok := exactInt(a[1])
			if !ok || p < -20 || p > 100 {
				return nil, errf(51083, "cannot apply %s with precision value %s value must be in [-20, 100]", name, describe(a[1]))
			}
			place = p
		}
		if !isNumber(v) {
			return nil, errf(51081, "%s only supports numeric types, not %s", name, typeName(v))
		}
		scale := math.Pow(10, float64(place))
		apply := func(x float64) float64 {
			if place == 0 {
				return f(x)
			}
			return f(x*scale) / scale
		}
		switch x := v.(type) {
		case int32, int64:
			if place >= 0 {
				return x, nil
			}
			n, _ := toNum(x)
			r := apply(float64(n.i))
			if x, ok := x.(int32); ok && r >= math.MinInt32 && r <= math.MaxInt32 {
				_ = x
				return int32(r), nil
			}
			return int64(r), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return x, nil
			}
			return apply(x), nil
		case bson.Decimal128:
			fl, _ := toFloat(x)
			return floatToDecimal(apply(fl)), nil
		}
		return nil, nil
	}
}

func coerceString(v any, op string) (string, error) {
	if isNullish(v) {
		return "", nil
	}
	s, err := toStringValue(v, op)
	if err != nil {
		return "", errf(16007, "can't convert from BSON type %s to String", typeName(v))
	}
	return s.(string), nil
}

func substrBytes(name string) evalFunc {
	return func(a []any) (any, error) {
		s, err := coerceString(a[0], name)
		if err != nil {
			return nil, err
		}
		if !isNumber(a[1]) {
			return nil, errf(16034, "%s:  starting index must be a numeric type (is BSON type %s)", name, typeName(a[1]))
		}
		if !isNumber(a[2]) {
			return nil, errf(16035, "%s:  length must be a numeric type (is BSON type %s)", name, typeName(a[2]))
		}
		start, _ := truncToInt64(a[1])
		length, _ := truncToInt64(a[2])
		if start < 0 {
			return "", nil
		}
		if start > int64(len(s)) {
			return "", nil
		}
		if start < int64(len(s)) && !utf8.RuneStart(s[start]) {
			return nil, errf(28656, "%s:  Invalid range, starting index is a UTF-8 continuation byte.", name)
		}
		end := int64(len(s))
		if length >= 0 && start+length < end {
			end = start + length
		}
		if end < int64(len(s)) && !utf8.RuneStart(s[end]) {
			return nil, errf(28657, "%s:  Invalid range, ending index is in the middle of a UTF-8 character.", name)
		}
		return s[start:end], nil
	}
}

func opSubstrCP(a []any) (any, error) {
	s, err := coerceString(a[0], "$substrCP")
	if err != nil {
		return nil, err
	}
	if !isNumber(a[1]) {
		return nil, errf(34450, "$substrCP: starting index must be a numeric type (is BSON type %s)", typeName(a[1]))
	}
	if !isNumber(a[2]) {
		return nil, errf(34452, "$substrCP: length must be a numeric type (is BSON type %s)", typeName(a[2]))
	}
	start, ok1 := exactInt(a[1])
	length, ok2 := exactInt(a[2])
	if !ok1 {
		return nil, errf(34451, "$substrCP: starting index cannot be represented as a 32-bit integral value")
	}
	if !ok2 {
		return nil, errf(34453, "$substrCP: length cannot be represented as a 32-bit integral value")
	}
	if start < 0 {
		return nil, errf(34455, "$substrCP: starting index must be non-negative (got: %d)", start)
	}
	if length < 0 {
		return nil, errf(34454, "$substrCP: length must be a nonnegative integer.")
	}
	r := []rune(s)
	if start >= int64(len(r)) {
		return "", nil
	}
	end := start + length
	if end > int64(len(r)) {
		end = int64(len(r))
	}
	return string(r[start:end]), nil
}

func indexOfStr(name string, cp bool) evalFunc {
	return func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, errf(40091, "%s requires a string as the first argument, found: %s", name, typeName(a[0]))
		}
		sub, ok := a[1].(string)
		if !ok {
			return nil, errf(40092, "%s requires a string as the second argument, found: %s", name, typeName(a[1]))
		}
		units := []rune(s)
		length := int64(len(s))
		if cp {
			length = int64(len(units))
		}
		start, end := int64(0), length
		if len(a) > 2 {
			n, ok := exactInt(a[2])
			if !ok || n < 0 {
				return nil, errf(40097, "%s requires a nonnegative integral starting index", name)
			}
			start = n
		}
		if len(a) > 3 {
			n, ok := exactInt(a[3])
			if !ok || n < 0 {
				return nil, errf(40097, "%s requires a nonnegative integral ending index", name)
			}
			if n < end {
				end = n
			}
		}
		if start > end || start > length {
			return int32(-1), nil
		}
		if cp {
			hay := string(units[start:end])
			i := strings.Index(hay, sub)
			if i < 0 {
				return int32(-1), nil
			}
			return int32(start + int64(utf8.RuneCountInString(hay[:i]))), nil
		}
		i := strings.Index(s[start:end], sub)
		if i < 0 {
			return int32(-1), nil
		}
		return int32(start + int64(i)), nil
	}
}

func compileTrim(left, right bool) opCompiler {
	return func(c *compiler, name string, arg any) (exprFn, error) {
		m, err := namedArgs(arg, []string{"input", "chars"}, 50694, name+" found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(50696, "%s only supports an object as an argument, found: %s", name, typeName(arg))
		}
		inSpec, ok := m["input"]
		if !ok {
			return nil, errf(50695, "%s requires an 'input' field", name)
		}
		input, err := c.compile(inSpec)
		if err != nil {
			return nil, err
		}
		var chars exprFn
		if cs, ok := m["chars"]; ok {
			if chars, err = c.compile(cs); err != nil {
				return nil, err
			}
		}
		return func(ctx *evalCtx) (any, error) {
			v, err := input(ctx)
			if err != nil {
				return nil, err
			}
			if isNullish(v) {
				return nil, nil
			}
			s, ok := v.(string)
			if !ok {
				return nil, errf(50699, "%s requires its input to be a string, got %s (of type %s) instead.", name, describe(v), typeName(v))
			}
			cut := " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\x00"
			if chars != nil {
				cv, err := chars(ctx)
				if err != nil {
					return nil, err
				}
				if isNullish(cv) {
					return nil, nil
				}
				cs, ok := cv.(string)
				if !ok {
					return nil, errf(50700, "%s requires 'chars' to be a string, got %s (of type %s) instead.", name, describe(cv), typeName(cv))
				}
				cut = cs
			}
			if left {
				s = strings.TrimLeft(s, cut)
			}
			if right {
				s = strings.TrimRight(s, cut)
			}
			return s, nil
		}, nil
	}
}

func compileRegexOp(name string) opCompiler {
	return func(c *compiler, _ string, arg any) (exprFn, error) {
		m, err := namedArgs(arg, []string{"input", "regex", "options"}, 31024, name+" found an unknown field: ")
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(51103, "%s expects an object of named arguments but found: %s", name, typeName(arg))
		}
		var fns [3]exprFn
		for i, k := range []string{"input", "regex", "options"} {
			spec, ok := m[k]
			if !ok {
				if k == "options" {
					continue
				}
				return nil, errf(31022+int32(i), "%s requires '%s' parameter", name, k)
			}
			if fns[i], err = c.compile(spec); err != nil {
				return nil, err
			}
		}
		return func(ctx *evalCtx) (any, error) {
			var vals [3]any
			for i, f := range fns {
				if f == nil {
					vals[i] = missing
					continue
				}
				v, err := f(ctx)
				if err != nil {
					return nil, err
				}
				vals[i] = v
			}
			nothing := func() any {
				switch name {
				case "$regexMatch":
					return false
				case "$regexFind":
					return nil
				}
				return bson.A{}
			}
			var pattern, options string
			switch r := vals[1].(type) {
			case nil, missingT:
				return nothing(), nil
			case string:
				pattern = r
			case bson.Regex:
				pattern, options = r.Pattern, r.Options
			default:
				return nil, errf(51105, "%s needs 'regex' to be of type string or regex", name)
			}
			if o, ok := vals[2].(string); ok {
				if options != "" && o != "" {
					return nil, errf(51107, "%s found regex option(s) specified in both 'regex' and 'option' fields", name)
				}
				options += o
			} else if !isNullish(vals[2]) {
				return nil, errf(51106, "%s needs 'options' to be of type string", name)
			}
			if isNullish(vals[0]) {
				return nothing(), nil
			}
			in, ok := vals[0].(string)
			if !ok {
				return nil, errf(51104, "%s needs 'input' to be of type string", name)
			}
			re, err := compileRegex(pattern, options)
			if err != nil {
				return nil, err
			}
			switch name {
			case "$regexMatch":
				return re.MatchString(in), nil
			case "$regexFind":
				loc := re.FindStringSubmatchIndex(in)
				if loc == nil {
					return nil, nil
				}
				return regexResult(in, loc), nil
			}
			out := bson.A{}
			for _, loc := range re.FindAllStringSubmatchIndex(in, -1) {
				out = append(out, regexResult(in, loc))
			}
			return out, nil
		}, nil
	}
}

func regexResult(in string, loc []int) bson.D {
	caps := bson.A{}
	for i := 2; i+1 < len(loc); i += 2 {
		if loc[i] < 0 {
			caps = append(caps, nil)
			continue
		}
		caps = append(caps, in[loc[i]:loc[i+1]])
	}
	return bson.D{
		{Key: "match", Value: in[loc[0]:loc[1]]},
		{Key: "idx", Value: int32(utf8.RuneCountInString(in[:loc[0]]))},
		{Key: "captures", Value: caps},
	}
}

func compileReplace(name string, all bool) opCompiler {
	return func(c *compiler, _ string, arg any) (exprFn, error) {
		m, err := namedArgs(arg, []string{"input", "find", "replacement"}, 51238, name+" found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(51751, "%s requires an object as an argument, found: %s", name, typeName(arg))
		}
		var fns [3]exprFn
		for i, k := range []string{"input", "find", "replacement"} {
			spec, ok := m[k]
			if !ok {
				return nil, errf(51237, "%s requires '%s' to be specified", name, k)
			}
			if fns[i], err = c.compile(spec); err != nil {
				return nil, err
			}
		}
		return func(ctx *evalCtx) (any, error) {
			var s [3]string
			null := false
			for i, f := range fns {
				v, err := f(ctx)
				if err != nil {
					return nil, err
				}
				if isNullish(v) {
					null = true
					continue
				}
				str, ok := v.(string)
				if !ok {
					return nil, errf(51746, "%s requires that '%s' be a string, found: %s", name, []string{"input", "find", "replacement"}[i], describe(v))
				}
				s[i] = str
			}
			if null {
				return nil, nil
			}
			if all {
				return strings.ReplaceAll(s[0], s[1], s[2]), nil
			}
			return strings.Replace(s[0], s[1], s[2], 1), nil
		}, nil
	}
}

func opSlice(a []any) (any, error) {
	if isNullish(a[0]) {
		return nil, nil
	}
	arr, ok := a[0].(bson.A)
	if !ok {
		return nil, errf(28724, "First argument to $slice must be an array, but is of type: %s", typeName(a[0]))
	}
	for _, x := range a[1:] {
		if isNullish(x) {
			return nil, nil
		}
	}
	n := int64(len(arr))
	if len(a) == 2 {
		k, ok := exactInt(a[1])
		if !ok {
			return nil, errf(28725, "Second argument to $slice must be a numeric value, but is of type: %s", typeName(a[1]))
		}
		if k >= 0 {
			if k > n {
				k = n
			}
			return append(bson.A{}, arr[:k]...), nil
		}
		if -k > n {
			k = -n
		}
		return append(bson.A{}, arr[n+k:]...), nil
	}
	pos, ok := exactInt(a[1])
	if !ok {
		return nil, errf(28725, "Second argument to $slice must be a numeric value, but is of type: %s", typeName(a[1]))
	}
	k, ok := exactInt(a[2])
	if !ok {
		return nil, errf(28726, "Third argument to $slice must be numeric, but is of type: %s", typeName(a[2]))
	}
	if k <= 0 {
		return nil, errf(28729, "Third argument to $slice must be positive: %s", describe(a[2]))
	}
	if pos < 0 {
		pos += n
		if pos < 0 {
			pos = 0
		}
	}
	if pos > n {
		pos = n
	}
	end := pos + k
	if end > n {
		end = n
	}
	return append(bson.A{}, arr[pos:end]...), nil
}

func opIndexOfArray(a []any) (any, error) {
	if isNullish(a[0]) {
		return nil, nil
	}
	arr, ok := a[0].(bson.A)
	if !ok {
		return nil, errf(40090, "$indexOfArray requires an array as a first argument, found: %s", typeName(a[0]))
	}
	start, end := int64(0), int64(len(arr))
	if len(a) > 2 {
		n, ok := exactInt(a[2])
		if !ok || n < 0 {
			return nil, errf(40097, "$indexOfArray requires a nonnegative integral starting index")
		}
		start = n
	}
	if len(a) > 3 {
		n, ok := exactInt(a[3])
		if !ok || n < 0 {
			return nil, errf(40097, "$indexOfArray requires a nonnegative integral ending index")
		}
		if n < end {
			end = n
		}
	}
	for i := start; i < end; i++ {
		if Compare(arr[i], a[1]) == 0 {
			return int32(i), nil
		}
	}
	return int32(-1), nil
}

func opRange(a []any) (any, error) {
	get := func(i int, what string, code int32) (int64, error) {
		n, ok := exactInt(a[i])
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return 0, errf(code, "$range requires a %s that can be represented as a 32-bit integer, found value: %s", what, describe(a[i]))
		}
		return n, nil
	}
	start, err := get(0, "starting value", 34444)
	if err != nil {
		return nil, err
	}
	end, err := get(1, "ending value", 34446)
	if err != nil {
		return nil, err
	}
	step := int64(1)
	if len(a) > 2 {
		if step, err = get(2, "step value", 34448); err != nil {
			return nil, err
		}
		if step == 0 {
			return nil, errf(34449, "$range requires a non-zero step value")
		}
	}
	if n := (end - start) / step; n > 1<<22 {
		return nil, errf(5156200, "$range would use too much memory (%d bytes) and cannot spill to disk. Memory limit: 67108864 bytes", n*16)
	}
	out := bson.A{}
	for i := start; (step > 0 && i < end) || (step < 0 && i > end); i += step {
		out = append(out, int32(i))
	}
	return out, nil
}

func setOp(name string) evalFunc {
	return func(a []any) (any, error) {
		sets := make([]bson.A, len(a))
		for i, v := range a {
			if isNullish(v) {
				switch name {
				case "$setUnion", "$setIntersection", "$setDifference":
					return nil, nil
				}
			}
			arr, ok := v.(bson.A)
			if !ok {
				switch name {
				case "$setEquals":
					return nil, errf(17044, "All operands of $setEquals must be arrays. One argument is of type: %s", typeName(v))
				case "$setIsSubset":
					if i == 0 {
						return nil, errf(17310, "both operands of $setIsSubset must be arrays. First argument is of type: %s", typeName(v))
					}
					return nil, errf(17042, "both operands of $setIsSubset must be arrays. Second argument is of type: %s", typeName(v))
				case "$setDifference":
					return nil, errf(17048, "both operands of $setDifference must be arrays. First argument is of type: %s", typeName(v))
				}
				return nil, errf(17043, "All operands of %s must be arrays. One argument is of type: %s", name, typeName(v))
			}
			sets[i] = arr
		}
		has := func(s bson.A, x any) bool {
			for _, y := range s {
				if Compare(x, y) == 0 {
					return true
				}
			}
			return false
		}
		dedup := func(s bson.A) bson.A {
			out := bson.A{}
			for _, x := range s {
				if !has(out, x) {
					out = append(out, x)
				}
			}
			return out
		}
		switch name {
		case "$setUnion":
			all := bson.A{}
			for _, s := range sets {
				all = append(all, s...)
			}
			return sortedSet(dedup(all)), nil
		case "$setIntersection":
			if len(sets) == 0 {
				return bson.A{}, nil
			}
			out := bson.A{}
			for _, x := range dedup(sets[0]) {
				in := true
				for _, s := range sets[1:] {
					if !has(s, x) {
						in = false
						break
					}
				}
				if in {
					out = append(out, x)
				}
			}
			return sortedSet(out), nil
		case "$setDifference":
			out := bson.A{}
			for _, x := range dedup(sets[0]) {
				if !has(sets[1], x) {
					out = append(out, x)
				}
			}
			return out, nil
		case "$setEquals":
			first := sets[0]
			for _, s := range sets[1:] {
				for _, x := range first {
					if !has(s, x) {
						return false, nil
					}
				}
				for _, x := range s {
					if !has(first, x) {
						return false, nil
					}
				}
			}
			return true, nil
		}
		for _, x := range sets[0] { // $setIsSubset
			if !has(sets[1], x) {
				return false, nil
			}
		}
		return true, nil
	}
}

// sortedSet orders a set result deterministically (the server's order is
// unspecified; sorted output keeps tests stable).
func sortedSet(a bson.A) bson.A {
	sort.SliceStable(a, func(i, j int) bool { return Compare(a[i], a[j]) < 0 })
	return a
}

func elementsTrue(name string, anyTrue bool) evalFunc {
	return func(a []any) (any, error) {
		arr, ok := a[0].(bson.A)
		if !ok {
			return nil, errf(17041, "%s's argument must be an array, but is %s", name, typeName(a[0]))
		}
		for _, e := range arr {
			if Truthy(e) == anyTrue {
				return anyTrue, nil
			}
		}
		return !anyTrue, nil
	}
}

func compileSortArray(c *compiler, name string, arg any) (exprFn, error) {
	m, err := namedArgs(arg, []string{"input", "sortBy"}, 2942501, "$sortArray found an unknown argument: ")
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errf(2942500, "$sortArray requires an object as an argument, found: %s", typeName(arg))
	}
	inSpec, ok := m["input"]
	if !ok {
		return nil, errf(2942502, "$sortArray requires 'input' to be specified")
	}
	by, ok := m["sortBy"]
	if !ok {
		return nil, errf(2942503, "$sortArray requires 'sortBy' to be specified")
	}
	input, err := c.compile(inSpec)
	if err != nil {
		return nil, err
	}
	whole := 0
	var keys []sortKeyA
	switch b := by.(type) {
	case bson.D:
		if len(b) == 0 {
			return nil, errf(15976, "$sortArray sort pattern must not be empty")
		}
		for _, e := range b {
			n, ok := exactInt(normalize(e.Value))
			if !ok || (n != 1 && n != -1) {
				return nil, errf(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
			}
			keys = append(keys, sortKeyA{parts: splitPath(e.Key), dir: int(n)})
		}
	default:
		n, ok := exactInt(b)
		if !ok || (n != 1 && n != -1) {
			return nil, errf(2942504, "$sortArray requires sortBy to be either 1, -1, or an object")
		}
		whole = int(n)
	}
	return func(ctx *evalCtx) (any, error) {
		v, err := input(ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(v) {
			return nil, nil
		}
		arr, ok := v.(bson.A)
		if !ok {
			return nil, errf(2942504, "$sortArray requires an array as input, found: %s", typeName(v))
		}
		out := append(bson.A{}, arr...)
		sort.SliceStable(out, func(i, j int) bool {
			if whole != 0 {
				return Compare(out[i], out[j])*whole < 0
			}
			for _, k := range keys {
				c := Compare(sortFieldA(out[i], k.parts), sortFieldA(out[j], k.parts)) * k.dir
				if c != 0 {
					return c < 0
				}
			}
			return false
		})
		return out, nil
	}, nil
}

type sortKeyA struct {
	parts []string
	dir   int
}

// sortFieldA extracts a sort key for $sortArray (missing sorts as null).
func sortFieldA(v any, parts []string) any {
	r := evalPath(v, parts)
	if IsMissing(r) {
		return nil
	}
	return r
}

func compileFirstLastN(name string, first bool) opCompiler {
	return func(c *compiler, _ string, arg any) (exprFn, error) {
		m, err := namedArgs(arg, []string{"n", "input"}, 5787901, name+" found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(5787801, "%s only supports an object as its argument", name)
		}
		nSpec, ok1 := m["n"]
		inSpec, ok2 := m["input"]
		if !ok1 || !ok2 {
			return nil, errf(5787906, "%s requires 'n' and 'input' to be specified", name)
		}
		nf, err := c.compile(nSpec)
		if err != nil {
			return nil, err
		}
		inf, err := c.compile(inSpec)
		if err != nil {
			return nil, err
		}
		return func(ctx *evalCtx) (any, error) {
			nv, err := nf(ctx)
			if err != nil {
				return nil, err
			}
			n, ok := exactInt(nv)
			if !ok || n <= 0 {
				return nil, errf(5787908, "%s requires 'n' to be a positive integer, found: %s", name, describe(nv))
			}
			v, err := inf(ctx)
			if err != nil {
				return nil, err
			}
			arr, ok := v.(bson.A)
			if !ok {
				return nil, errf(5788200, "%s requires 'input' to be an array, found: %s", name, typeName(v))
			}
			if n > int64(len(arr)) {
				n = int64(len(arr))
			}
			if first {
				return append(bson.A{}, arr[:n]...), nil
			}
			return append(bson.A{}, arr[int64(len(arr))-n:]...), nil
		}, nil
	}
}

func compileSetField(name string, unset bool) opCompiler {
	return func(c *compiler, _ string, arg any) (exprFn, error) {
		allowed := []string{"field", "input", "value"}
		if unset {
			allowed = allowed[:2]
		}
		m, err := namedArgs(arg, allowed, 4161100, name+" found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(4161101, "%s only supports an object as its argument", name)
		}
		fv, ok := m["field"]
		if !ok {
			return nil, errf(4161102, "%s requires 'field' to be specified", name)
		}
		// A name starting with "$" must be a $literal (a bare one is a
		// field path); a literal one may name any field.
		literal := false
		if d, isDoc := fv.(bson.D); isDoc && len(d) == 1 && d[0].Key == "$literal" {
			fv, literal = normalize(d[0].Value), true
		}
		field, ok := fv.(string)
		if !ok || !literal && strings.HasPrefix(field, "$") {
			return nil, errf(4161106, "%s requires 'field' to evaluate to a constant string", name)
		}
		inSpec, ok := m["input"]
		if !ok {
			return nil, errf(4161103, "%s requires 'input' to be specified", name)
		}
		input, err := c.compile(inSpec)
		if err != nil {
			return nil, err
		}
		var value exprFn
		if !unset {
			vs, ok := m["value"]
			if !ok {
				return nil, errf(4161104, "$setField requires 'value' to be specified")
			}
			if value, err = c.compile(vs); err != nil {
				return nil, err
			}
		}
		return func(ctx *evalCtx) (any, error) {
			in, err := input(ctx)
			if err != nil {
				return nil, err
			}
			if isNullish(in) {
				return nil, nil
			}
			d, ok := in.(bson.D)
			if !ok {
				return nil, errf(4161105, "%s requires 'input' to evaluate to type Object", name)
			}
			var v any = missing
			if value != nil {
				if v, err = value(ctx); err != nil {
					return nil, err
				}
			}
			out := make(bson.D, 0, len(d)+1)
			replaced := false
			for _, e := range d {
				if e.Key == field {
					if !IsMissing(v) && !replaced {
						out = append(out, bson.E{Key: field, Value: v})
						replaced = true
					}
					continue
				}
				out = append(out, e)
			}
			if !replaced && !IsMissing(v) {
				out = append(out, bson.E{Key: field, Value: v})
			}
			return out, nil
		}, nil
	}
}
