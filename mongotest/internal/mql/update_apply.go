package mql

import (
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// pathComp is one component of a concrete path in a document.
type pathComp struct {
	name  string
	index bool // an array index (reported as int32 in disambiguatedPaths)
}

type logKind int

const (
	logUpdated logKind = iota
	logCreated
	logDeleted
)

type logEntry struct {
	kind  logKind
	comps []pathComp
}

// applier holds the state of one operator-update application.
type applier struct {
	root    any // bson.D, privately owned (deep copy of the input)
	orig    bson.D
	vars    *Vars
	insert  bool
	pos     int
	log     []logEntry
	u       *Update
	now     bson.DateTime
	nowSet  bool
	tsCount uint32
}

const maxArrayBackfill = 1500000

func (u *Update) applyOperators(doc bson.D, vars *Vars, insert bool, pos int) (bson.D, *UpdateDescription, error) {
	a := &applier{root: cloneValue(doc), orig: doc, vars: vars, insert: insert, pos: pos, u: u}
	if a.root == nil {
		a.root = bson.D{}
	}
	for _, op := range u.ops {
		if op.name == "$setOnInsert" && !insert {
			continue
		}
		paths, err := a.expand(op.parts)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range paths {
			if err := a.applyOp(op, p); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(a.log) == 0 {
		return doc, &UpdateDescription{}, nil
	}
	out := a.root.(bson.D)
	desc := a.description()
	if insert {
		// An upserted document stores _id first, like every insert.
		out = moveIDFirst(out)
	}
	return out, desc, nil
}

// cloneValue deep-copies documents and arrays (normalizing Go values).
func cloneValue(v any) any {
	switch t := v.(type) {
	case bson.D:
		if t == nil {
			return bson.D{}
		}
		out := make(bson.D, len(t))
		for i, e := range t {
			out[i] = bson.E{Key: e.Key, Value: cloneValue(e.Value)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(t))
		for i, e := range t {
			out[i] = cloneValue(e)
		}
		return out
	}
	if needsNorm(v) {
		return cloneValue(normalize(v))
	}
	return v
}

// expand resolves positional components ("$", "$[]", "$[id]") against the
// current document into concrete paths.
func (a *applier) expand(parts []string) ([][]string, error) {
	dyn := false
	for _, p := range parts {
		if strings.HasPrefix(p, "$") {
			dyn = true
			break
		}
	}
	if !dyn {
		return [][]string{parts}, nil
	}
	var out [][]string
	var walk func(prefix []string, v any, rest []string) error
	walk = func(prefix []string, v any, rest []string) error {
		if len(rest) == 0 {
			out = append(out, append([]string(nil), prefix...))
			return nil
		}
		p := rest[0]
		if !strings.HasPrefix(p, "$") {
			var next any = missing
			switch t := v.(type) {
			case bson.D:
				if x, ok := getField(t, p); ok {
					next = x
				}
			case bson.A:
				if n, ok := arrayIndex(p); ok && n < len(t) {
					next = t[n]
				}
			}
			return walk(append(prefix, p), next, rest[1:])
		}
		if p == "$" {
			if a.pos < 0 || a.insert {
				return errf(mongoerr.CodeBadValue, "The positional operator did not find the match needed from the query.")
			}
			var next any = missing
			if t, ok := v.(bson.A); ok && a.pos < len(t) {
				next = t[a.pos]
			}
			return walk(append(prefix, strconv.Itoa(a.pos)), next, rest[1:])
		}
		arr, ok := v.(bson.A)
		if !ok {
			if IsMissing(v) {
				return errf(mongoerr.CodeBadValue, "The path '%s' must exist in the document in order to apply array updates.", strings.Join(prefix, "."))
			}
			return errf(mongoerr.CodeBadValue, "Cannot apply array updates to non-array element %s: %s", prefix[len(prefix)-1], describe(v))
		}
		var filter *Filter
		id := ""
		if p != "$[]" {
			id = p[2 : len(p)-1]
			filter = a.u.arrayFilters[id]
		}
		for i, el := range arr {
			if filter != nil && !filter.Match(bson.D{{Key: id, Value: el}}, a.vars) {
				continue
			}
			if err := walk(append(prefix, strconv.Itoa(i)), el, rest[1:]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(nil, a.root, parts); err != nil {
		return nil, err
	}
	return out, nil
}

// navResult is where a path leads in the document.
type navResult struct {
	found  bool
	ref    *any       // the element, when found
	parent *any       // container (or blocking scalar) at comps' end
	depth  int        // components resolved
	comps  []pathComp // resolved components
	// blocked: the value at depth-1 is not a container (or an array
	// reached with a non-numeric component).
	blocked bool
}

func (a *applier) nav(parts []string) navResult {
	cur := &a.root
	comps := make([]pathComp, 0, len(parts))
	for i, p := range parts {
		switch t := (*cur).(type) {
		case bson.D:
			j := fieldIndex(t, p)
			if j < 0 {
				return navResult{parent: cur, depth: i, comps: comps}
			}
			comps = append(comps, pathComp{name: p})
			cur = &t[j].Value
		case bson.A:
			n, ok := arrayIndex(p)
			if !ok {
				return navResult{parent: cur, depth: i, comps: comps, blocked: true}
			}
			if n >= len(t) {
				return navResult{parent: cur, depth: i, comps: comps}
			}
			comps = append(comps, pathComp{name: p, index: true})
			cur = &t[n]
		default:
			return navResult{parent: cur, depth: i, comps: comps, blocked: true}
		}
	}
	return navResult{found: true, ref: cur, depth: len(parts), comps: comps}
}

// notViable is MongoDB's PathNotViable error for creating parts[depth]
// below a value that cannot hold it.
func notViable(parts []string, n navResult) error {
	if n.depth == 0 {
		return errf(mongoerr.CodePathNotViable, "Cannot create field '%s' in element {}", parts[0])
	}
	return errf(mongoerr.CodePathNotViable, "Cannot create field '%s' in element {%s: %s}", parts[n.depth], parts[n.depth-1], describe(*n.parent))
}

// create inserts value at parts (which does not exist), creating
// intermediate documents, and logs the creation.
func (a *applier) create(parts []string, n navResult, value any) error {
	if n.blocked {
		return notViable(parts, n)
	}
	nested := value
	for k := len(parts) - 1; k > n.depth; k-- {
		nested = bson.D{{Key: parts[k], Value: nested}}
	}
	name := parts[n.depth]
	comp := pathComp{name: name}
	switch t := (*n.parent).(type) {
	case bson.D:
		*n.parent = append(t, bson.E{Key: name, Value: nested})
	case bson.A:
		idx, _ := arrayIndex(name)
		if idx-len(t) > maxArrayBackfill {
			return errf(mongoerr.CodeBadValue, "can't backfill array to larger than 1500000 elements")
		}
		for len(t) < idx {
			t = append(t, nil)
		}
		*n.parent = append(t, nested)
		comp.index = true
	default:
		return notViable(parts, n)
	}
	comps := append(append([]pathComp(nil), n.comps...), comp)
	a.log = append(a.log, logEntry{kind: logCreated, comps: comps})
	return nil
}

func (a *applier) logged(kind logKind, comps []pathComp) {
	a.log = append(a.log, logEntry{kind: kind, comps: append([]pathComp(nil), comps...)})
}

// checkID enforces _id immutability for an op on parts that changed
// something.
func (a *applier) checkID(op *updateOp, parts []string, setsValue bool) error {
	if parts[0] != "_id" {
		return nil
	}
	oldID, had := getField(a.orig, "_id")
	if !had {
		return nil
	}
	newID, has := getField(a.root.(bson.D), "_id")
	if has && Compare(oldID, newID) == 0 && setsValue {
		return nil
	}
	if setsValue && has {
		return errf(mongoerr.CodeImmutableField, "Updating the path '%s' to %s: %s would modify the immutable field '_id'",
			strings.Join(parts, "."), parts[len(parts)-1], describe(lookupParts(a.root, parts)))
	}
	return errf(mongoerr.CodeImmutableField, "Performing an update on the path '%s' would modify the immutable field '_id'", strings.Join(parts, "."))
}

func lookupParts(v any, parts []string) any {
	for _, p := range parts {
		switch t := v.(type) {
		case bson.D:
			x, ok := getField(t, p)
			if !ok {
				return missing
			}
			v = x
		case bson.A:
			n, ok := arrayIndex(p)
			if !ok || n >= len(t) {
				return missing
			}
			v = t[n]
		default:
			return missing
		}
	}
	return v
}

func (a *applier) idDoc() string {
	if id, ok := getField(a.orig, "_id"); ok {
		return "_id: " + describe(id)
	}
	return "no id"
}

func (a *applier) currentDate() bson.DateTime {
	if !a.nowSet {
		if a.vars != nil && a.vars.Now != 0 {
			a.now = a.vars.Now
		} else {
			a.now = bson.NewDateTimeFromTime(time.Now())
		}
		a.nowSet = true
	}
	return a.now
}

func (a *applier) applyOp(op *updateOp, parts []string) error {
	n := a.nav(parts)
	switch op.name {
	case "$set", "$setOnInsert":
		return a.setValue(op, parts, n, op.arg)
	case "$unset":
		if !n.found {
			return nil
		}
		if err := a.unsetAt(n, parts); err != nil {
			return err
		}
		return a.checkID(op, parts, false)
	case "$inc", "$mul":
		var cur any
		if n.found {
			cur = *n.ref
			if !isNumber(cur) {
				return errf(mongoerr.CodeTypeMismatch, "Cannot apply %s to a value of non-numeric type. {%s} has the field '%s' of non-numeric type %s",
					op.name, a.idDoc(), parts[len(parts)-1], typeNames[bsonType(cur)])
			}
		}
		var res any
		if op.name == "$inc" {
			if !n.found {
				res = op.num.value()
			} else {
				r, ok := addNums(mustNum(cur), op.num)
				if !ok {
					return errf(mongoerr.CodeBadValue, "Failed to apply $inc operations to current value (%s) for document {%s}", describeNumTyped(cur), a.idDoc())
				}
				res = r
			}
		} else {
			if !n.found {
				res = zeroLike(op.num)
			} else {
				r, ok := mulNums(mustNum(cur), op.num)
				if !ok {
					return errf(mongoerr.CodeBadValue, "Failed to apply $mul operations to current value (%s) for document {%s}", describeNumTyped(cur), a.idDoc())
				}
				res = r
			}
		}
		return a.setComputed(op, parts, n, res, false)
	case "$min", "$max":
		if n.found {
			c := CompareCollated(*n.ref, op.arg, collationOf(a.vars))
			if (op.name == "$min" && c <= 0) || (op.name == "$max" && c >= 0) {
				return nil
			}
		}
		return a.setComputed(op, parts, n, op.arg, true)
	case "$currentDate":
		var v any = a.currentDate()
		if op.timestamp {
			v = a.currentTimestamp()
		}
		return a.setComputed(op, parts, n, v, false)
	case "$rename":
		return a.rename(op, parts, n)
	case "$push":
		return a.push(op, parts, n)
	case "$addToSet":
		return a.addToSet(op, parts, n)
	case "$pull", "$pullAll":
		return a.pull(op, parts, n)
	case "$pop":
		return a.pop(op, parts, n)
	case "$bit":
		return a.bit(op, parts, n)
	}
	return errf(mongoerr.CodeFailedToParse, "Unknown modifier: %s", op.name)
}

func (a *applier) currentTimestamp() bson.Timestamp {
	if a.vars != nil && a.vars.ClusterTime.T != 0 {
		return a.vars.ClusterTime
	}
	a.tsCount++
	return bson.Timestamp{T: uint32(a.currentDate() / 1000), I: a.tsCount}
}

// setValue implements $set: a no-op when the value is identical.
func (a *applier) setValue(op *updateOp, parts []string, n navResult, v any) error {
	if n.found && identical(*n.ref, v) {
		return nil
	}
	return a.setComputed(op, parts, n, v, true)
}

// setComputed stores v at parts (existing or created) and logs it.
func (a *applier) setComputed(op *updateOp, parts []string, n navResult, v any, objectSetter bool) error {
	v = cloneValue(v)
	if n.found {
		if identical(*n.ref, v) {
			return nil
		}
		*n.ref = v
		a.logged(logUpdated, n.comps)
		return a.checkID(op, parts, objectSetter)
	}
	if err := a.create(parts, n, v); err != nil {
		return err
	}
	if parts[0] == "_id" {
		if _, had := getField(a.orig, "_id"); had && !a.insert {
			return errf(mongoerr.CodeImmutableField, "Updating the path '%s' to %s: %s would modify the immutable field '_id'",
				strings.Join(parts, "."), parts[len(parts)-1], describe(v))
		}
	}
	return nil
}

// unsetAt removes the element (sets null inside arrays).
func (a *applier) unsetAt(n navResult, parts []string) error {
	parentRef, _ := a.parentOf(parts)
	switch t := (*parentRef).(type) {
	case bson.D:
		j := fieldIndex(t, parts[len(parts)-1])
		out := make(bson.D, 0, len(t)-1)
		out = append(out, t[:j]...)
		*parentRef = append(out, t[j+1:]...)
		a.logged(logDeleted, n.comps)
	case bson.A:
		*n.ref = nil
		a.logged(logUpdated, n.comps)
	}
	return nil
}

// parentOf returns a reference to the container of an existing path.
func (a *applier) parentOf(parts []string) (*any, bool) {
	if len(parts) == 1 {
		return &a.root, true
	}
	n := a.nav(parts[:len(parts)-1])
	return n.ref, n.found
}

func (a *applier) rename(op *updateOp, parts []string, n navResult) error {
	if !n.found {
		if n.blocked && n.depth > 0 {
			if _, isArr := (*n.parent).(bson.A); isArr {
				return errf(mongoerr.CodeBadValue, "The source field cannot be an array element, '%s' in doc with %s: %s", op.path, parts[n.depth-1], describe(*n.parent))
			}
		}
		return nil
	}
	for _, c := range n.comps {
		if c.index {
			return errf(mongoerr.CodeBadValue, "The source field cannot be an array element, '%s' in doc with %s", op.path, a.idDoc())
		}
	}
	dn := a.nav(op.to)
	for _, c := range dn.comps {
		if c.index {
			return errf(mongoerr.CodeBadValue, "The destination field cannot be an array element, '%s' in doc with %s", op.toPath, a.idDoc())
		}
	}
	if !dn.found && !dn.blocked {
		if _, isArr := (*dn.parent).(bson.A); isArr {
			return errf(mongoerr.CodeBadValue, "The destination field cannot be an array element, '%s' in doc with %s", op.toPath, a.idDoc())
		}
	}
	if parts[0] == "_id" || op.to[0] == "_id" {
		p := parts
		if op.to[0] == "_id" {
			p = op.to
		}
		return errf(mongoerr.CodeImmutableField, "Performing an update on the path '%s' would modify the immutable field '_id'", strings.Join(p, "."))
	}
	v := *n.ref
	if err := a.unsetAt(n, parts); err != nil {
		return err
	}
	dn = a.nav(op.to)
	if dn.found {
		*dn.ref = v
		a.logged(logUpdated, dn.comps)
		return nil
	}
	return a.create(op.to, dn, v)
}

// arrayAt returns the array at an existing path or an error naming the
// operator.
func (a *applier) arrayAt(op *updateOp, parts []string, n navResult) (bson.A, error) {
	arr, ok := (*n.ref).(bson.A)
	if ok {
		return arr, nil
	}
	switch op.name {
	case "$push":
		return nil, errf(mongoerr.CodeBadValue, "The field '%s' must be an array but is of type %s in document {%s}", op.path, typeNames[bsonType(*n.ref)], a.idDoc())
	case "$addToSet":
		return nil, errf(mongoerr.CodeBadValue, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", parts[len(parts)-1], typeNames[bsonType(*n.ref)])
	case "$pull", "$pullAll":
		return nil, errf(mongoerr.CodeBadValue, "Cannot apply %s to a non-array value", op.name)
	}
	return nil, errf(mongoerr.CodeTypeMismatch, "Path '%s' contains an element of non-array type '%s'", op.path, typeNames[bsonType(*n.ref)])
}

func (a *applier) push(op *updateOp, parts []string, n navResult) error {
	spec := op.push
	var old bson.A
	if n.found {
		arr, err := a.arrayAt(op, parts, n)
		if err != nil {
			return err
		}
		old = arr
	}
	res := make(bson.A, 0, len(old)+len(spec.each))
	each := cloneValue(spec.each).(bson.A)
	pos := int64(len(old))
	if spec.position != nil {
		pos = *spec.position
		if pos < 0 {
			pos += int64(len(old))
			if pos < 0 {
				pos = 0
			}
		}
		if pos > int64(len(old)) {
			pos = int64(len(old))
		}
	}
	res = append(res, old[:pos]...)
	res = append(res, each...)
	res = append(res, old[pos:]...)
	appendOnly := pos == int64(len(old))
	if spec.sort != nil {
		sortArray(res, spec.sort, collationOf(a.vars))
		appendOnly = false
	}
	if spec.slice != nil {
		s := *spec.slice
		if s >= 0 && int64(len(res)) > s {
			res = res[:s]
			appendOnly = false
		} else if s < 0 && int64(len(res)) > -s {
			res = res[int64(len(res))+s:]
			appendOnly = false
		}
	}
	if !n.found {
		return a.create(parts, n, res)
	}
	if appendOnly {
		if len(each) == 0 {
			return nil
		}
		*n.ref = res
		for i := len(old); i < len(res); i++ {
			comps := append(append([]pathComp(nil), n.comps...), pathComp{name: strconv.Itoa(i), index: true})
			a.log = append(a.log, logEntry{kind: logUpdated, comps: comps})
		}
		return nil
	}
	if identical(old, res) {
		return nil
	}
	*n.ref = res
	a.logged(logUpdated, n.comps)
	return nil
}

// sortArray implements $push's $sort.
func sortArray(arr bson.A, s *pushSort, coll *Collation) {
	fields := s.fields.WithCollation(coll)
	sort.SliceStable(arr, func(i, j int) bool {
		if fields == nil {
			c := CompareCollated(arr[i], arr[j], coll)
			return c*s.dir < 0
		}
		di, _ := arr[i].(bson.D)
		dj, _ := arr[j].(bson.D)
		return fields.Less(di, dj)
	})
}

func (a *applier) addToSet(op *updateOp, parts []string, n navResult) error {
	if !n.found {
		return a.create(parts, n, cloneValue(op.addToSet))
	}
	arr, err := a.arrayAt(op, parts, n)
	if err != nil {
		return err
	}
	res := arr
	added := false
	for _, x := range op.addToSet {
		dup := false
		for _, y := range res {
			if CompareCollated(x, y, collationOf(a.vars)) == 0 {
				dup = true
				break
			}
		}
		if !dup {
			if !added {
				res = append(bson.A(nil), arr...)
				added = true
			}
			res = append(res, cloneValue(x))
		}
	}
	if !added {
		return nil
	}
	*n.ref = res
	a.logged(logUpdated, n.comps)
	return nil
}

func (a *applier) pull(op *updateOp, parts []string, n navResult) error {
	if !n.found {
		if n.blocked && n.depth > 0 {
			if _, isArr := (*n.parent).(bson.A); !isArr {
				return notViable(parts, n)
			}
		}
		return nil
	}
	arr, err := a.arrayAt(op, parts, n)
	if err != nil {
		return err
	}
	res := make(bson.A, 0, len(arr))
	for _, el := range arr {
		if !a.pullMatches(op, el) {
			res = append(res, el)
		}
	}
	if len(res) == len(arr) {
		return nil
	}
	*n.ref = res
	a.logged(logUpdated, n.comps)
	return nil
}

func (a *applier) pullMatches(op *updateOp, el any) bool {
	if op.name == "$pullAll" {
		for _, x := range op.pullAll {
			if CompareCollated(el, x, collationOf(a.vars)) == 0 {
				return true
			}
		}
		return false
	}
	p := op.pull
	switch {
	case p.filter == nil:
		return CompareCollated(el, p.eq, collationOf(a.vars)) == 0
	case p.wrap:
		return p.filter.Match(bson.D{{Key: "", Value: el}}, a.vars)
	}
	d, ok := el.(bson.D)
	if !ok {
		return false
	}
	return p.filter.Match(d, a.vars)
}

func (a *applier) pop(op *updateOp, parts []string, n navResult) error {
	if !n.found {
		if n.blocked && n.depth > 0 {
			if _, isArr := (*n.parent).(bson.A); !isArr {
				return notViable(parts, n)
			}
		}
		return nil
	}
	arr, err := a.arrayAt(op, parts, n)
	if err != nil {
		return err
	}
	if len(arr) == 0 {
		return nil
	}
	if op.popFirst {
		*n.ref = append(bson.A(nil), arr[1:]...)
	} else {
		*n.ref = append(bson.A(nil), arr[:len(arr)-1]...)
	}
	a.logged(logUpdated, n.comps)
	return nil
}

func (a *applier) bit(op *updateOp, parts []string, n navResult) error {
	var cur num
	if n.found {
		c, ok := toNum(*n.ref)
		if !ok || c.kind > kInt64 {
			return errf(mongoerr.CodeBadValue, "Cannot apply $bit to a value of non-integral type.{%s} has the field %s of non-integer type %s",
				a.idDoc(), parts[len(parts)-1], typeNames[bsonType(*n.ref)])
		}
		cur = c
	} else {
		cur = num{kind: kInt32}
	}
	for _, b := range op.bits {
		kind := max(cur.kind, b.val.kind)
		switch b.op {
		case "and":
			cur.i &= b.val.i
		case "or":
			cur.i |= b.val.i
		case "xor":
			cur.i ^= b.val.i
		}
		cur.kind = kind
		if kind == kInt32 {
			cur.i = int64(int32(cur.i))
		}
	}
	return a.setComputed(op, parts, n, cur.value(), false)
}

func mustNum(v any) num {
	n, _ := toNum(v)
	return n
}

func zeroLike(n num) any {
	switch n.kind {
	case kInt32:
		return int32(0)
	case kInt64:
		return int64(0)
	case kDouble:
		return 0.0
	}
	z, _ := bson.ParseDecimal128("0")
	return z
}

func describeNumTyped(v any) string {
	switch t := v.(type) {
	case int32:
		return "(NumberInt)" + strconv.Itoa(int(t))
	case int64:
		return "(NumberLong)" + strconv.FormatInt(t, 10)
	case float64:
		return "(NumberDouble)" + strconv.FormatFloat(t, 'g', -1, 64)
	}
	return describe(v)
}

// addNums adds with MongoDB's promotion rules: int32 overflows to int64;
// int64 overflow is an error (ok=false); doubles and decimals as usual.
func addNums(x, y num) (any, bool) {
	k := max(x.kind, y.kind)
	switch k {
	case kInt32, kInt64:
		s := x.i + y.i
		if (s > x.i) != (y.i > 0) {
			return nil, false
		}
		if k == kInt32 && s >= math.MinInt32 && s <= math.MaxInt32 {
			return int32(s), true
		}
		return s, true
	case kDouble:
		return x.float() + y.float(), true
	}
	return decimalArith('+', x, y), true
}

func mulNums(x, y num) (any, bool) {
	k := max(x.kind, y.kind)
	switch k {
	case kInt32, kInt64:
		if x.i == 0 || y.i == 0 {
			if k == kInt32 {
				return int32(0), true
			}
			return int64(0), true
		}
		p := x.i * y.i
		if p/y.i != x.i || (x.i == -1 && y.i == math.MinInt64) || (y.i == -1 && x.i == math.MinInt64) {
			return nil, false
		}
		if k == kInt32 && p >= math.MinInt32 && p <= math.MaxInt32 {
			return int32(p), true
		}
		return p, true
	case kDouble:
		return x.float() * y.float(), true
	}
	return decimalArith('*', x, y), true
}

// decimalArith computes x op y in decimal.
func decimalArith(op byte, x, y num) bson.Decimal128 {
	a, b := exactOf(x), exactOf(y)
	if a.nan || b.nan || a.inf != 0 || b.inf != 0 {
		f := x.float()
		g := y.float()
		var r float64
		if op == '+' {
			r = f + g
		} else {
			r = f * g
		}
		d, _ := bson.ParseDecimal128(formatSpecial(r))
		return d
	}
	var r = new(big.Rat)
	if op == '+' {
		r.Add(a.r, b.r)
	} else {
		r.Mul(a.r, b.r)
	}
	return ratToDecimal(r)
}

func formatSpecial(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
