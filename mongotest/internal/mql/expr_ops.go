package mql

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// evalFunc is the body of an operator whose arguments are evaluated first;
// missing arguments stay missing (use IsMissing / isNullish).
type evalFunc func(args []any) (any, error)

// fixed registers an operator taking between minArgs and maxArgs arguments
// (maxArgs < 0: unbounded) that are evaluated before fn runs.
func fixed(name string, minArgs, maxArgs int, fn evalFunc) {
	registerInternal(name, func(c *compiler, name string, arg any) (exprFn, error) {
		args, err := c.compileArgs(name, arg, minArgs, maxArgs)
		if err != nil {
			return nil, err
		}
		if len(args) == 1 {
			a0 := args[0]
			return func(ctx *evalCtx) (any, error) {
				v, err := a0(ctx)
				if err != nil {
					return nil, err
				}
				return fn([]any{v})
			}, nil
		}
		return func(ctx *evalCtx) (any, error) {
			vals, err := evalArgs(ctx, args)
			if err != nil {
				return nil, err
			}
			return fn(vals)
		}, nil
	})
}

func init() {
	// comparison
	for _, op := range []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$cmp"} {
		op := op
		fixedCtx(op, 2, 2, func(ctx *evalCtx, a []any) (any, error) {
			c := CompareCollated(a[0], a[1], collationOf(ctx.vars))
			switch op {
			case "$eq":
				return c == 0, nil
			case "$ne":
				return c != 0, nil
			case "$gt":
				return c > 0, nil
			case "$gte":
				return c >= 0, nil
			case "$lt":
				return c < 0, nil
			case "$lte":
				return c <= 0, nil
			}
			return int32(c), nil
		})
	}
	registerInternal("$and", compileAndOr(true))
	registerInternal("$or", compileAndOr(false))
	fixed("$not", 1, 1, func(a []any) (any, error) { return !Truthy(a[0]), nil })
	fixedCtx("$in", 2, 2, func(ctx *evalCtx, a []any) (any, error) {
		arr, ok := a[1].(bson.A)
		if !ok {
			return nil, errf(40081, "$in requires an array as a second argument, found: %s", typeName(a[1]))
		}
		coll := collationOf(ctx.vars)
		for _, e := range arr {
			if CompareCollated(a[0], e, coll) == 0 {
				return true, nil
			}
		}
		return false, nil
	})
	registerInternal("$literal", func(_ *compiler, _ string, arg any) (exprFn, error) {
		return constFn(arg), nil
	})
	registerInternal("$cond", compileCond)
	registerInternal("$switch", compileSwitch)
	registerInternal("$ifNull", compileIfNull)
	registerInternal("$let", compileLet)
	registerInternal("$map", compileMap)
	registerInternal("$filter", compileFilterOp)
	registerInternal("$reduce", compileReduce)
	registerInternal("$getField", compileGetField)

	// arithmetic
	fixed("$add", 0, -1, opAdd)
	fixed("$subtract", 2, 2, opSubtract)
	fixed("$multiply", 0, -1, opMultiply)
	fixed("$divide", 2, 2, opDivide)
	fixed("$mod", 2, 2, opMod)
	fixed("$abs", 1, 1, opAbs)
	fixed("$ceil", 1, 1, roundingOp("$ceil", math.Ceil))
	fixed("$floor", 1, 1, roundingOp("$floor", math.Floor))
	fixed("$max", 1, -1, minMaxOp(1))
	fixed("$min", 1, -1, minMaxOp(-1))
	fixed("$sum", 1, -1, sumAvgOp(false))
	fixed("$avg", 1, -1, sumAvgOp(true))

	// strings
	fixed("$concat", 0, -1, opConcat)
	fixed("$toString", 1, 1, func(a []any) (any, error) { return toStringValue(a[0], "$toString") })
	fixed("$toLower", 1, 1, caseOp(strings.ToLower))
	fixed("$toUpper", 1, 1, caseOp(strings.ToUpper))
	fixed("$strLenBytes", 1, 1, func(a []any) (any, error) {
		s, ok := a[0].(string)
		if !ok {
			return nil, errf(34473, "$strLenBytes requires a string argument, found: %s", typeName(a[0]))
		}
		return int32(len(s)), nil
	})
	fixed("$split", 2, 2, opSplit)

	// types and conversion
	fixed("$type", 1, 1, func(a []any) (any, error) { return typeName(a[0]), nil })
	fixed("$isArray", 1, 1, func(a []any) (any, error) { _, ok := a[0].(bson.A); return ok, nil })
	fixed("$isNumber", 1, 1, func(a []any) (any, error) { return isNumber(a[0]), nil })
	fixed("$toBool", 1, 1, func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		return Truthy(a[0]), nil
	})
	fixed("$toInt", 1, 1, toIntOp("$toInt", true))
	fixed("$toLong", 1, 1, toIntOp("$toLong", false))
	fixed("$toDouble", 1, 1, opToDouble)

	// arrays and objects
	fixed("$size", 1, 1, func(a []any) (any, error) {
		arr, ok := a[0].(bson.A)
		if !ok {
			return nil, errf(17124, "The argument to $size must be an array. Type of argument: %s", typeName(a[0]))
		}
		return int32(len(arr)), nil
	})
	fixed("$arrayElemAt", 2, 2, opArrayElemAt)
	fixed("$first", 1, 1, firstLastOp("$first", true))
	fixed("$last", 1, 1, firstLastOp("$last", false))
	fixed("$concatArrays", 0, -1, opConcatArrays)
	fixed("$reverseArray", 1, 1, func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		arr, ok := a[0].(bson.A)
		if !ok {
			return nil, errf(34435, "The argument to $reverseArray must be an array, but was of type: %s", typeName(a[0]))
		}
		out := make(bson.A, len(arr))
		for i := range arr {
			out[len(arr)-1-i] = arr[i]
		}
		return out, nil
	})
	fixed("$mergeObjects", 0, -1, opMergeObjects)
	fixed("$objectToArray", 1, 1, opObjectToArray)
	fixed("$arrayToObject", 1, 1, opArrayToObject)

	// timestamps
	fixed("$tsSecond", 1, 1, func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		ts, ok := a[0].(bson.Timestamp)
		if !ok {
			return nil, errf(5687301, "$tsSecond argument must be a timestamp, but is %s", typeName(a[0]))
		}
		return int64(ts.T), nil
	})
	fixed("$tsIncrement", 1, 1, func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		ts, ok := a[0].(bson.Timestamp)
		if !ok {
			return nil, errf(5687302, "$tsIncrement argument must be a timestamp, but is %s", typeName(a[0]))
		}
		return int64(ts.I), nil
	})
}

func compileAndOr(isAnd bool) opCompiler {
	return func(c *compiler, name string, arg any) (exprFn, error) {
		args, err := c.compileArgs(name, arg, 0, -1)
		if err != nil {
			return nil, err
		}
		return func(ctx *evalCtx) (any, error) {
			for _, a := range args {
				v, err := a(ctx)
				if err != nil {
					return nil, err
				}
				if Truthy(v) != isAnd {
					return !isAnd, nil
				}
			}
			return isAnd, nil
		}, nil
	}
}

// namedArgs splits an operator's object argument into its named fields,
// rejecting unknown ones with the given code and message prefix.
func namedArgs(arg any, allowed []string, unknownCode int32, unknownMsg string) (map[string]any, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, nil
	}
	out := make(map[string]any, len(d))
	for _, e := range d {
		found := false
		for _, a := range allowed {
			if a == e.Key {
				found = true
				break
			}
		}
		if !found {
			return nil, errf(unknownCode, "%s%s", unknownMsg, e.Key)
		}
		out[e.Key] = normalize(e.Value)
	}
	return out, nil
}

func compileCond(c *compiler, name string, arg any) (exprFn, error) {
	var ifE, thenE, elseE any
	switch x := arg.(type) {
	case bson.D:
		m, err := namedArgs(x, []string{"if", "then", "else"}, 17083, "Unrecognized parameter to $cond: ")
		if err != nil {
			return nil, err
		}
		var ok bool
		if ifE, ok = m["if"]; !ok {
			return nil, errf(17080, "Missing 'if' parameter to $cond")
		}
		if thenE, ok = m["then"]; !ok {
			return nil, errf(17081, "Missing 'then' parameter to $cond")
		}
		if elseE, ok = m["else"]; !ok {
			return nil, errf(17082, "Missing 'else' parameter to $cond")
		}
	default:
		arr, ok := x.(bson.A)
		if !ok || len(arr) != 3 {
			n := 1
			if ok {
				n = len(arr)
			}
			return nil, errf(16020, "Expression $cond takes exactly 3 arguments. %d were passed in.", n)
		}
		ifE, thenE, elseE = arr[0], arr[1], arr[2]
	}
	fi, err := c.compile(normalize(ifE))
	if err != nil {
		return nil, err
	}
	ft, err := c.compile(normalize(thenE))
	if err != nil {
		return nil, err
	}
	fe, err := c.compile(normalize(elseE))
	if err != nil {
		return nil, err
	}
	return func(ctx *evalCtx) (any, error) {
		v, err := fi(ctx)
		if err != nil {
			return nil, err
		}
		if Truthy(v) {
			return ft(ctx)
		}
		return fe(ctx)
	}, nil
}

func compileSwitch(c *compiler, name string, arg any) (exprFn, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, errf(40060, "$switch requires an object as an argument, found: %s", typeName(arg))
	}
	type branch struct{ cond, then exprFn }
	var branches []branch
	var def exprFn
	for _, e := range d {
		switch e.Key {
		case "branches":
			arr, ok := normalize(e.Value).(bson.A)
			if !ok {
				return nil, errf(40061, "$switch expected an array for 'branches', found: %s", typeName(e.Value))
			}
			for _, b := range arr {
				bd, ok := normalize(b).(bson.D)
				if !ok {
					return nil, errf(40062, "$switch expected each branch to be an object, found: %s", typeName(b))
				}
				var br branch
				for _, f := range bd {
					fn, err := c.compile(normalize(f.Value))
					if err != nil {
						return nil, err
					}
					switch f.Key {
					case "case":
						br.cond = fn
					case "then":
						br.then = fn
					default:
						return nil, errf(40063, "$switch found an unknown argument to a branch: %s", f.Key)
					}
				}
				if br.cond == nil {
					return nil, errf(40064, "$switch requires each branch have a 'case' expression")
				}
				if br.then == nil {
					return nil, errf(40065, "$switch requires each branch have a 'then' expression.")
				}
				branches = append(branches, br)
			}
		case "default":
			fn, err := c.compile(normalize(e.Value))
			if err != nil {
				return nil, err
			}
			def = fn
		default:
			return nil, errf(40067, "$switch found an unknown argument: %s", e.Key)
		}
	}
	if len(branches) == 0 {
		return nil, errf(40068, "$switch requires at least one branch.")
	}
	return func(ctx *evalCtx) (any, error) {
		for _, b := range branches {
			v, err := b.cond(ctx)
			if err != nil {
				return nil, err
			}
			if Truthy(v) {
				return b.then(ctx)
			}
		}
		if def == nil {
			return nil, errf(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return def(ctx)
	}, nil
}

func compileIfNull(c *compiler, name string, arg any) (exprFn, error) {
	arr, _ := arg.(bson.A)
	if len(arr) < 2 {
		return nil, errf(1257300, "$ifNull needs at least two arguments, had: %d", len(arr))
	}
	args, err := c.compileArgs(name, arg, 2, -1)
	if err != nil {
		return nil, err
	}
	return func(ctx *evalCtx) (any, error) {
		for i, a := range args {
			v, err := a(ctx)
			if err != nil {
				return nil, err
			}
			if !isNullish(v) || i == len(args)-1 {
				return v, nil
			}
		}
		return nil, nil
	}, nil
}

// validateVarName checks a user variable name.
func validateVarName(name string) error {
	if name == "" {
		return errf(16866, "empty variable names are not allowed")
	}
	r := name[0]
	if !(r >= 'a' && r <= 'z') && r < 0x80 {
		return errf(16867, "'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch >= 0x80) {
			return errf(16868, "'%s' contains an invalid character for a variable name: '%c'", name, ch)
		}
	}
	return nil
}

func compileLet(c *compiler, name string, arg any) (exprFn, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, errf(16874, "$let only supports an object as its argument")
	}
	var varsSpec bson.D
	var inSpec any
	haveVars, haveIn := false, false
	for _, e := range d {
		switch e.Key {
		case "vars":
			vs, ok := normalize(e.Value).(bson.D)
			if !ok {
				return nil, errf(10065, "invalid parameter: expected an object (vars)")
			}
			varsSpec, haveVars = vs, true
		case "in":
			inSpec, haveIn = normalize(e.Value), true
		default:
			return nil, errf(16875, "Unrecognized parameter to $let: %s", e.Key)
		}
	}
	if !haveVars {
		return nil, errf(16876, "Missing 'vars' parameter to $let")
	}
	if !haveIn {
		return nil, errf(16877, "Missing 'in' parameter to $let")
	}
	names := make([]string, len(varsSpec))
	valFns := make([]exprFn, len(varsSpec))
	for i, e := range varsSpec {
		if e.Key != "CURRENT" { // CURRENT may be rebound by $let
			if err := validateVarName(e.Key); err != nil {
				return nil, err
			}
		}
		names[i] = e.Key
		fn, err := c.compile(normalize(e.Value)) // evaluated in the outer scope
		if err != nil {
			return nil, err
		}
		valFns[i] = fn
	}
	inner, ids := c.bind(names...)
	body, err := inner.compile(inSpec)
	if err != nil {
		return nil, err
	}
	return func(ctx *evalCtx) (any, error) {
		nctx := ctx
		var newCurrent any
		rebind := false
		for i, f := range valFns {
			v, err := f(ctx)
			if err != nil {
				return nil, err
			}
			if names[i] == "CURRENT" {
				newCurrent, rebind = v, true
				continue
			}
			nctx = nctx.with(ids[i], v)
		}
		if rebind {
			if nctx == ctx {
				cp := *ctx
				nctx = &cp
			}
			nctx.current = newCurrent
		}
		return body(nctx)
	}, nil
}

// compileIter handles the common shape of $map / $filter: input, as, and
// one body expression bound to the element variable.
func compileIter(c *compiler, name string, arg any, bodyKey string, extra []string) (input exprFn, id int, body exprFn, extras map[string]exprFn, err error) {
	allowed := append([]string{"input", "as", bodyKey}, extra...)
	m, err := namedArgs(arg, allowed, 16879, "Unrecognized parameter to "+name+": ")
	if err != nil {
		return nil, 0, nil, nil, err
	}
	if m == nil {
		return nil, 0, nil, nil, errf(16878, "%s only supports an object as its argument", name)
	}
	inSpec, ok := m["input"]
	if !ok {
		return nil, 0, nil, nil, errf(16880, "Missing 'input' parameter to %s", name)
	}
	bodySpec, ok := m[bodyKey]
	if !ok {
		return nil, 0, nil, nil, errf(16882, "Missing '%s' parameter to %s", bodyKey, name)
	}
	as := "this"
	if a, ok := m["as"]; ok {
		s, isStr := a.(string)
		if !isStr {
			return nil, 0, nil, nil, errf(16866, "empty variable names are not allowed")
		}
		as = s
	}
	if err := validateVarName(as); err != nil {
		return nil, 0, nil, nil, err
	}
	input, err = c.compile(inSpec)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	inner, ids := c.bind(as)
	body, err = inner.compile(bodySpec)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	extras = map[string]exprFn{}
	for _, k := range extra {
		if v, ok := m[k]; ok {
			f, err := c.compile(v)
			if err != nil {
				return nil, 0, nil, nil, err
			}
			extras[k] = f
		}
	}
	return input, ids[0], body, extras, nil
}

func compileMap(c *compiler, name string, arg any) (exprFn, error) {
	input, id, body, _, err := compileIter(c, name, arg, "in", nil)
	if err != nil {
		return nil, err
	}
	return func(ctx *evalCtx) (any, error) {
		in, err := input(ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(in) {
			return nil, nil
		}
		arr, ok := in.(bson.A)
		if !ok {
			return nil, errf(16883, "input to $map must be an array not %s", typeName(in))
		}
		out := make(bson.A, len(arr))
		for i, e := range arr {
			v, err := body(ctx.with(id, shallow(e)))
			if err != nil {
				return nil, err
			}
			if IsMissing(v) {
				v = nil
			}
			out[i] = v
		}
		return out, nil
	}, nil
}

func compileFilterOp(c *compiler, name string, arg any) (exprFn, error) {
	input, id, cond, extras, err := compileIter(c, name, arg, "cond", []string{"limit"})
	if err != nil {
		return nil, err
	}
	limitFn := extras["limit"]
	return func(ctx *evalCtx) (any, error) {
		in, err := input(ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(in) {
			return nil, nil
		}
		arr, ok := in.(bson.A)
		if !ok {
			return nil, errf(28651, "input to $filter must be an array not %s", typeName(in))
		}
		limit := int64(-1)
		if limitFn != nil {
			lv, err := limitFn(ctx)
			if err != nil {
				return nil, err
			}
			if !isNullish(lv) {
				n, ok := exactInt(lv)
				if !ok || n < 1 || n > math.MaxInt32 {
					return nil, errf(327391, "$filter: limit must be greater than 0: %s", describe(lv))
				}
				limit = n
			}
		}
		out := bson.A{}
		for _, e := range arr {
			if limit >= 0 && int64(len(out)) >= limit {
				break
			}
			v, err := cond(ctx.with(id, shallow(e)))
			if err != nil {
				return nil, err
			}
			if Truthy(v) {
				out = append(out, e)
			}
		}
		return out, nil
	}, nil
}

func compileReduce(c *compiler, name string, arg any) (exprFn, error) {
	m, err := namedArgs(arg, []string{"input", "initialValue", "in"}, 40076, "$reduce found an unknown argument: ")
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errf(40075, "$reduce requires an object as an argument, found: %s", typeName(arg))
	}
	for _, k := range []string{"input", "initialValue", "in"} {
		if _, ok := m[k]; !ok {
			return nil, errf(40077+int32(map[string]int{"input": 0, "initialValue": 2, "in": 1}[k]), "$reduce requires '%s' to be specified", k)
		}
	}
	input, err := c.compile(m["input"])
	if err != nil {
		return nil, err
	}
	initial, err := c.compile(m["initialValue"])
	if err != nil {
		return nil, err
	}
	inner, ids := c.bind("this", "value")
	body, err := inner.compile(m["in"])
	if err != nil {
		return nil, err
	}
	return func(ctx *evalCtx) (any, error) {
		in, err := input(ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(in) {
			return nil, nil
		}
		arr, ok := in.(bson.A)
		if !ok {
			return nil, errf(40080, "$reduce requires that 'input' be an array, found: %s", describe(in))
		}
		acc, err := initial(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range arr {
			acc, err = body(ctx.with(ids[0], shallow(e)).with(ids[1], acc))
			if err != nil {
				return nil, err
			}
		}
		return acc, nil
	}, nil
}

func compileGetField(c *compiler, name string, arg any) (exprFn, error) {
	var field string
	var input exprFn
	switch x := arg.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return nil, errf(5654602, "$getField requires 'field' to evaluate to a constant, but got a non-constant argument")
		}
		field = x
	case bson.D:
		if len(x) > 0 && strings.HasPrefix(x[0].Key, "$") {
			// {$getField: {$literal: "a"}} style: a constant expression
			f, err := c.compile(x)
			if err != nil {
				return nil, err
			}
			v, err := f(newEvalCtx(nil, nil))
			s, ok := v.(string)
			if err != nil || !ok {
				return nil, errf(5654602, "$getField requires 'field' to evaluate to a constant, but got a non-constant argument")
			}
			field = s
			break
		}
		m, err := namedArgs(x, []string{"field", "input"}, 3041701, "$getField found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		fv, ok := m["field"]
		if !ok {
			return nil, errf(3041702, "$getField requires 'field' to be specified")
		}
		if d, isDoc := fv.(bson.D); isDoc && len(d) == 1 && d[0].Key == "$literal" {
			fv = normalize(d[0].Value)
		}
		s, ok := fv.(string)
		if !ok {
			return nil, errf(5654601, "$getField requires 'field' to evaluate to type String, but got %s", typeName(fv))
		}
		if strings.HasPrefix(s, "$") {
			return nil, errf(5654602, "$getField requires 'field' to evaluate to a constant, but got a non-constant argument")
		}
		field = s
		if in, ok := m["input"]; ok {
			f, err := c.compile(in)
			if err != nil {
				return nil, err
			}
			input = f
		} else {
			return nil, errf(3041703, "$getField requires 'input' to be specified")
		}
	default:
		return nil, errf(5654601, "$getField requires 'field' to evaluate to type String, but got %s", typeName(arg))
	}
	return func(ctx *evalCtx) (any, error) {
		var in any = ctx.current
		if input != nil {
			v, err := input(ctx)
			if err != nil {
				return nil, err
			}
			in = v
		}
		if IsMissing(in) {
			return missing, nil
		}
		d, ok := in.(bson.D)
		if !ok {
			if isNullish(in) {
				return nil, nil
			}
			return nil, errf(3041705, "$getField requires 'input' to evaluate to type Object, but got %s", typeName(in))
		}
		v, ok := getField(d, field)
		if !ok {
			return missing, nil
		}
		return shallow(v), nil
	}, nil
}

// arithmetic ------------------------------------------------------------------

func opAdd(a []any) (any, error) {
	var acc any = int32(0)
	var date *bson.DateTime
	for _, v := range a {
		switch x := v.(type) {
		case nil, missingT, bson.Undefined:
			return nil, nil
		case bson.DateTime:
			if date != nil {
				return nil, errf(16612, "only one date allowed in an $add expression")
			}
			d := x
			date = &d
		default:
			if !isNumber(v) {
				return nil, errf(16554, "$add only supports numeric or date types, not %s", typeName(v))
			}
			acc = arith('+', acc, v)
		}
	}
	if date != nil {
		ms, err := roundToMillis(acc)
		if err != nil {
			return nil, err
		}
		return bson.DateTime(int64(*date) + ms), nil
	}
	return acc, nil
}

func roundToMillis(v any) (int64, error) {
	switch x := v.(type) {
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	}
	f, _ := toFloat(v)
	if math.IsNaN(f) || math.IsInf(f, 0) || f >= 9.2e18 || f <= -9.2e18 {
		return 0, errf(mongoerr.CodeOverflow, "date overflow in $add")
	}
	return int64(math.RoundToEven(f)), nil
}

func opSubtract(a []any) (any, error) {
	x, y := a[0], a[1]
	if isNullish(x) || isNullish(y) {
		return nil, nil
	}
	if dx, ok := x.(bson.DateTime); ok {
		switch yy := y.(type) {
		case bson.DateTime:
			return int64(dx) - int64(yy), nil
		default:
			if isNumber(y) {
				ms, err := roundToMillis(y)
				if err != nil {
					return nil, err
				}
				return bson.DateTime(int64(dx) - ms), nil
			}
		}
	}
	if isNumber(x) && isNumber(y) {
		return arith('-', x, y), nil
	}
	return nil, errf(16556, "can't $subtract %s from %s", typeName(y), typeName(x))
}

func opMultiply(a []any) (any, error) {
	var acc any = int32(1)
	for _, v := range a {
		if isNullish(v) {
			return nil, nil
		}
		if !isNumber(v) {
			return nil, errf(16555, "$multiply only supports numeric types, not %s", typeName(v))
		}
		acc = arith('*', acc, v)
	}
	return acc, nil
}

func opDivide(a []any) (any, error) {
	x, y := a[0], a[1]
	if isNullish(x) || isNullish(y) {
		return nil, nil
	}
	if !isNumber(x) || !isNumber(y) {
		return nil, errf(16609, "$divide only supports numeric types, not %s and %s", typeName(x), typeName(y))
	}
	nx, _ := toNum(x)
	ny, _ := toNum(y)
	if nx.kind == kDecimal || ny.kind == kDecimal {
		ex, ey := exactOf(nx), exactOf(ny)
		if ey.r != nil && ey.r.Sign() == 0 {
			return nil, errf(16608, "can't $divide by zero")
		}
		if ex.r == nil || ey.r == nil {
			return floatToDecimal(nx.float() / ny.float()), nil
		}
		return ratToDecimal(new(big.Rat).Quo(ex.r, ey.r)), nil
	}
	fy := ny.float()
	if fy == 0 {
		return nil, errf(16608, "can't $divide by zero")
	}
	return nx.float() / fy, nil
}

func opMod(a []any) (any, error) {
	x, y := a[0], a[1]
	if isNullish(x) || isNullish(y) {
		return nil, nil
	}
	if !isNumber(x) || !isNumber(y) {
		return nil, errf(16611, "$mod only supports numeric types, not %s and %s", typeName(x), typeName(y))
	}
	nx, _ := toNum(x)
	ny, _ := toNum(y)
	k := nx.kind
	if ny.kind > k {
		k = ny.kind
	}
	switch k {
	case kDecimal:
		ex, ey := exactOf(nx), exactOf(ny)
		if ey.r != nil && ey.r.Sign() == 0 {
			return nil, errf(16610, "can't $mod by zero")
		}
		if ex.r == nil || ey.r == nil {
			return floatToDecimal(math.Mod(nx.float(), ny.float())), nil
		}
		q := new(big.Rat).Quo(ex.r, ey.r)
		t := new(big.Int).Quo(q.Num(), q.Denom()) // truncated quotient
		r := new(big.Rat).Sub(ex.r, new(big.Rat).Mul(new(big.Rat).SetInt(t), ey.r))
		return ratToDecimal(r), nil
	case kDouble:
		fy := ny.float()
		if fy == 0 {
			return nil, errf(16610, "can't $mod by zero")
		}
		return math.Mod(nx.float(), fy), nil
	}
	if ny.i == 0 {
		return nil, errf(16610, "can't $mod by zero")
	}
	var r int64
	if ny.i != -1 {
		r = nx.i % ny.i
	}
	if k == kInt32 {
		return int32(r), nil
	}
	return r, nil
}

func opAbs(a []any) (any, error) {
	v := a[0]
	if isNullish(v) {
		return nil, nil
	}
	switch x := v.(type) {
	case int32:
		if x == math.MinInt32 {
			return -int64(x), nil
		}
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case int64:
		if x == math.MinInt64 {
			return nil, errf(28680, "can't take $abs of long long min")
		}
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	case bson.Decimal128:
		h, l := x.GetBytes()
		return bson.NewDecimal128(h&^(1<<63), l), nil
	}
	return nil, errf(28765, "$abs only supports numeric types, not %s", typeName(v))
}

func roundingOp(name string, f func(float64) float64) evalFunc {
	return func(a []any) (any, error) {
		v := a[0]
		if isNullish(v) {
			return nil, nil
		}
		switch x := v.(type) {
		case int32, int64:
			return x, nil
		case float64:
			return f(x), nil
		case bson.Decimal128:
			fl, _ := toFloat(x)
			return floatToDecimal(f(fl)), nil
		}
		return nil, errf(28765, "%s only supports numeric types, not %s", name, typeName(v))
	}
}

// minMaxOp implements the expression forms of $max/$min: with one array
// argument it looks inside the array; nulls and missing are ignored.
func minMaxOp(sign int) evalFunc {
	return func(a []any) (any, error) {
		vals := a
		if len(a) == 1 {
			if arr, ok := a[0].(bson.A); ok {
				vals = arr
			}
		}
		var best any = nil
		found := false
		for _, v := range vals {
			v = shallow(v)
			if isNullish(v) {
				continue
			}
			if !found || Compare(v, best)*sign > 0 {
				best, found = v, true
			}
		}
		return best, nil
	}
}

func sumAvgOp(avg bool) evalFunc {
	return func(a []any) (any, error) {
		vals := a
		if len(a) == 1 {
			if arr, ok := a[0].(bson.A); ok {
				vals = arr
			}
		}
		var acc any = int32(0)
		n := 0
		for _, v := range vals {
			v = shallow(v)
			if isNumber(v) {
				acc = arith('+', acc, v)
				n++
			}
		}
		if !avg {
			return acc, nil
		}
		if n == 0 {
			return nil, nil
		}
		if d, ok := acc.(bson.Decimal128); ok {
			return opDivide([]any{d, int32(n)})
		}
		f, _ := toFloat(acc)
		return f / float64(n), nil
	}
}

// strings ---------------------------------------------------------------------

func opConcat(a []any) (any, error) {
	var b strings.Builder
	for _, v := range a {
		switch x := v.(type) {
		case nil, missingT, bson.Undefined:
			return nil, nil
		case string:
			b.WriteString(x)
		default:
			return nil, errf(16702, "$concat only supports strings, not %s", typeName(v))
		}
	}
	return b.String(), nil
}

// toStringValue converts a value the way $toString / $convert to string do.
func toStringValue(v any, op string) (any, error) {
	switch x := v.(type) {
	case nil, missingT, bson.Undefined:
		return nil, nil
	case string:
		return x, nil
	case bson.Symbol:
		return string(x), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return formatDouble(x), nil
	case bson.Decimal128:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case bson.ObjectID:
		return x.Hex(), nil
	case bson.DateTime:
		return formatDate(x), nil
	}
	return nil, errf(mongoerr.CodeConversionFailure, "Unsupported conversion from %s to string in $convert with no onError value", typeName(v))
}

func caseOp(f func(string) string) evalFunc {
	return func(a []any) (any, error) {
		v := a[0]
		if isNullish(v) {
			return "", nil
		}
		s, err := toStringValue(v, "")
		if err != nil {
			return nil, errf(16007, "can't convert from BSON type %s to String", typeName(v))
		}
		return f(s.(string)), nil
	}
}

func opSplit(a []any) (any, error) {
	if isNullish(a[0]) {
		return nil, nil
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errf(40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", typeName(a[0]))
	}
	sep, ok := a[1].(string)
	if !ok {
		return nil, errf(40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", typeName(a[1]))
	}
	if sep == "" {
		return nil, errf(40087, "$split requires a non-empty separator")
	}
	parts := strings.Split(s, sep)
	out := make(bson.A, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// conversions -----------------------------------------------------------------

func toIntOp(name string, is32 bool) evalFunc {
	return func(a []any) (any, error) {
		v := a[0]
		if isNullish(v) {
			return nil, nil
		}
		var n int64
		switch x := v.(type) {
		case bool:
			if x {
				n = 1
			}
		case int32:
			n = int64(x)
		case int64:
			n = x
		case float64, bson.Decimal128:
			f, _ := toFloat(x)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, errf(mongoerr.CodeConversionFailure, "Attempt to convert NaN or infinity value to integer in $convert with no onError value")
			}
			t, ok := truncToInt64(x)
			if !ok {
				return nil, errf(mongoerr.CodeConversionFailure, "Conversion would overflow target type in $convert with no onError value")
			}
			n = t
		case string:
			p, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return nil, errf(mongoerr.CodeConversionFailure, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
			}
			n = p
		case bson.DateTime:
			if is32 {
				return nil, errf(mongoerr.CodeConversionFailure, "Unsupported conversion from date to int in $convert with no onError value")
			}
			n = int64(x)
		default:
			target := "long"
			if is32 {
				target = "int"
			}
			return nil, errf(mongoerr.CodeConversionFailure, "Unsupported conversion from %s to %s in $convert with no onError value", typeName(v), target)
		}
		if is32 {
			if n < math.MinInt32 || n > math.MaxInt32 {
				return nil, errf(mongoerr.CodeConversionFailure, "Conversion would overflow target type in $convert with no onError value")
			}
			return int32(n), nil
		}
		return n, nil
	}
}

func opToDouble(a []any) (any, error) {
	v := a[0]
	if isNullish(v) {
		return nil, nil
	}
	switch x := v.(type) {
	case bool:
		if x {
			return 1.0, nil
		}
		return 0.0, nil
	case int32, int64, float64, bson.Decimal128:
		f, _ := toFloat(x)
		return f, nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, errf(mongoerr.CodeConversionFailure, "Failed to parse number '%s' in $convert with no onError value", x)
		}
		return f, nil
	case bson.DateTime:
		return float64(x), nil
	}
	return nil, errf(mongoerr.CodeConversionFailure, "Unsupported conversion from %s to double in $convert with no onError value", typeName(v))
}

// arrays and objects ----------------------------------------------------------

func opArrayElemAt(a []any) (any, error) {
	if isNullish(a[0]) || isNullish(a[1]) {
		return nil, nil
	}
	arr, ok := a[0].(bson.A)
	if !ok {
		return nil, errf(28689, "$arrayElemAt's first argument must be an array, but is %s", typeName(a[0]))
	}
	if !isNumber(a[1]) {
		return nil, errf(28690, "$arrayElemAt's second argument must be a numeric value, but is %s", typeName(a[1]))
	}
	i, ok := exactInt(a[1])
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return nil, errf(28691, "$arrayElemAt's second argument must be representable as a 32-bit integer: %s", describe(a[1]))
	}
	if i < 0 {
		i += int64(len(arr))
	}
	if i < 0 || i >= int64(len(arr)) {
		return missing, nil
	}
	return shallow(arr[i]), nil
}

func firstLastOp(name string, first bool) evalFunc {
	return func(a []any) (any, error) {
		if isNullish(a[0]) {
			return nil, nil
		}
		arr, ok := a[0].(bson.A)
		if !ok {
			return nil, errf(28689, "%s's argument must be an array, but is %s", name, typeName(a[0]))
		}
		if len(arr) == 0 {
			return missing, nil
		}
		if first {
			return shallow(arr[0]), nil
		}
		return shallow(arr[len(arr)-1]), nil
	}
}

func opConcatArrays(a []any) (any, error) {
	out := bson.A{}
	for _, v := range a {
		if isNullish(v) {
			return nil, nil
		}
		arr, ok := v.(bson.A)
		if !ok {
			return nil, errf(28664, "$concatArrays only supports arrays, not %s", typeName(v))
		}
		out = append(out, arr...)
	}
	return out, nil
}

func opMergeObjects(a []any) (any, error) {
	out := bson.D{}
	for _, v := range a {
		if isNullish(v) {
			continue
		}
		d, ok := v.(bson.D)
		if !ok {
			return nil, errf(40400, "$mergeObjects requires object inputs, but input %s is of type %s", describe(v), typeName(v))
		}
		for _, e := range d {
			if i := fieldIndex(out, e.Key); i >= 0 {
				out[i].Value = e.Value
			} else {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func opObjectToArray(a []any) (any, error) {
	if isNullish(a[0]) {
		return nil, nil
	}
	d, ok := a[0].(bson.D)
	if !ok {
		return nil, errf(40390, "$objectToArray requires a document input, found: %s", typeName(a[0]))
	}
	out := make(bson.A, len(d))
	for i, e := range d {
		out[i] = bson.D{{Key: "k", Value: e.Key}, {Key: "v", Value: e.Value}}
	}
	return out, nil
}

func opArrayToObject(a []any) (any, error) {
	if isNullish(a[0]) {
		return nil, nil
	}
	arr, ok := a[0].(bson.A)
	if !ok {
		return nil, errf(40386, "$arrayToObject requires an array input, found: %s", typeName(a[0]))
	}
	out := bson.D{}
	set := func(k string, v any) {
		if i := fieldIndex(out, k); i >= 0 {
			out[i].Value = v
		} else {
			out = append(out, bson.E{Key: k, Value: v})
		}
	}
	for _, e := range arr {
		switch x := shallow(e).(type) {
		case bson.A:
			if len(x) != 2 {
				return nil, errf(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(x))
			}
			k, ok := x[0].(string)
			if !ok {
				return nil, errf(40395, "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: %s", typeName(x[0]))
			}
			set(k, x[1])
		case bson.D:
			if len(x) != 2 {
				return nil, errf(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", len(x))
			}
			kv, _ := getField(x, "k")
			vv, okv := getField(x, "v")
			k, ok := kv.(string)
			if !ok || !okv {
				return nil, errf(40393, "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: %s", describe(x))
			}
			set(k, vv)
		default:
			return nil, errf(40398, "Unrecognised input type format for $arrayToObject: %s", typeName(e))
		}
	}
	return out, nil
}
