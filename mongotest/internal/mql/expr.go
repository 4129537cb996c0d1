package mql

import (
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Vars are evaluation-scoped variables: $$NOW, $$CLUSTER_TIME and the
// user variables of an aggregate command's `let` option. A zero Now (or nil
// *Vars) makes $$NOW read the wall clock; one command should pass one Vars
// so that $$NOW is the same for every document, as on the server.
type Vars struct {
	Now         bson.DateTime
	ClusterTime bson.Timestamp
	// User holds user variables ($$name); names must start with a
	// lowercase letter or a non-ASCII character.
	User map[string]any
	// Collation is the command's collation (nil: simple). Filters,
	// comparison expressions, $in and $sort stages honour it;
	// collation-sensitive operations mongotest does not implement under
	// a collation fail with NotImplemented (238).
	Collation *Collation
}

// Expr is a compiled aggregation expression. It is immutable and safe for
// concurrent use.
type Expr struct {
	fn      exprFn
	isConst bool
	konst   any
}

type exprFn func(c *evalCtx) (any, error)

// evalCtx is the per-evaluation state.
type evalCtx struct {
	root    bson.D
	current any
	vars    *Vars
	frame   *varFrame
}

type varFrame struct {
	id    int
	val   any
	next  *varFrame
	empty bool
}

func newEvalCtx(doc bson.D, vars *Vars) *evalCtx {
	return &evalCtx{root: doc, current: doc, vars: vars}
}

func (c *evalCtx) lookupVar(id int) (any, bool) {
	for f := c.frame; f != nil; f = f.next {
		if f.id == id {
			return f.val, true
		}
	}
	return nil, false
}

// with returns a context with one more bound variable.
func (c *evalCtx) with(id int, v any) *evalCtx {
	nc := *c
	nc.frame = &varFrame{id: id, val: v, next: c.frame}
	return &nc
}

// redact sentinels ($$KEEP, $$PRUNE, $$DESCEND).
type redactT string

const (
	redactKeep    redactT = "KEEP"
	redactPrune   redactT = "PRUNE"
	redactDescend redactT = "DESCEND"
)

// compiler holds compile-time state: the variables in scope.
type compiler struct {
	scope  []scopeVar
	nextID *int
}

type scopeVar struct {
	name string
	id   int
}

func newCompiler() *compiler {
	n := 0
	return &compiler{nextID: &n}
}

func (c *compiler) bind(names ...string) (*compiler, []int) {
	nc := &compiler{scope: append([]scopeVar(nil), c.scope...), nextID: c.nextID}
	ids := make([]int, len(names))
	for i, n := range names {
		*c.nextID++
		ids[i] = *c.nextID
		nc.scope = append(nc.scope, scopeVar{name: n, id: ids[i]})
	}
	return nc, ids
}

func (c *compiler) resolve(name string) (int, bool) {
	for i := len(c.scope) - 1; i >= 0; i-- {
		if c.scope[i].name == name {
			return c.scope[i].id, true
		}
	}
	return 0, false
}

// CompileExpr compiles an aggregation expression: a field path ("$a.b"), a
// variable ("$$ROOT.a"), an operator document ({$add: [...]}), an
// expression object ({a: "$x"}), an array of expressions or a constant.
func CompileExpr(v any) (*Expr, error) {
	fn, err := newCompiler().compile(normalize(v))
	if err != nil {
		return nil, err
	}
	return &Expr{fn: fn}, nil
}

// Eval evaluates the expression against doc ($$ROOT and $$CURRENT). A
// missing result (a path that does not resolve, $$REMOVE) is returned as
// nil; use EvalMissing to tell missing from null.
func (e *Expr) Eval(doc bson.D, vars *Vars) (any, error) {
	v, err := e.fn(newEvalCtx(doc, vars))
	if err != nil {
		return nil, err
	}
	if IsMissing(v) {
		return nil, nil
	}
	return v, nil
}

// EvalMissing is Eval that also reports whether the result is missing
// (absent) rather than null.
func (e *Expr) EvalMissing(doc bson.D, vars *Vars) (v any, isMissingResult bool, err error) {
	r, err := e.fn(newEvalCtx(doc, vars))
	if err != nil {
		return nil, false, err
	}
	if IsMissing(r) {
		return nil, true, nil
	}
	return r, false, nil
}

func (e *Expr) eval(c *evalCtx) (any, error) { return e.fn(c) }

// evalCurrent evaluates with $$CURRENT bound to current (used by $redact,
// which descends into subdocuments) while $$ROOT stays root. The result
// may be the missing marker.
func (e *Expr) evalCurrent(root bson.D, current any, vars *Vars) (any, error) {
	return e.fn(&evalCtx{root: root, current: current, vars: vars})
}

func constFn(v any) exprFn { return func(*evalCtx) (any, error) { return v, nil } }

func (c *compiler) compile(v any) (exprFn, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return c.compilePath(x)
		}
		return constFn(x), nil
	case bson.D:
		if len(x) > 0 && strings.HasPrefix(x[0].Key, "$") {
			if len(x) != 1 {
				return nil, errf(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(x), describe(x))
			}
			return c.compileOperator(x[0].Key, normalize(x[0].Value))
		}
		return c.compileObject(x)
	case bson.A:
		fns := make([]exprFn, len(x))
		for i, e := range x {
			f, err := c.compile(normalize(e))
			if err != nil {
				return nil, err
			}
			fns[i] = f
		}
		return func(ctx *evalCtx) (any, error) {
			out := make(bson.A, len(fns))
			for i, f := range fns {
				r, err := f(ctx)
				if err != nil {
					return nil, err
				}
				if IsMissing(r) {
					r = nil
				}
				out[i] = r
			}
			return out, nil
		}, nil
	}
	return constFn(v), nil
}

func (c *compiler) compileObject(d bson.D) (exprFn, error) {
	type field struct {
		name string
		fn   exprFn
	}
	fields := make([]field, 0, len(d))
	seen := map[string]bool{}
	for _, e := range d {
		if err := validateFieldName(e.Key); err != nil {
			return nil, err
		}
		if seen[e.Key] {
			return nil, errf(16406, "duplicate field name specified in object literal: %s", describe(d))
		}
		seen[e.Key] = true
		f, err := c.compile(normalize(e.Value))
		if err != nil {
			return nil, err
		}
		fields = append(fields, field{e.Key, f})
	}
	return func(ctx *evalCtx) (any, error) {
		out := make(bson.D, 0, len(fields))
		for _, f := range fields {
			r, err := f.fn(ctx)
			if err != nil {
				return nil, err
			}
			if IsMissing(r) {
				continue
			}
			out = append(out, bson.E{Key: f.name, Value: r})
		}
		return out, nil
	}, nil
}

func validateFieldName(name string) error {
	if name == "" {
		return errf(16410, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(name, "$") {
		return errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	if strings.Contains(name, ".") {
		return errf(16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
	}
	return nil
}

func (c *compiler) compilePath(s string) (exprFn, error) {
	if strings.HasPrefix(s, "$$") {
		name, rest, _ := strings.Cut(s[2:], ".")
		var parts []string
		if rest != "" || strings.Contains(s[2:], ".") {
			parts = strings.Split(rest, ".")
			for _, p := range parts {
				if p == "" {
					return nil, errf(15998, "FieldPath field names may not be empty strings.")
				}
			}
		}
		base, err := c.compileVar(name)
		if err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			return base, nil
		}
		return func(ctx *evalCtx) (any, error) {
			v, err := base(ctx)
			if err != nil {
				return nil, err
			}
			return evalPath(v, parts), nil
		}, nil
	}
	if s == "$" {
		return nil, errf(16872, "'$' by itself is not a valid FieldPath")
	}
	parts := strings.Split(s[1:], ".")
	for _, p := range parts {
		if p == "" {
			return nil, errf(15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			return nil, errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return func(ctx *evalCtx) (any, error) {
		return evalPath(ctx.current, parts), nil
	}, nil
}

func (c *compiler) compileVar(name string) (exprFn, error) {
	if id, ok := c.resolve(name); ok && name != "CURRENT" {
		return func(ctx *evalCtx) (any, error) {
			v, _ := ctx.lookupVar(id)
			return v, nil
		}, nil
	}
	switch name {
	case "ROOT":
		return func(ctx *evalCtx) (any, error) { return ctx.root, nil }, nil
	case "CURRENT":
		return func(ctx *evalCtx) (any, error) { return ctx.current, nil }, nil
	case "REMOVE":
		return constFn(missing), nil
	case "NOW":
		return func(ctx *evalCtx) (any, error) {
			if ctx.vars == nil || ctx.vars.Now == 0 {
				return bson.NewDateTimeFromTime(time.Now()), nil
			}
			return ctx.vars.Now, nil
		}, nil
	case "CLUSTER_TIME":
		return func(ctx *evalCtx) (any, error) {
			if ctx.vars == nil {
				return bson.Timestamp{}, nil
			}
			return ctx.vars.ClusterTime, nil
		}, nil
	case "KEEP":
		return constFn(redactKeep), nil
	case "PRUNE":
		return constFn(redactPrune), nil
	case "DESCEND":
		return constFn(redactDescend), nil
	case "USER_ROLES", "SEARCH_META":
		return nil, unsupported("$$" + name)
	}
	if name == "" {
		return nil, errf(16869, "empty variable name")
	}
	// user variables supplied at run time through Vars.User
	return func(ctx *evalCtx) (any, error) {
		if ctx.vars != nil && ctx.vars.User != nil {
			if v, ok := ctx.vars.User[name]; ok {
				return normalize(v), nil
			}
		}
		return nil, errf(17276, "Use of undefined variable: %s", name)
	}, nil
}

// evalPath resolves a field path the aggregation way: arrays met on the way
// map the rest of the path over their document elements.
func evalPath(v any, parts []string) any {
	for i, p := range parts {
		switch x := shallow(v).(type) {
		case bson.D:
			f, ok := getField(x, p)
			if !ok {
				return missing
			}
			v = f
		case bson.A:
			out := bson.A{}
			for _, e := range x {
				ed, ok := shallow(e).(bson.D)
				if !ok {
					continue
				}
				r := evalPath(ed, parts[i:])
				if !IsMissing(r) {
					out = append(out, r)
				}
			}
			return out
		default:
			return missing
		}
	}
	return shallow(v)
}

// Operator registry -----------------------------------------------------------

// OperatorFunc evaluates an expression operator whose arguments have been
// evaluated. Missing arguments are passed as nil.
type OperatorFunc func(args []any) (any, error)

type opCompiler func(c *compiler, name string, arg any) (exprFn, error)

var (
	opsMu     sync.RWMutex
	operators = map[string]opCompiler{}
)

// RegisterOperator adds (or replaces) an expression operator such as
// "$toHashedIndexKey". The operator accepts between minArgs and maxArgs
// arguments (maxArgs < 0: unbounded); a non-array argument counts as one.
// It must be called before compiling expressions that use it (typically
// from an init function).
func RegisterOperator(name string, minArgs, maxArgs int, fn OperatorFunc) {
	opsMu.Lock()
	defer opsMu.Unlock()
	operators[name] = func(c *compiler, name string, arg any) (exprFn, error) {
		args, err := c.compileArgs(name, arg, minArgs, maxArgs)
		if err != nil {
			return nil, err
		}
		return func(ctx *evalCtx) (any, error) {
			vals, err := evalArgs(ctx, args)
			if err != nil {
				return nil, err
			}
			for i := range vals {
				if IsMissing(vals[i]) {
					vals[i] = nil
				}
			}
			return fn(vals)
		}, nil
	}
}

// OperatorNames returns the names of the registered expression operators.
func OperatorNames() []string {
	opsMu.RLock()
	defer opsMu.RUnlock()
	out := make([]string, 0, len(operators))
	for k := range operators {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func registerInternal(name string, f opCompiler) { operators[name] = f }

func (c *compiler) compileOperator(name string, arg any) (exprFn, error) {
	opsMu.RLock()
	f, ok := operators[name]
	opsMu.RUnlock()
	if !ok {
		return nil, errf(mongoerr.CodeInvalidPipelineOperator, "Unrecognized expression '%s'", name)
	}
	fn, err := f(c, name, arg)
	if err != nil || !collationSensitive[name] {
		return fn, err
	}
	return func(ctx *evalCtx) (any, error) {
		if collationOf(ctx.vars) != nil {
			return nil, collationRefused(name)
		}
		return fn(ctx)
	}, nil
}

// compileArgs compiles an operator's argument list, checking its arity.
func (c *compiler) compileArgs(name string, arg any, minArgs, maxArgs int) ([]exprFn, error) {
	var list bson.A
	if a, ok := arg.(bson.A); ok {
		list = a
	} else {
		list = bson.A{arg}
	}
	n := len(list)
	if minArgs == maxArgs && n != minArgs {
		plural := "s"
		if minArgs == 1 {
			plural = ""
		}
		return nil, errf(16020, "Expression %s takes exactly %d argument%s. %d were passed in.", name, minArgs, plural, n)
	}
	if n < minArgs {
		return nil, errf(16020, "Expression %s takes at least %d arguments, and at most %d. %d were passed in.", name, minArgs, maxArgs, n)
	}
	if maxArgs >= 0 && n > maxArgs {
		return nil, errf(16020, "Expression %s takes at least %d arguments, and at most %d. %d were passed in.", name, minArgs, maxArgs, n)
	}
	fns := make([]exprFn, n)
	for i, a := range list {
		f, err := c.compile(normalize(a))
		if err != nil {
			return nil, err
		}
		fns[i] = f
	}
	return fns, nil
}

func evalArgs(ctx *evalCtx, fns []exprFn) ([]any, error) {
	out := make([]any, len(fns))
	for i, f := range fns {
		v, err := f(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
