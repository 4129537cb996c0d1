package mql

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// accumulator is the running state of one $group accumulator for one group.
type accumulator interface {
	add(v any) error
	result() any
}

type accSpec struct {
	field string
	op    string
	arg   *Expr
}

var accumulatorNames = map[string]func() accumulator{
	"$sum":          func() accumulator { return &sumAcc{} },
	"$avg":          func() accumulator { return &sumAcc{avg: true} },
	"$min":          func() accumulator { return &minMaxAcc{sign: -1} },
	"$max":          func() accumulator { return &minMaxAcc{sign: 1} },
	"$first":        func() accumulator { return &firstLastAcc{first: true} },
	"$last":         func() accumulator { return &firstLastAcc{} },
	"$push":         func() accumulator { return &pushAcc{out: bson.A{}} },
	"$addToSet":     func() accumulator { return &pushAcc{out: bson.A{}, set: true} },
	"$count":        func() accumulator { return &sumAcc{} },
	"$mergeObjects": func() accumulator { return &mergeAcc{out: bson.D{}} },
	"$stdDevPop":    func() accumulator { return &stdDevAcc{} },
	"$stdDevSamp":   func() accumulator { return &stdDevAcc{samp: true} },
}

func compileGroupStage(name string, spec any) ([]stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15947, "a group's fields must be specified in an object")
	}
	var idExpr *Expr
	var accs []accSpec
	for _, e := range d {
		if e.Key == "_id" {
			x, err := CompileExpr(e.Value)
			if err != nil {
				return nil, err
			}
			idExpr = x
			continue
		}
		if strings.Contains(e.Key, ".") {
			return nil, errf(40235, "The field name '%s' cannot contain '.'", e.Key)
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, errf(40236, "The field name '%s' cannot be an operator name", e.Key)
		}
		ad, ok := e.Value.(bson.D)
		if !ok {
			return nil, errf(40234, "The field '%s' must be an accumulator object", e.Key)
		}
		if len(ad) != 1 {
			return nil, errf(40238, "The field '%s' must specify one accumulator", e.Key)
		}
		op := ad[0].Key
		if _, known := accumulatorNames[op]; !known {
			return nil, errf(15952, "unknown group operator '%s'", op)
		}
		argSpec := ad[0].Value
		if op == "$count" {
			if sub, ok := argSpec.(bson.D); !ok || len(sub) != 0 {
				return nil, errf(mongoerr.CodeTypeMismatch, "$count takes no arguments, i.e. $count:{}")
			}
			argSpec = int32(1)
		} else if _, isArr := argSpec.(bson.A); isArr {
			return nil, errf(40237, "The %s accumulator is a unary operator", op)
		}
		x, err := CompileExpr(argSpec)
		if err != nil {
			return nil, err
		}
		accs = append(accs, accSpec{field: e.Key, op: op, arg: x})
	}
	if idExpr == nil {
		return nil, errf(15955, "a group specification must include an _id")
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, vars *Vars) ([]bson.D, error) {
		return runGroup(idExpr, accs, docs, vars)
	}}}, nil
}

type groupState struct {
	id   any
	accs []accumulator
}

func runGroup(idExpr *Expr, specs []accSpec, docs []bson.D, vars *Vars) ([]bson.D, error) {
	coll := collationOf(vars)
	if coll != nil {
		// Group keys honour the collation; the accumulators that compare
		// values do not implement it.
		for _, s := range specs {
			switch s.op {
			case "$sum", "$avg", "$first", "$last", "$push", "$count", "$stdDevPop", "$stdDevSamp", "$mergeObjects":
			default:
				return nil, collationRefused("$group accumulator " + s.op)
			}
		}
	}
	index := map[string]*groupState{}
	var order []*groupState
	var kb strings.Builder
	for _, d := range docs {
		id, err := idExpr.evalCurrent(d, d, vars)
		if err != nil {
			return nil, err
		}
		if IsMissing(id) {
			id = nil
		}
		kb.Reset()
		canonKeyColl(&kb, id, coll)
		g := index[kb.String()]
		if g == nil {
			g = &groupState{id: id, accs: make([]accumulator, len(specs))}
			for i, s := range specs {
				g.accs[i] = accumulatorNames[s.op]()
			}
			index[kb.String()] = g
			order = append(order, g)
		}
		for i, s := range specs {
			v, err := s.arg.evalCurrent(d, d, vars)
			if err != nil {
				return nil, err
			}
			if err := g.accs[i].add(v); err != nil {
				return nil, err
			}
		}
	}
	out := make([]bson.D, 0, len(order))
	for _, g := range order {
		doc := make(bson.D, 0, len(specs)+1)
		doc = append(doc, bson.E{Key: "_id", Value: g.id})
		for i, s := range specs {
			doc = append(doc, bson.E{Key: s.field, Value: g.accs[i].result()})
		}
		out = append(out, doc)
	}
	return out, nil
}

// canonKey writes a key such that values that compare equal (Compare == 0)
// get the same key.
func canonKey(b *strings.Builder, v any) { canonKeyColl(b, v, nil) }

// canonKeyColl is canonKey with strings keyed by their sort key under
// coll (nil: simple), so that strings equal under it get the same key.
func canonKeyColl(b *strings.Builder, v any, coll *Collation) {
	switch typeRank(v) {
	case rankNumber:
		n, _ := toNum(v)
		b.WriteString("n:")
		switch n.kind {
		case kInt32, kInt64:
			b.WriteString(strconv.FormatInt(n.i, 10))
		case kDouble:
			if math.IsNaN(n.f) {
				b.WriteString("NaN")
			} else if n.f == math.Trunc(n.f) && math.Abs(n.f) < 9e18 {
				b.WriteString(strconv.FormatInt(int64(n.f), 10))
			} else {
				b.WriteString(new(big.Rat).SetFloat64(n.f).RatString())
			}
		default:
			e := exactOf(n)
			switch {
			case e.nan:
				b.WriteString("NaN")
			case e.inf != 0:
				b.WriteString(strconv.Itoa(e.inf) + "Inf")
			default:
				b.WriteString(e.r.RatString())
			}
		}
	case rankString:
		b.WriteString("s:")
		if coll != nil {
			b.WriteString(strconv.Quote(string(coll.sortKey(stringOf(v)))))
			break
		}
		b.WriteString(strconv.Quote(stringOf(v)))
	case rankObject:
		d, _ := asDoc(v)
		b.WriteString("{")
		for _, e := range d {
			b.WriteString(strconv.Quote(e.Key))
			b.WriteString(":")
			canonKeyColl(b, e.Value, coll)
			b.WriteString(",")
		}
		b.WriteString("}")
	case rankArray:
		a, _ := asArray(v)
		b.WriteString("[")
		for _, e := range a {
			canonKeyColl(b, e, coll)
			b.WriteString(",")
		}
		b.WriteString("]")
	case rankNull, rankUndefined:
		b.WriteString(strconv.Itoa(typeRank(v)))
	default:
		b.WriteString(strconv.Itoa(typeRank(v)))
		b.WriteString(":")
		b.WriteString(strconv.Quote(describe(v)))
	}
}

// sumAcc implements $sum, $avg and $count.
type sumAcc struct {
	avg   bool
	n     int64
	kind  numKind
	i     int64
	f     float64
	dec   *big.Rat
	isDec bool
}

func (a *sumAcc) add(v any) error {
	n, ok := toNum(v)
	if !ok {
		return nil
	}
	a.n++
	if n.kind == kDecimal || a.isDec {
		if !a.isDec {
			a.dec = a.exactSoFar()
			a.isDec = true
		}
		e := exactOf(n)
		if e.r != nil {
			a.dec.Add(a.dec, e.r)
		}
		a.kind = kDecimal
		return nil
	}
	switch {
	case n.kind == kDouble || a.kind == kDouble:
		if a.kind != kDouble {
			a.f = float64(a.i)
			a.kind = kDouble
		}
		a.f += n.float()
	default:
		s := a.i + n.i
		if (s > a.i) != (n.i > 0) {
			a.f = float64(a.i) + float64(n.i)
			a.kind = kDouble
			return nil
		}
		a.i = s
		if n.kind == kInt64 || s > math.MaxInt32 || s < math.MinInt32 {
			a.kind = max(a.kind, kInt64)
		}
	}
	return nil
}

func (a *sumAcc) exactSoFar() *big.Rat {
	if a.kind == kDouble {
		return new(big.Rat).SetFloat64(a.f)
	}
	return new(big.Rat).SetInt64(a.i)
}

func (a *sumAcc) result() any {
	if a.avg {
		if a.n == 0 {
			return nil
		}
		if a.isDec {
			return ratToDecimal(new(big.Rat).Quo(a.dec, new(big.Rat).SetInt64(a.n)))
		}
		if a.kind == kDouble {
			return a.f / float64(a.n)
		}
		return float64(a.i) / float64(a.n)
	}
	switch {
	case a.isDec:
		return ratToDecimal(a.dec)
	case a.kind == kDouble:
		return a.f
	case a.kind == kInt64:
		return a.i
	}
	return int32(a.i)
}

type minMaxAcc struct {
	sign int
	v    any
	set  bool
}

func (a *minMaxAcc) add(v any) error {
	if isNullish(v) {
		return nil
	}
	if !a.set || Compare(v, a.v)*a.sign > 0 {
		a.v, a.set = v, true
	}
	return nil
}

func (a *minMaxAcc) result() any {
	if !a.set {
		return nil
	}
	return a.v
}

type firstLastAcc struct {
	first bool
	v     any
	set   bool
}

func (a *firstLastAcc) add(v any) error {
	if a.first && a.set {
		return nil
	}
	a.v, a.set = v, true
	return nil
}

func (a *firstLastAcc) result() any {
	if IsMissing(a.v) {
		return nil
	}
	return a.v
}

type pushAcc struct {
	out bson.A
	set bool
}

func (a *pushAcc) add(v any) error {
	if IsMissing(v) {
		return nil
	}
	if a.set {
		for _, x := range a.out {
			if Compare(x, v) == 0 {
				return nil
			}
		}
	}
	a.out = append(a.out, v)
	return nil
}

func (a *pushAcc) result() any { return a.out }

type mergeAcc struct{ out bson.D }

func (a *mergeAcc) add(v any) error {
	if isNullish(v) {
		return nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return errf(40400, "$mergeObjects requires object inputs, but input %s is of type %s", describe(v), typeNames[bsonType(v)])
	}
	for _, e := range d {
		a.out = setField(a.out, e.Key, e.Value)
	}
	return nil
}

func (a *mergeAcc) result() any { return a.out }

type stdDevAcc struct {
	samp     bool
	n        float64
	mean, m2 float64
}

func (a *stdDevAcc) add(v any) error {
	n, ok := toNum(v)
	if !ok {
		return nil
	}
	x := n.float()
	a.n++
	d := x - a.mean
	a.mean += d / a.n
	a.m2 += d * (x - a.mean)
	return nil
}

func (a *stdDevAcc) result() any {
	if a.samp {
		if a.n < 2 {
			return nil
		}
		return math.Sqrt(a.m2 / (a.n - 1))
	}
	if a.n == 0 {
		return nil
	}
	return math.Sqrt(a.m2 / a.n)
}
