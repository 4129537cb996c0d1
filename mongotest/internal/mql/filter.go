package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Filter is a compiled query filter. It is immutable and safe for
// concurrent use.
type Filter struct {
	root    matchFn
	hasExpr bool // contains $expr: evaluation needs variables and may fail
}

// matchCtx is the per-match state: the variables for $expr and the first
// evaluation error met by an $expr.
type matchCtx struct {
	vars *Vars
	coll *Collation
	err  error
}

// noExprCtx is shared by matches of filters without $expr, which never
// read or write their context.
var noExprCtx = &matchCtx{}

type matchFn func(doc bson.D, vars *matchCtx) bool

// valuePred tests one value reached by a path (missing included).
type valuePred func(v any, vars *matchCtx) bool

// CompileFilter compiles a query filter document.
func CompileFilter(filter bson.D) (*Filter, error) {
	nf, _ := normalize(filter).(bson.D)
	m, err := compileAnd(nf, true)
	if err != nil {
		return nil, err
	}
	return &Filter{root: m, hasExpr: containsKey(nf, "$expr")}, nil
}

// Match reports whether doc matches the filter. vars may be nil. An $expr
// whose evaluation fails counts as not matching; use MatchErr to see the
// error.
func (f *Filter) Match(doc bson.D, vars *Vars) bool {
	ok, _ := f.MatchErr(doc, vars)
	return ok
}

// MatchErr is Match that also returns the first error raised while
// evaluating an $expr (for example "can't $divide by zero"); the server
// fails the operation with that error.
func (f *Filter) MatchErr(doc bson.D, vars *Vars) (bool, error) {
	if f == nil || f.root == nil {
		return true, nil
	}
	coll := collationOf(vars)
	if !f.hasExpr && coll == nil {
		return f.root(doc, noExprCtx), nil
	}
	mc := matchCtx{vars: vars, coll: coll}
	ok := f.root(doc, &mc)
	if mc.err != nil {
		return false, mc.err
	}
	return ok, nil
}

// containsKey reports whether a field named key appears anywhere in v.
func containsKey(v any, key string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == key || containsKey(e.Value, key) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if containsKey(e, key) {
				return true
			}
		}
	}
	return false
}

func matchAll(bson.D, *matchCtx) bool { return true }

// compileAnd compiles the fields of a filter document (implicit AND).
func compileAnd(filter bson.D, topLevel bool) (matchFn, error) {
	var parts []matchFn
	for _, e := range filter {
		m, err := compileFilterElem(e.Key, normalize(e.Value), topLevel)
		if err != nil {
			return nil, err
		}
		if m != nil {
			parts = append(parts, m)
		}
	}
	return andOf(parts), nil
}

func andOf(parts []matchFn) matchFn {
	switch len(parts) {
	case 0:
		return matchAll
	case 1:
		return parts[0]
	case 2:
		a, b := parts[0], parts[1]
		return func(d bson.D, v *matchCtx) bool { return a(d, v) && b(d, v) }
	}
	return func(d bson.D, v *matchCtx) bool {
		for _, p := range parts {
			if !p(d, v) {
				return false
			}
		}
		return true
	}
}

func compileFilterElem(key string, val any, topLevel bool) (matchFn, error) {
	if strings.HasPrefix(key, "$") {
		switch key {
		case "$and", "$or", "$nor":
			arr, ok := val.(bson.A)
			if !ok || len(arr) == 0 {
				return nil, errf(mongoerr.CodeBadValue, "%s must be a nonempty array", key)
			}
			subs := make([]matchFn, 0, len(arr))
			for _, x := range arr {
				d, ok := normalize(x).(bson.D)
				if !ok {
					return nil, errf(mongoerr.CodeBadValue, "%s argument's entries must be objects", key)
				}
				m, err := compileAnd(d, topLevel)
				if err != nil {
					return nil, err
				}
				subs = append(subs, m)
			}
			switch key {
			case "$and":
				return andOf(subs), nil
			case "$or":
				if len(subs) == 1 {
					return subs[0], nil
				}
				return func(d bson.D, v *matchCtx) bool {
					for _, s := range subs {
						if s(d, v) {
							return true
						}
					}
					return false
				}, nil
			default:
				return func(d bson.D, v *matchCtx) bool {
					for _, s := range subs {
						if s(d, v) {
							return false
						}
					}
					return true
				}, nil
			}
		case "$expr":
			if !topLevel {
				return nil, errf(mongoerr.CodeBadValue, "$expr can only be applied to the top-level document")
			}
			e, err := CompileExpr(val)
			if err != nil {
				return nil, err
			}
			return func(d bson.D, mc *matchCtx) bool {
				r, err := e.eval(newEvalCtx(d, mc.vars))
				if err != nil {
					if mc.err == nil {
						mc.err = err
					}
					return false
				}
				return Truthy(r)
			}, nil
		case "$comment":
			return nil, nil
		case "$alwaysTrue":
			return matchAll, nil
		case "$alwaysFalse":
			return func(bson.D, *matchCtx) bool { return false }, nil
		case "$where":
			if !topLevel {
				return nil, errf(mongoerr.CodeBadValue, "$where can only be applied to the top-level document")
			}
			return nil, unsupported("$where")
		case "$text":
			return nil, unsupported("$text")
		case "$jsonSchema":
			return nil, unsupported("$jsonSchema")
		case "$sampleRate":
			return nil, unsupported("$sampleRate")
		}
		return nil, errf(mongoerr.CodeBadValue, "unknown top level operator: %s. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.", key)
	}
	parts := splitPath(key)
	pred, err := compileFieldPredicate(val)
	if err != nil {
		return nil, err
	}
	return pathMatcher(parts, pred), nil
}

// fieldPred is a predicate on the values reached by a path plus whether the
// leaf arrays are expanded and whether the predicate is negated over the
// whole path ($ne, $nin, $not, $exists:false).
type fieldPred struct {
	pred        valuePred
	noExpand    bool // test only the leaf value itself, not array elements
	negate      bool
	negateGroup []fieldPred // {$not: {...}}: negation of the conjunction
}

func pathMatcher(parts []string, preds []fieldPred) matchFn {
	fns := make([]matchFn, 0, len(preds))
	for _, p := range preds {
		p := p
		var fn matchFn
		switch {
		case p.negateGroup != nil:
			inner := pathMatcher(parts, p.negateGroup)
			fn = func(d bson.D, v *matchCtx) bool { return !inner(d, v) }
		case p.negate:
			fn = func(d bson.D, v *matchCtx) bool {
				return !walkDoc(d, parts, p.pred, !p.noExpand, v)
			}
		default:
			fn = func(d bson.D, v *matchCtx) bool {
				return walkDoc(d, parts, p.pred, !p.noExpand, v)
			}
		}
		fns = append(fns, fn)
	}
	return andOf(fns)
}

// predsOnValue applies compiled operator predicates to a single value
// without path traversal or array expansion, like MongoDB's
// matchesSingleElement (used by $elemMatch's value form).
func predsOnValue(preds []fieldPred, v any, mc *matchCtx) bool {
	for _, p := range preds {
		var ok bool
		switch {
		case p.negateGroup != nil:
			ok = !predsOnValue(p.negateGroup, v, mc)
		case p.negate:
			ok = !p.pred(v, mc)
		default:
			ok = p.pred(v, mc)
		}
		if !ok {
			return false
		}
	}
	return true
}

// walkDoc reports whether some value reached by parts from doc satisfies
// pred, following MongoDB's path semantics: arrays met on the way are
// traversed element by element (documents only) and also indexed when the
// next component is numeric; a leaf array is tested as a whole and, when
// expand is set, element by element; an unresolvable path yields missing
// (except inside an array whose elements are not documents).
func walkDoc(d bson.D, parts []string, pred valuePred, expand bool, vars *matchCtx) bool {
	v, ok := getField(d, parts[0])
	if !ok {
		return pred(missing, vars)
	}
	return walkValue(shallow(v), parts[1:], pred, expand, vars)
}

func walkValue(v any, rest []string, pred valuePred, expand bool, vars *matchCtx) bool {
	if len(rest) == 0 {
		if arr, ok := v.(bson.A); ok && expand {
			for _, e := range arr {
				if pred(shallow(e), vars) {
					return true
				}
			}
		}
		return pred(v, vars)
	}
	switch c := v.(type) {
	case bson.D:
		return walkDoc(c, rest, pred, expand, vars)
	case bson.A:
		for _, e := range c {
			if sub, ok := shallow(e).(bson.D); ok {
				if walkDoc(sub, rest, pred, expand, vars) {
					return true
				}
			}
		}
		if idx, ok := arrayIndex(rest[0]); ok && idx < len(c) {
			if walkValue(shallow(c[idx]), rest[1:], pred, expand, vars) {
				return true
			}
		}
		return false
	}
	return pred(missing, vars)
}

// isOperatorDoc reports whether a field's value is an operator document
// ({$gt: 1}) rather than a literal document; DBRef-style documents are
// literals.
func isOperatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 {
		return nil, false
	}
	k := d[0].Key
	if !strings.HasPrefix(k, "$") {
		return nil, false
	}
	switch k {
	case "$ref", "$id", "$db":
		return nil, false
	}
	return d, true
}

// compileFieldPredicate compiles the value of a path in a filter.
func compileFieldPredicate(val any) ([]fieldPred, error) {
	if re, ok := val.(bson.Regex); ok {
		p, err := regexPred(re.Pattern, re.Options)
		if err != nil {
			return nil, err
		}
		return []fieldPred{{pred: p}}, nil
	}
	ops, ok := isOperatorDoc(val)
	if !ok {
		if _, undef := val.(bson.Undefined); undef {
			return nil, errf(mongoerr.CodeBadValue, "cannot compare to undefined")
		}
		return []fieldPred{{pred: eqPred(val)}}, nil
	}
	return compileOperators(ops)
}

func compileOperators(ops bson.D) ([]fieldPred, error) {
	var out []fieldPred
	var regexSeen, optionsSeen bool
	var pattern, options string
	var patternIsRegex bool
	for _, e := range ops {
		arg := normalize(e.Value)
		switch e.Key {
		case "$regex":
			regexSeen = true
			switch r := arg.(type) {
			case string:
				pattern = r
			case bson.Regex:
				pattern = r.Pattern
				if !optionsSeen {
					options = r.Options
				}
				patternIsRegex = true
			default:
				return nil, errf(mongoerr.CodeBadValue, "$regex has to be a string")
			}
			continue
		case "$options":
			s, ok := arg.(string)
			if !ok {
				return nil, errf(mongoerr.CodeBadValue, "$options has to be a string")
			}
			if patternIsRegex && options != "" && s != "" {
				return nil, errf(51075, "options set in both $regex and $options")
			}
			optionsSeen = true
			options = s
			continue
		}
		fp, err := compileOperator(e.Key, arg)
		if err != nil {
			return nil, err
		}
		out = append(out, fp...)
	}
	if optionsSeen && !regexSeen {
		return nil, errf(mongoerr.CodeBadValue, "$options needs a $regex")
	}
	if regexSeen {
		p, err := regexPred(pattern, options)
		if err != nil {
			return nil, err
		}
		out = append(out, fieldPred{pred: p})
	}
	return out, nil
}

func compileOperator(op string, arg any) ([]fieldPred, error) {
	if _, ok := arg.(bson.Undefined); ok {
		switch op {
		case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
			return nil, errf(mongoerr.CodeBadValue, "cannot compare to undefined")
		}
	}
	switch op {
	case "$eq":
		return []fieldPred{{pred: eqPred(arg)}}, nil
	case "$ne":
		if _, ok := arg.(bson.Regex); ok {
			return nil, errf(mongoerr.CodeBadValue, "Can't have regex as arg to $ne.")
		}
		return []fieldPred{{pred: eqPred(arg), negate: true}}, nil
	case "$gt", "$gte", "$lt", "$lte":
		return []fieldPred{{pred: cmpPred(op, arg)}}, nil
	case "$in", "$nin":
		arr, ok := arg.(bson.A)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "%s needs an array", op)
		}
		p, err := inPred(arr)
		if err != nil {
			return nil, err
		}
		return []fieldPred{{pred: p, negate: op == "$nin"}}, nil
	case "$exists":
		if Truthy(arg) {
			return []fieldPred{{pred: func(v any, _ *matchCtx) bool { return !IsMissing(v) }}}, nil
		}
		return []fieldPred{{pred: func(v any, _ *matchCtx) bool { return !IsMissing(v) }, negate: true}}, nil
	case "$type":
		p, err := typePred(arg)
		if err != nil {
			return nil, err
		}
		return []fieldPred{{pred: p}}, nil
	case "$size":
		n, ok := exactInt(arg)
		if !ok {
			if isNumber(arg) {
				return nil, errf(mongoerr.CodeBadValue, "Failed to parse $size. Expected an integer, but found a non-integral number")
			}
			return nil, errf(mongoerr.CodeBadValue, "Failed to parse $size. Expected a number in: $size: %v", arg)
		}
		if n < 0 {
			return nil, errf(mongoerr.CodeBadValue, "Failed to parse $size. Expected a non-negative number in: $size: %d", n)
		}
		return []fieldPred{{noExpand: true, pred: func(v any, _ *matchCtx) bool {
			a, ok := v.(bson.A)
			return ok && int64(len(a)) == n
		}}}, nil
	case "$mod":
		arr, ok := arg.(bson.A)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "malformed mod, needs to be an array")
		}
		if len(arr) < 2 {
			return nil, errf(mongoerr.CodeBadValue, "malformed mod, not enough elements")
		}
		if len(arr) > 2 {
			return nil, errf(mongoerr.CodeBadValue, "malformed mod, too many elements")
		}
		d, ok1 := truncToInt64(normalize(arr[0]))
		r, ok2 := truncToInt64(normalize(arr[1]))
		if !ok1 {
			return nil, errf(mongoerr.CodeBadValue, "malformed mod, divisor not a number")
		}
		if !ok2 {
			return nil, errf(mongoerr.CodeBadValue, "malformed mod, remainder not a number")
		}
		if d == 0 {
			return nil, errf(mongoerr.CodeBadValue, "divisor cannot be 0")
		}
		return []fieldPred{{pred: func(v any, _ *matchCtx) bool {
			if !isNumber(v) {
				return false
			}
			x, ok := truncToInt64(v)
			if !ok {
				return false
			}
			if d == -1 {
				return r == 0
			}
			return x%d == r
		}}}, nil
	case "$all":
		arr, ok := arg.(bson.A)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "$all needs an array")
		}
		if len(arr) == 0 {
			return []fieldPred{{pred: func(any, *matchCtx) bool { return false }, noExpand: true}}, nil
		}
		var out []fieldPred
		elemMatchCount := 0
		for _, x := range arr {
			x = normalize(x)
			if d, ok := x.(bson.D); ok && len(d) > 0 && d[0].Key == "$elemMatch" {
				elemMatchCount++
				fp, err := compileOperator("$elemMatch", normalize(d[0].Value))
				if err != nil {
					return nil, err
				}
				out = append(out, fp...)
				continue
			}
			if _, ok := isOperatorDoc(x); ok {
				return nil, errf(mongoerr.CodeBadValue, "no $ expressions in $all")
			}
			if re, ok := x.(bson.Regex); ok {
				p, err := regexPred(re.Pattern, re.Options)
				if err != nil {
					return nil, err
				}
				out = append(out, fieldPred{pred: p})
				continue
			}
			out = append(out, fieldPred{pred: eqPred(x)})
		}
		if elemMatchCount > 0 && elemMatchCount != len(arr) {
			return nil, errf(mongoerr.CodeBadValue, "$all/$elemMatch has to be consistent")
		}
		return out, nil
	case "$elemMatch":
		d, ok := arg.(bson.D)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "$elemMatch needs an Object")
		}
		p, err := elemMatchPred(d)
		if err != nil {
			return nil, err
		}
		return []fieldPred{{pred: p, noExpand: true}}, nil
	case "$not":
		switch x := arg.(type) {
		case bson.Regex:
			p, err := regexPred(x.Pattern, x.Options)
			if err != nil {
				return nil, err
			}
			return []fieldPred{{pred: p, negate: true}}, nil
		case bson.D:
			if len(x) == 0 {
				return nil, errf(mongoerr.CodeBadValue, "$not cannot be empty")
			}
			if _, ok := isOperatorDoc(x); !ok {
				return nil, errf(mongoerr.CodeBadValue, "$not needs a regex or a document")
			}
			inner, err := compileOperators(x)
			if err != nil {
				return nil, err
			}
			// {$not: {...}} negates the conjunction of the inner operators,
			// each evaluated over the whole path.
			return []fieldPred{{negateGroup: inner}}, nil
		}
		return nil, errf(mongoerr.CodeBadValue, "$not needs a regex or a document")
	case "$bitsAllSet", "$bitsAnySet", "$bitsAllClear", "$bitsAnyClear":
		p, err := bitsPred(op, arg)
		if err != nil {
			return nil, err
		}
		return []fieldPred{{pred: p}}, nil
	case "$near", "$nearSphere", "$geoWithin", "$geoIntersects", "$within", "$geoNear", "$box", "$center", "$centerSphere", "$polygon", "$geometry", "$maxDistance", "$minDistance":
		return nil, unsupported(op)
	case "$where", "$text":
		return nil, unsupported(op)
	case "$comment":
		return nil, nil
	case "$expr":
		return nil, errf(mongoerr.CodeBadValue, "unknown operator: $expr")
	}
	return nil, errf(mongoerr.CodeBadValue, "unknown operator: %s", op)
}

// HasExpr reports whether the filter contains $expr, whose evaluation may
// fail (MatchErr) and reads variables.
func (f *Filter) HasExpr() bool { return f != nil && f.hasExpr }
