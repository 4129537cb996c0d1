package mql

import (
	"cmp"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// UpdateKind says which of MongoDB's three update forms an Update is.
type UpdateKind int

const (
	// UpdateOperators is an update-operator document ({$set: ...}).
	UpdateOperators UpdateKind = iota + 1
	// UpdateReplacement is a replacement document.
	UpdateReplacement
	// UpdatePipeline is an aggregation-pipeline update (an array of stages).
	UpdatePipeline
)

func (k UpdateKind) String() string {
	switch k {
	case UpdateOperators:
		return "operators"
	case UpdateReplacement:
		return "replacement"
	case UpdatePipeline:
		return "pipeline"
	}
	return "unknown"
}

// Update is a compiled update. It is immutable and safe for concurrent use.
type Update struct {
	kind        UpdateKind
	ops         []*updateOp
	replacement bson.D
	pipeline    *Pipeline
	// arrayFilters by identifier, for "$[<id>]" paths.
	arrayFilters map[string]*Filter
	positional   bool
}

// UpdateOptions are the optional parts of an update statement.
type UpdateOptions struct {
	// ArrayFilters are the statement's arrayFilters: each a filter document
	// on one identifier ({"x.a": 1} or {x: {$gt: 1}}).
	ArrayFilters bson.A
}

// CompileUpdate compiles an update: a bson.D of update operators, a
// replacement bson.D, or a bson.A pipeline.
func CompileUpdate(u any) (*Update, error) {
	return CompileUpdateWithOptions(u, UpdateOptions{})
}

// CompileUpdateWithOptions is CompileUpdate with arrayFilters.
func CompileUpdateWithOptions(u any, opts UpdateOptions) (*Update, error) {
	switch t := normalize(u).(type) {
	case bson.A:
		if len(opts.ArrayFilters) > 0 {
			return nil, errf(mongoerr.CodeFailedToParse, "arrayFilters may not be specified for pipeline-style updates")
		}
		p, err := compileUpdatePipeline(t)
		if err != nil {
			return nil, err
		}
		return &Update{kind: UpdatePipeline, pipeline: p}, nil
	case bson.D:
		if len(t) > 0 && strings.HasPrefix(t[0].Key, "$") {
			up := &Update{kind: UpdateOperators}
			if err := up.compileArrayFilters(opts.ArrayFilters); err != nil {
				return nil, err
			}
			if err := up.compileOperators(t); err != nil {
				return nil, err
			}
			return up, nil
		}
		if len(opts.ArrayFilters) > 0 {
			return nil, errf(mongoerr.CodeFailedToParse, "arrayFilters may not be specified for replacement-style updates")
		}
		for _, e := range t {
			if strings.HasPrefix(e.Key, "$") {
				return nil, errf(mongoerr.CodeDollarPrefixedFieldName,
					"The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", e.Key, e.Key)
			}
		}
		return &Update{kind: UpdateReplacement, replacement: t}, nil
	case nil:
		return &Update{kind: UpdateReplacement, replacement: bson.D{}}, nil
	}
	return nil, errf(mongoerr.CodeFailedToParse, "Update argument must be either an object or an array")
}

// Kind reports the update form.
func (u *Update) Kind() UpdateKind { return u.kind }

// NeedsPositional reports whether the update uses the positional "$"
// operator and therefore needs ApplyPositional.
func (u *Update) NeedsPositional() bool { return u.positional }

// Apply applies the update to doc and returns the new document and the
// change description. doc is not modified. The description's Empty()
// reports a no-op (MongoDB writes no oplog entry and emits no event); its
// Replacement field reports a write that change streams show as "replace"
// (replacement documents, large pipeline updates). insert is true when doc is the seed
// of an upsert: $setOnInsert then applies. A description that is Empty means
// the update was a no-op (no oplog entry, no change event).
func (u *Update) Apply(doc bson.D, vars *Vars, insert bool) (bson.D, *UpdateDescription, error) {
	return u.ApplyPositional(doc, vars, insert, -1)
}

// ApplyPositional is Apply with the array position matched by the query,
// which the positional "$" operator refers to (-1 when unknown).
func (u *Update) ApplyPositional(doc bson.D, vars *Vars, insert bool, pos int) (bson.D, *UpdateDescription, error) {
	switch u.kind {
	case UpdateReplacement:
		out, err := replaceDoc(doc, u.replacement)
		if err != nil {
			return nil, nil, err
		}
		d := Diff(doc, out)
		d.Replacement = true
		return out, d, nil
	case UpdatePipeline:
		return u.applyPipeline(doc, vars)
	}
	return u.applyOperators(doc, vars, insert, pos)
}

// replaceDoc builds a replacement keeping the original _id first.
func replaceDoc(old, repl bson.D) (bson.D, error) {
	oldID, hasOld := getField(old, "_id")
	newID, hasNew := getField(repl, "_id")
	out := make(bson.D, 0, len(repl)+1)
	switch {
	case hasNew:
		if hasOld && !identicalID(oldID, newID) {
			return nil, errf(mongoerr.CodeImmutableField,
				"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", describe(newID))
		}
		out = append(out, bson.E{Key: "_id", Value: normalize(newID)})
	case hasOld:
		out = append(out, bson.E{Key: "_id", Value: oldID})
	}
	for _, e := range repl {
		if e.Key == "_id" {
			continue
		}
		out = append(out, bson.E{Key: e.Key, Value: normalize(e.Value)})
	}
	return out, nil
}

// identicalID compares _id values as the server does for immutability
// (value comparison, field names considered).
func identicalID(a, b any) bool { return Compare(a, b) == 0 }

func (u *Update) applyPipeline(doc bson.D, vars *Vars) (bson.D, *UpdateDescription, error) {
	out, ok, err := u.pipeline.ApplyOne(doc, vars)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		out = bson.D{}
	}
	oldID, hasOld := getField(doc, "_id")
	newID, hasNew := getField(out, "_id")
	if hasOld {
		if !hasNew {
			out = append(bson.D{{Key: "_id", Value: oldID}}, out...)
		} else if Compare(oldID, newID) != 0 {
			return nil, nil, errf(mongoerr.CodeImmutableField,
				"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", describe(newID))
		} else if out[0].Key != "_id" {
			out = moveIDFirst(out)
		}
	}
	return out, Diff(doc, out), nil
}

func moveIDFirst(d bson.D) bson.D {
	i := fieldIndex(d, "_id")
	if i <= 0 {
		return d
	}
	out := make(bson.D, 0, len(d))
	out = append(out, d[i])
	out = append(out, d[:i]...)
	return append(out, d[i+1:]...)
}

// compileUpdatePipeline accepts only the stages MongoDB allows in update
// pipelines.
func compileUpdatePipeline(stages bson.A) (*Pipeline, error) {
	for _, s := range stages {
		d, ok := s.(bson.D)
		if !ok || len(d) != 1 {
			continue // CompilePipeline reports the shape error
		}
		switch d[0].Key {
		case "$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith":
		default:
			if _, known := stageCompilers[d[0].Key]; known {
				return nil, errf(mongoerr.CodeInvalidOptions, "%s is not allowed to be used within an update", d[0].Key)
			}
		}
	}
	return CompilePipeline(stages)
}

// comparePathParts orders update paths the way MongoDB applies them: field
// by field, numeric components numerically, others bytewise.
func comparePathParts(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareUpdateField(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func compareUpdateField(a, b string) int {
	if allDigitsStr(a) && allDigitsStr(b) {
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(ta) != len(tb) {
			return cmp.Compare(len(ta), len(tb))
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func allDigitsStr(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// sortOps orders operators by the path they are applied at ($rename acts
// at its destination, like the server's update tree).
func sortOps(ops []*updateOp) {
	key := func(op *updateOp) []string {
		if op.name == "$rename" {
			return op.to
		}
		return op.parts
	}
	sort.SliceStable(ops, func(i, j int) bool {
		return comparePathParts(key(ops[i]), key(ops[j])) < 0
	})
}
