package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Projection is a compiled projection: a find projection, or the body of a
// $project, $addFields/$set or $unset stage. It is immutable and safe for
// concurrent use.
type Projection struct {
	root      *projNode
	inclusion bool // inclusion projection (else exclusion / addFields)
	addFields bool // $addFields: keep everything, set computed fields
	find      bool // find-command policies
}

type projKind int

const (
	pInclude projKind = iota
	pExclude
	pSub
	pExpr
	pSlice
	pElemMatch
)

type projField struct {
	name      string
	kind      projKind
	sub       *projNode
	expr      *Expr
	sliceSkip *int64
	sliceN    int64
	elemMatch *Filter
}

type projNode struct {
	fields []*projField
}

func (n *projNode) get(name string) *projField {
	for _, f := range n.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

// projParser holds parsing state for one projection.
type projParser struct {
	stage      string // "$project", "$addFields", "" for find
	addFields  bool
	find       bool
	mode       int // 0 undecided, 1 inclusion, 2 exclusion
	idExcluded bool
	idSeen     bool
}

func (pp *projParser) wrap(err error) error {
	if pp.stage == "" || err == nil {
		return err
	}
	if e, ok := err.(*Error); ok {
		return &Error{Code: e.Code, Msg: "Invalid " + pp.stage + " :: caused by :: " + e.Msg}
	}
	return err
}

// CompileProjection compiles a find-command projection: inclusion or
// exclusion of (dotted) fields, computed fields, _id rules, and the find
// operators $slice and $elemMatch. The positional "a.$" form is not
// supported. An empty spec returns whole documents.
func CompileProjection(spec bson.D) (*Projection, error) {
	if len(spec) == 0 {
		return &Projection{addFields: true, root: &projNode{}, find: true}, nil
	}
	pp := &projParser{find: true}
	return pp.compile(normalize(spec).(bson.D))
}

func compileProjectStage(spec bson.D) (*Projection, error) {
	if len(spec) == 0 {
		return nil, errf(51272, "Invalid $project :: caused by :: projection specification must have at least one field")
	}
	pp := &projParser{stage: "$project"}
	return pp.compile(spec)
}

func compileAddFields(stage string, spec bson.D) (*Projection, error) {
	pp := &projParser{stage: stage, addFields: true}
	p, err := pp.compile(spec)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func compileUnset(v any) (*Projection, error) {
	var names []string
	switch t := v.(type) {
	case string:
		names = []string{t}
	case bson.A:
		if len(t) == 0 {
			return nil, errf(31119, "$unset specification must be a string or an array with at least one field")
		}
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, errf(31120, "$unset specification must be a string or an array containing only string values")
			}
			names = append(names, s)
		}
	default:
		return nil, errf(31002, "$unset specification must be a string or an array")
	}
	spec := make(bson.D, len(names))
	for i, n := range names {
		spec[i] = bson.E{Key: n, Value: int32(0)}
	}
	pp := &projParser{stage: "$unset"}
	return pp.compile(spec)
}

func (pp *projParser) compile(spec bson.D) (*Projection, error) {
	root := &projNode{}
	for _, e := range spec {
		if err := pp.add(root, e.Key, e.Value); err != nil {
			return nil, pp.wrap(err)
		}
	}
	p := &Projection{root: root, addFields: pp.addFields, find: pp.find}
	if pp.addFields {
		return p, nil
	}
	switch pp.mode {
	case 0:
		// Only _id (or only $slice): {_id: 0} is an exclusion, {_id: 1} an
		// inclusion.
		p.inclusion = pp.idSeen && !pp.idExcluded
		if root.hasSlices() && !pp.idSeen {
			p.inclusion = false
		}
	case 1:
		p.inclusion = true
	}
	if p.inclusion && !pp.idSeen {
		root.fields = append([]*projField{{name: "_id", kind: pInclude}}, root.fields...)
	}
	return p, nil
}

func (n *projNode) hasSlices() bool {
	for _, f := range n.fields {
		if f.kind == pSlice || (f.kind == pSub && f.sub.hasSlices()) {
			return true
		}
	}
	return false
}

func (pp *projParser) add(node *projNode, path string, v any) error {
	if path == "" {
		return errf(40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(path, "$") {
		return errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return errf(15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			if p == "$" && pp.find {
				return unsupported("the positional projection operator ('" + path + "')")
			}
			return errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	// Walk/create intermediate nodes.
	for i := 0; i < len(parts)-1; i++ {
		f := node.get(parts[i])
		if f == nil {
			f = &projField{name: parts[i], kind: pSub, sub: &projNode{}}
			node.fields = append(node.fields, f)
		} else if f.kind != pSub {
			return errf(31249, "Path collision at %s remaining portion %s", path, strings.Join(parts[i+1:], "."))
		}
		node = f.sub
	}
	name := parts[len(parts)-1]
	if ex := node.get(name); ex != nil {
		if d, ok := v.(bson.D); ok && ex.kind == pSub && len(d) > 0 && !strings.HasPrefix(d[0].Key, "$") {
			for _, e := range d {
				if err := pp.add(ex.sub, e.Key, e.Value); err != nil {
					return err
				}
			}
			return nil
		}
		return errf(31250, "Path collision at %s", path)
	}
	f, err := pp.leaf(name, path, v, len(parts) > 1)
	if err != nil {
		return err
	}
	node.fields = append(node.fields, f)
	return nil
}

func (pp *projParser) leaf(name, path string, v any, nested bool) (*projField, error) {
	f := &projField{name: name}
	isID := path == "_id"
	if pp.addFields {
		if d, ok := v.(bson.D); ok && len(d) > 0 && !strings.HasPrefix(d[0].Key, "$") {
			f.kind, f.sub = pSub, &projNode{}
			for _, e := range d {
				if err := pp.add(f.sub, e.Key, e.Value); err != nil {
					return nil, err
				}
			}
			return f, nil
		}
		expr, err := CompileExpr(v)
		if err != nil {
			return nil, err
		}
		f.kind, f.expr = pExpr, expr
		return f, nil
	}
	switch t := v.(type) {
	case bool, int32, int64, float64, bson.Decimal128:
		if Truthy(t) {
			f.kind = pInclude
			if isID {
				pp.idSeen = true
				return f, nil
			}
			if pp.mode == 2 {
				return nil, errf(31253, "Cannot do inclusion on field %s in exclusion projection", path)
			}
			pp.mode = 1
			return f, nil
		}
		f.kind = pExclude
		if isID {
			pp.idSeen, pp.idExcluded = true, true
			return f, nil
		}
		if pp.mode == 1 {
			return nil, errf(31254, "Cannot do exclusion on field %s in inclusion projection", path)
		}
		pp.mode = 2
		return f, nil
	case bson.D:
		if len(t) == 0 {
			return nil, errf(51270, "An empty sub-projection is not a valid value. Found empty object at path")
		}
		if !strings.HasPrefix(t[0].Key, "$") {
			f.kind, f.sub = pSub, &projNode{}
			for _, e := range t {
				if err := pp.add(f.sub, e.Key, e.Value); err != nil {
					return nil, err
				}
			}
			return f, nil
		}
		if pp.find && len(t) == 1 {
			switch t[0].Key {
			case "$slice":
				return pp.slice(f, path, t[0].Value)
			case "$elemMatch":
				if nested {
					return nil, errf(mongoerr.CodeBadValue, "Cannot use $elemMatch projection on a nested field.")
				}
				d, ok := t[0].Value.(bson.D)
				if !ok {
					return nil, errf(mongoerr.CodeBadValue, "elemMatch: Invalid argument, object required.")
				}
				m, err := CompileFilter(d)
				if err != nil {
					return nil, err
				}
				f.kind, f.elemMatch = pElemMatch, m
				if pp.mode == 2 {
					return nil, errf(31253, "Cannot do inclusion on field %s in exclusion projection", path)
				}
				pp.mode = 1
				return f, nil
			case "$meta":
				return nil, unsupported("$meta projection")
			}
		}
	}
	if isID {
		pp.idSeen = true
	}
	if pp.mode == 2 {
		return nil, errf(31252, "Cannot use expression other than $meta in exclusion projection")
	}
	pp.mode = 1
	expr, err := CompileExpr(v)
	if err != nil {
		return nil, err
	}
	f.kind, f.expr = pExpr, expr
	return f, nil
}

func (pp *projParser) slice(f *projField, path string, v any) (*projField, error) {
	f.kind = pSlice
	switch t := v.(type) {
	case bson.A:
		if len(t) != 2 {
			return nil, errf(28724, "First argument to $slice must be an array, but is of type: %s", typeNames[bsonType(v)])
		}
		skip, ok1 := exactInt64(t[0])
		n, ok2 := exactInt64(t[1])
		if !ok1 || !ok2 {
			return nil, errf(mongoerr.CodeBadValue, "$slice only supports numbers and [skip, limit] arrays")
		}
		if n <= 0 {
			return nil, errf(mongoerr.CodeBadValue, "$slice limit must be positive")
		}
		f.sliceSkip, f.sliceN = &skip, n
	default:
		n, ok := exactInt64(v)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "$slice only supports numbers and [skip, limit] arrays")
		}
		f.sliceN = n
	}
	return f, nil
}

// Apply projects doc. vars may be nil.
func (p *Projection) Apply(doc bson.D, vars *Vars) (bson.D, error) {
	if p.addFields {
		out := make(bson.D, len(doc))
		copy(out, doc)
		return applyExpressions(p.root, doc, out, vars)
	}
	var out bson.D
	if p.inclusion {
		out = p.includeDoc(p.root, doc)
		return applyExpressions(p.root, doc, out, vars)
	}
	return p.excludeDoc(p.root, doc), nil
}

// includeDoc keeps the fields of an inclusion node, in document order.
func (p *Projection) includeDoc(n *projNode, doc bson.D) bson.D {
	out := bson.D{}
	for _, e := range doc {
		f := n.get(e.Key)
		if f == nil {
			continue
		}
		switch f.kind {
		case pInclude:
			out = append(out, e)
		case pSub:
			if v := p.includeValue(f.sub, e.Value); !IsMissing(v) {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		case pSlice:
			out = append(out, bson.E{Key: e.Key, Value: sliceValue(f, e.Value)})
		case pElemMatch:
			if arr, ok := e.Value.(bson.A); ok {
				for _, el := range arr {
					if d, ok := el.(bson.D); ok && f.elemMatch.Match(d, nil) {
						out = append(out, bson.E{Key: e.Key, Value: bson.A{el}})
						break
					}
				}
			}
		}
	}
	return out
}

func (p *Projection) includeValue(n *projNode, v any) any {
	switch t := v.(type) {
	case bson.D:
		return p.includeDoc(n, t)
	case bson.A:
		out := bson.A{}
		for _, el := range t {
			if _, nestedArr := el.(bson.A); nestedArr && p.find {
				continue
			}
			if r := p.includeValue(n, el); !IsMissing(r) {
				out = append(out, r)
			}
		}
		return out
	}
	return missing
}

func (p *Projection) excludeDoc(n *projNode, doc bson.D) bson.D {
	out := make(bson.D, 0, len(doc))
	for _, e := range doc {
		f := n.get(e.Key)
		if f == nil {
			out = append(out, e)
			continue
		}
		switch f.kind {
		case pExclude:
		case pSub:
			out = append(out, bson.E{Key: e.Key, Value: p.excludeValue(f.sub, e.Value)})
		case pSlice:
			out = append(out, bson.E{Key: e.Key, Value: sliceValue(f, e.Value)})
		default:
			out = append(out, e)
		}
	}
	return out
}

func (p *Projection) excludeValue(n *projNode, v any) any {
	switch t := v.(type) {
	case bson.D:
		return p.excludeDoc(n, t)
	case bson.A:
		out := make(bson.A, 0, len(t))
		for _, el := range t {
			if _, nestedArr := el.(bson.A); nestedArr && p.find {
				out = append(out, el)
				continue
			}
			out = append(out, p.excludeValue(n, el))
		}
		return out
	}
	return v
}

func sliceValue(f *projField, v any) any {
	arr, ok := v.(bson.A)
	if !ok {
		return v
	}
	l := int64(len(arr))
	var from, to int64
	if f.sliceSkip == nil {
		if f.sliceN >= 0 {
			from, to = 0, min(f.sliceN, l)
		} else {
			from, to = max(l+f.sliceN, 0), l
		}
	} else {
		skip := *f.sliceSkip
		if skip < 0 {
			skip = max(l+skip, 0)
		}
		from = min(skip, l)
		to = min(from+f.sliceN, l)
	}
	out := make(bson.A, to-from)
	copy(out, arr[from:to])
	return out
}

// applyExpressions sets the computed fields of n (in specification order)
// on out, evaluating them against root.
func applyExpressions(n *projNode, root bson.D, out bson.D, vars *Vars) (bson.D, error) {
	for _, f := range n.fields {
		switch f.kind {
		case pExpr:
			v, err := f.expr.evalCurrent(root, root, vars)
			if err != nil {
				return nil, err
			}
			out = setField(out, f.name, v)
		case pSub:
			if !f.sub.computed() {
				continue
			}
			cur := any(missing)
			if x, ok := getField(out, f.name); ok {
				cur = x
			}
			v, err := applyExpressionsValue(f.sub, root, cur, vars)
			if err != nil {
				return nil, err
			}
			out = setField(out, f.name, v)
		}
	}
	return out, nil
}

func applyExpressionsValue(n *projNode, root bson.D, v any, vars *Vars) (any, error) {
	switch t := v.(type) {
	case bson.D:
		c := make(bson.D, len(t))
		copy(c, t)
		return applyExpressions(n, root, c, vars)
	case bson.A:
		out := make(bson.A, len(t))
		for i, el := range t {
			r, err := applyExpressionsValue(n, root, el, vars)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return applyExpressions(n, root, bson.D{}, vars)
}

// computed reports whether the subtree has computed fields.
func (n *projNode) computed() bool {
	for _, f := range n.fields {
		if f.kind == pExpr || (f.kind == pSub && f.sub.computed()) {
			return true
		}
	}
	return false
}

// setField replaces or appends a field; a missing value removes it.
func setField(d bson.D, name string, v any) bson.D {
	i := fieldIndex(d, name)
	if IsMissing(v) {
		if i < 0 {
			return d
		}
		out := make(bson.D, 0, len(d)-1)
		out = append(out, d[:i]...)
		return append(out, d[i+1:]...)
	}
	if i >= 0 {
		d[i].Value = v
		return d
	}
	return append(d, bson.E{Key: name, Value: v})
}
