package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// updateOp is one field of one update operator, e.g. $set: {"a.b": 1}.
type updateOp struct {
	name  string   // "$set"
	path  string   // "a.b"
	parts []string // ["a", "b"]
	arg   any      // normalized operand

	num       num       // $inc / $mul operand
	push      *pushSpec // $push
	addToSet  bson.A    // $addToSet elements (deduplicated)
	pull      *pullSpec // $pull
	pullAll   bson.A    // $pullAll
	popFirst  bool      // $pop: -1
	timestamp bool      // $currentDate {$type: "timestamp"}
	to        []string  // $rename target
	toPath    string    // $rename target, dotted
	bits      []bitOp   // $bit
}

type pushSpec struct {
	each     bson.A
	slice    *int64
	position *int64
	sort     *pushSort
}

// pushSort is $push's $sort: whole elements (fields nil) or by fields.
type pushSort struct {
	dir    int
	fields *Sort
}

type pullSpec struct {
	filter *Filter // object or wrapped form
	wrap   bool    // match {"": element} instead of element as a document
	eq     any     // equality form when filter is nil
}

type bitOp struct {
	op  string // and, or, xor
	val num
}

var updateOperatorNames = map[string]bool{
	"$set": true, "$unset": true, "$inc": true, "$mul": true, "$rename": true,
	"$setOnInsert": true, "$push": true, "$pull": true, "$pullAll": true,
	"$addToSet": true, "$pop": true, "$currentDate": true, "$min": true,
	"$max": true, "$bit": true,
}

func (u *Update) compileArrayFilters(filters bson.A) error {
	for _, f := range filters {
		d, ok := normalize(f).(bson.D)
		if !ok {
			return errf(mongoerr.CodeTypeMismatch, "ArrayFilters entry must be an object")
		}
		if len(d) == 0 {
			return errf(mongoerr.CodeFailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		id := ""
		for _, e := range d {
			first := e.Key
			if strings.HasPrefix(first, "$") {
				// $and / $or etc.: find the identifier inside.
				first = arrayFilterID(e.Value)
			}
			first, _, _ = strings.Cut(first, ".")
			if id == "" {
				id = first
			} else if id != first {
				return errf(mongoerr.CodeFailedToParse, "Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, first)
			}
		}
		if id == "" {
			return errf(mongoerr.CodeFailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		if _, dup := u.arrayFilters[id]; dup {
			return errf(mongoerr.CodeFailedToParse, "Found multiple array filters with the same top-level field name %s", id)
		}
		m, err := CompileFilter(d)
		if err != nil {
			return err
		}
		if u.arrayFilters == nil {
			u.arrayFilters = map[string]*Filter{}
		}
		u.arrayFilters[id] = m
	}
	return nil
}

func arrayFilterID(v any) string {
	switch t := v.(type) {
	case bson.A:
		for _, x := range t {
			if s := arrayFilterID(x); s != "" {
				return s
			}
		}
	case bson.D:
		for _, e := range t {
			if !strings.HasPrefix(e.Key, "$") {
				return e.Key
			}
			if s := arrayFilterID(e.Value); s != "" {
				return s
			}
		}
	}
	return ""
}

func (u *Update) compileOperators(d bson.D) error {
	usedFilters := map[string]bool{}
	var all [][]string
	for _, e := range d {
		if !updateOperatorNames[e.Key] {
			return errf(mongoerr.CodeFailedToParse, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", e.Key)
		}
		fields, ok := e.Value.(bson.D)
		if !ok {
			return errf(mongoerr.CodeFailedToParse, "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s: %s}",
				typeNames[bsonType(e.Value)], e.Key, describe(e.Value))
		}
		// Since MongoDB 5.0 an empty operand ({$set: {}}) is a no-op.
		for _, f := range fields {
			op, err := u.compileOp(e.Key, f.Key, f.Value, usedFilters)
			if err != nil {
				return err
			}
			for _, p := range [][]string{op.parts, op.to} {
				if p == nil {
					continue
				}
				if err := checkConflict(all, p); err != nil {
					return err
				}
				all = append(all, p)
			}
			u.ops = append(u.ops, op)
		}
	}
	for id := range u.arrayFilters {
		if !usedFilters[id] {
			return errf(mongoerr.CodeFailedToParse, "The array filter for identifier '%s' was not used in the update %s", id, describe(d))
		}
	}
	sortOps(u.ops)
	return nil
}

// checkConflict reports error 40 when p equals or is a prefix of (or has as
// a prefix) an already used path.
func checkConflict(used [][]string, p []string) error {
	for _, q := range used {
		n := min(len(p), len(q))
		same := true
		for i := 0; i < n; i++ {
			if p[i] != q[i] {
				same = false
				break
			}
		}
		if same {
			return errf(mongoerr.CodeConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'",
				strings.Join(p, "."), strings.Join(p[:n], "."))
		}
	}
	return nil
}

// parseUpdatePath validates a dotted update path.
func (u *Update) parseUpdatePath(path string, used map[string]bool) ([]string, error) {
	if path == "" {
		return nil, errf(mongoerr.CodeEmptyFieldName, "An empty update path is not valid.")
	}
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if p == "" {
			return nil, errf(mongoerr.CodeEmptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", path)
		}
		if !strings.HasPrefix(p, "$") {
			continue
		}
		switch {
		case p == "$":
			if i == 0 {
				return nil, errf(mongoerr.CodeBadValue, "Cannot have positional (i.e. '$') element in the first position in path '%s'", path)
			}
			u.positional = true
		case p == "$[]":
			if i == 0 {
				return nil, errf(mongoerr.CodeBadValue, "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", path)
			}
		case strings.HasPrefix(p, "$[") && strings.HasSuffix(p, "]"):
			if i == 0 {
				return nil, errf(mongoerr.CodeBadValue, "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", path)
			}
			id := p[2 : len(p)-1]
			if _, ok := u.arrayFilters[id]; !ok {
				return nil, errf(mongoerr.CodeBadValue, "No array filter found for identifier '%s' in path '%s'", id, path)
			}
			used[id] = true
		default:
			return nil, errf(mongoerr.CodeDollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", p, path)
		}
	}
	return parts, nil
}

func (u *Update) compileOp(name, path string, arg any, used map[string]bool) (*updateOp, error) {
	parts, err := u.parseUpdatePath(path, used)
	if err != nil {
		return nil, err
	}
	op := &updateOp{name: name, path: path, parts: parts, arg: arg}
	switch name {
	case "$inc", "$mul":
		n, ok := toNum(arg)
		if !ok {
			verb := "increment"
			if name == "$mul" {
				verb = "multiply"
			}
			return nil, errf(mongoerr.CodeTypeMismatch, "Cannot %s with non-numeric argument: {%s: %s}", verb, path, describe(arg))
		}
		op.num = n
	case "$rename":
		to, ok := arg.(string)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "The 'to' field for $rename must be a string: %s: %s", path, describe(arg))
		}
		if to == path {
			return nil, errf(mongoerr.CodeBadValue, "The source and target field for $rename must differ: %s: %q", path, to)
		}
		if strings.HasPrefix(to, path+".") || strings.HasPrefix(path, to+".") {
			return nil, errf(mongoerr.CodeBadValue, "The source and target field for $rename must not be on the same path: %s: %q", path, to)
		}
		toParts, err := u.parseUpdatePath(to, used)
		if err != nil {
			return nil, err
		}
		for _, p := range append(append([]string{}, parts...), toParts...) {
			if strings.HasPrefix(p, "$") {
				return nil, errf(mongoerr.CodeBadValue, "The source field for $rename may not be dynamic: %s", path)
			}
		}
		op.to, op.toPath = toParts, to
	case "$push":
		spec, err := compilePush(arg)
		if err != nil {
			return nil, err
		}
		op.push = spec
	case "$addToSet":
		elems := bson.A{arg}
		if d, ok := arg.(bson.D); ok && len(d) > 0 && d[0].Key == "$each" {
			each, ok := d[0].Value.(bson.A)
			if !ok {
				return nil, errf(mongoerr.CodeTypeMismatch, "The argument to $each in $addToSet must be an array but it was of type %s", typeNames[bsonType(d[0].Value)])
			}
			if len(d) > 1 {
				return nil, errf(mongoerr.CodeBadValue, "Found unexpected fields after $each in $addToSet: %s", describe(d))
			}
			elems = nil
			for _, x := range each {
				dup := false
				for _, y := range elems {
					if Compare(x, y) == 0 {
						dup = true
						break
					}
				}
				if !dup {
					elems = append(elems, x)
				}
			}
		}
		op.addToSet = elems
	case "$pull":
		spec, err := compilePull(arg)
		if err != nil {
			return nil, err
		}
		op.pull = spec
	case "$pullAll":
		a, ok := arg.(bson.A)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "$pullAll requires an array argument but was given a %s", typeNames[bsonType(arg)])
		}
		op.pullAll = a
	case "$pop":
		n, ok := toNum(arg)
		if !ok {
			return nil, errf(mongoerr.CodeFailedToParse, "Expected a number in: %s: %s", path, describe(arg))
		}
		switch compareNum(n, num{kind: kInt32, i: 1}) {
		case 0:
		default:
			if compareNum(n, num{kind: kInt32, i: -1}) != 0 {
				return nil, errf(mongoerr.CodeFailedToParse, "$pop expects 1 or -1, found: %s", describe(arg))
			}
			op.popFirst = true
		}
	case "$currentDate":
		switch t := arg.(type) {
		case bool:
		case bson.D:
			ok := len(t) == 1 && t[0].Key == "$type"
			if ok {
				s, _ := t[0].Value.(string)
				switch s {
				case "date":
				case "timestamp":
					op.timestamp = true
				default:
					return nil, errf(mongoerr.CodeBadValue, "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
				}
			} else {
				return nil, errf(mongoerr.CodeBadValue, "The only valid field of the option is '$type': {$currentDate: {field : {$type: 'date/timestamp'}}}")
			}
		default:
			return nil, errf(mongoerr.CodeBadValue, "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).", describe(arg))
		}
	case "$bit":
		d, ok := arg.(bson.D)
		if !ok {
			return nil, errf(mongoerr.CodeBadValue, "The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}", typeNames[bsonType(arg)])
		}
		for _, e := range d {
			switch e.Key {
			case "and", "or", "xor":
			default:
				return nil, errf(mongoerr.CodeBadValue, "The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s: %s}", e.Key, e.Key, describe(e.Value))
			}
			n, ok := toNum(e.Value)
			if !ok || n.kind > kInt64 {
				return nil, errf(mongoerr.CodeBadValue, "The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s: %s}", typeNames[bsonType(e.Value)], e.Key, describe(e.Value))
			}
			op.bits = append(op.bits, bitOp{op: e.Key, val: n})
		}
		if len(op.bits) == 0 {
			return nil, errf(mongoerr.CodeBadValue, "You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
		}
	}
	return op, nil
}

func compilePush(arg any) (*pushSpec, error) {
	d, ok := arg.(bson.D)
	if !ok || len(d) == 0 || fieldIndex(d, "$each") < 0 {
		return &pushSpec{each: bson.A{arg}}, nil
	}
	spec := &pushSpec{}
	for _, e := range d {
		switch e.Key {
		case "$each":
			a, ok := e.Value.(bson.A)
			if !ok {
				return nil, errf(mongoerr.CodeBadValue, "The argument to $each in $push must be an array but it was of type: %s", typeNames[bsonType(e.Value)])
			}
			spec.each = a
		case "$slice":
			n, ok := exactInt64(e.Value)
			if !ok {
				return nil, errf(mongoerr.CodeBadValue, "The value for $slice must be an integer value but was given type: %s", typeNames[bsonType(e.Value)])
			}
			spec.slice = &n
		case "$position":
			n, ok := exactInt64(e.Value)
			if !ok {
				return nil, errf(mongoerr.CodeBadValue, "The value for $position must be an integer value, not of type: %s", typeNames[bsonType(e.Value)])
			}
			spec.position = &n
		case "$sort":
			s, err := compilePushSort(e.Value)
			if err != nil {
				return nil, err
			}
			spec.sort = s
		default:
			return nil, errf(mongoerr.CodeBadValue, "Unrecognized clause in $push: %s", e.Key)
		}
	}
	return spec, nil
}

func compilePushSort(v any) (*pushSort, error) {
	if n, ok := exactInt64(v); ok && (n == 1 || n == -1) {
		return &pushSort{dir: int(n)}, nil
	}
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 {
		return nil, errf(mongoerr.CodeBadValue, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	}
	for _, e := range d {
		if n, ok := exactInt64(e.Value); !ok || (n != 1 && n != -1) {
			return nil, errf(mongoerr.CodeBadValue, "The $sort element value must be either 1 or -1")
		}
		if strings.HasPrefix(e.Key, "$") || e.Key == "" || strings.HasSuffix(e.Key, ".") || strings.HasPrefix(e.Key, ".") {
			return nil, errf(mongoerr.CodeBadValue, "The $sort field is a dotted field but has an empty part: %s", e.Key)
		}
	}
	s, err := CompileSort(d)
	if err != nil {
		return nil, err
	}
	return &pushSort{fields: s}, nil
}

func compilePull(arg any) (*pullSpec, error) {
	switch t := arg.(type) {
	case bson.D:
		if len(t) > 0 && strings.HasPrefix(t[0].Key, "$") && !isTopLevelOperator(t[0].Key) {
			f, err := CompileFilter(bson.D{{Key: "", Value: t}})
			if err != nil {
				return nil, err
			}
			return &pullSpec{filter: f, wrap: true}, nil
		}
		f, err := CompileFilter(t)
		if err != nil {
			return nil, err
		}
		return &pullSpec{filter: f}, nil
	case bson.Regex:
		f, err := CompileFilter(bson.D{{Key: "", Value: t}})
		if err != nil {
			return nil, err
		}
		return &pullSpec{filter: f, wrap: true}, nil
	}
	return &pullSpec{eq: arg}, nil
}

// isTopLevelOperator reports query operators that do not apply to a path.
func isTopLevelOperator(name string) bool {
	switch name {
	case "$and", "$or", "$nor", "$where", "$expr", "$comment", "$text", "$jsonSchema", "$alwaysTrue", "$alwaysFalse", "$sampleRate":
		return true
	}
	return false
}

// exactInt64 converts a number with an exact integral value to int64.
func exactInt64(v any) (int64, bool) {
	n, ok := toNum(v)
	if !ok {
		return 0, false
	}
	switch n.kind {
	case kInt32, kInt64:
		return n.i, true
	case kDouble:
		if n.f != n.f || n.f < -9.2233720368547758e18 || n.f >= 9.2233720368547758e18 || n.f != float64(int64(n.f)) {
			return 0, false
		}
		return int64(n.f), true
	}
	f := decToFloat(n.d)
	if f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}
