package mql

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Pipeline is a compiled aggregation pipeline. It is immutable and safe for
// concurrent use.
type Pipeline struct {
	stages []stage
}

// stage is one compiled pipeline stage. Per-document stages implement
// apply; the others implement run over the whole input.
type stage interface {
	name() string
	perDoc() bool
	apply(doc bson.D, vars *Vars) (bson.D, bool, error)
	run(docs []bson.D, vars *Vars) ([]bson.D, error)
}

// docStage adapts a per-document function into a stage.
type docStage struct {
	stageName string
	fn        func(doc bson.D, vars *Vars) (bson.D, bool, error)
}

func (s *docStage) name() string { return s.stageName }
func (s *docStage) perDoc() bool { return true }
func (s *docStage) apply(doc bson.D, vars *Vars) (bson.D, bool, error) {
	return s.fn(doc, vars)
}
func (s *docStage) run(docs []bson.D, vars *Vars) ([]bson.D, error) {
	out := make([]bson.D, 0, len(docs))
	for _, d := range docs {
		r, ok, err := s.fn(d, vars)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// batchStage adapts a whole-input function into a stage.
type batchStage struct {
	stageName string
	fn        func(docs []bson.D, vars *Vars) ([]bson.D, error)
}

func (s *batchStage) name() string { return s.stageName }
func (s *batchStage) perDoc() bool { return false }
func (s *batchStage) apply(doc bson.D, vars *Vars) (bson.D, bool, error) {
	out, err := s.fn([]bson.D{doc}, vars)
	if err != nil || len(out) == 0 {
		return nil, false, err
	}
	return out[0], true, nil
}
func (s *batchStage) run(docs []bson.D, vars *Vars) ([]bson.D, error) { return s.fn(docs, vars) }

type stageCompiler func(name string, spec any) ([]stage, error)

// stageCompilers is the registry of supported stages.
var stageCompilers map[string]stageCompiler

func init() {
	stageCompilers = map[string]stageCompiler{
		"$match":        compileMatchStage,
		"$project":      compileProjectLike,
		"$addFields":    compileProjectLike,
		"$set":          compileProjectLike,
		"$unset":        compileProjectLike,
		"$replaceRoot":  compileReplaceRoot,
		"$replaceWith":  compileReplaceRoot,
		"$redact":       compileRedact,
		"$sort":         compileSortStage,
		"$limit":        compileLimit,
		"$skip":         compileSkip,
		"$count":        compileCount,
		"$group":        compileGroupStage,
		"$unwind":       compileUnwind,
		"$sortByCount":  compileSortByCount,
		"$changeStream": compileMisplacedChangeStream,
	}
	for _, n := range []string{"$lookup", "$graphLookup", "$out", "$merge", "$facet", "$bucket",
		"$bucketAuto", "$sample", "$geoNear", "$unionWith", "$search", "$searchMeta", "$vectorSearch",
		"$collStats", "$indexStats", "$currentOp", "$listSessions", "$listLocalSessions",
		"$planCacheStats", "$densify", "$fill", "$setWindowFields", "$documents",
		"$changeStreamSplitLargeEvent", "$listSearchIndexes", "$shardedDataDistribution"} {
		name := n
		stageCompilers[name] = func(string, any) ([]stage, error) {
			return nil, unsupported("the " + name + " stage")
		}
	}
}

// perDocumentStages are the stages a change stream may use after
// $changeStream (and that ApplyOne can run).
var perDocumentStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// CompilePipeline compiles an aggregation pipeline (each stage a bson.D
// with one field). The caller strips a leading $changeStream first.
func CompilePipeline(stages bson.A) (*Pipeline, error) {
	p := &Pipeline{}
	for _, raw := range stages {
		d, ok := normalize(raw).(bson.D)
		if !ok {
			return nil, errf(mongoerr.CodeTypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		if len(d) != 1 {
			return nil, errf(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := d[0].Key
		c, ok := stageCompilers[name]
		if !ok {
			return nil, errf(40324, "Unrecognized pipeline stage name: '%s'", name)
		}
		ss, err := c(name, d[0].Value)
		if err != nil {
			return nil, err
		}
		p.stages = append(p.stages, ss...)
	}
	return p, nil
}

// Run runs the pipeline over docs. The input documents are not modified.
func (p *Pipeline) Run(docs []bson.D, vars *Vars) ([]bson.D, error) {
	cur := docs
	for _, s := range p.stages {
		out, err := s.run(cur, vars)
		if err != nil {
			return nil, err
		}
		cur = out
	}
	if cur == nil {
		cur = []bson.D{}
	}
	return cur, nil
}

// ApplyOne runs a per-document pipeline over one document. It returns
// (nil, false, nil) when a stage filters the document out. Pipelines with
// other stages run them over a one-document input.
func (p *Pipeline) ApplyOne(doc bson.D, vars *Vars) (bson.D, bool, error) {
	cur := doc
	for _, s := range p.stages {
		out, ok, err := s.apply(cur, vars)
		if err != nil || !ok {
			return nil, false, err
		}
		cur = out
	}
	return cur, true, nil
}

// PerDocument reports whether every stage is a per-document stage.
func (p *Pipeline) PerDocument() bool {
	for _, s := range p.stages {
		if !s.perDoc() {
			return false
		}
	}
	return true
}

// StageNames lists the stage names in order, as written.
func (p *Pipeline) StageNames() []string {
	out := make([]string, len(p.stages))
	for i, s := range p.stages {
		out[i] = s.name()
	}
	return out
}

// IsPerDocumentStage reports whether a stage name may follow $changeStream.
func IsPerDocumentStage(name string) bool { return perDocumentStages[name] }

func compileMatchStage(name string, spec any) ([]stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15959, "the match filter must be an expression in an object")
	}
	f, err := CompileFilter(d)
	if err != nil {
		return nil, err
	}
	return []stage{&docStage{stageName: name, fn: func(doc bson.D, vars *Vars) (bson.D, bool, error) {
		// An $expr that cannot be evaluated fails the pipeline, as on
		// the server.
		ok, err := f.MatchErr(doc, vars)
		if err != nil || !ok {
			return nil, false, err
		}
		return doc, true, nil
	}}}, nil
}

func compileProjectLike(name string, spec any) ([]stage, error) {
	var p *Projection
	var err error
	switch name {
	case "$unset":
		p, err = compileUnset(spec)
	default:
		d, ok := spec.(bson.D)
		if !ok {
			if name == "$project" {
				return nil, errf(15969, "$project specification must be an object")
			}
			return nil, errf(40272, "%s specification stage must be an object, got %s", name, typeNames[bsonType(spec)])
		}
		if name == "$project" {
			p, err = compileProjectStage(d)
		} else {
			p, err = compileAddFields(name, d)
		}
	}
	if err != nil {
		return nil, err
	}
	return []stage{&docStage{stageName: name, fn: func(doc bson.D, vars *Vars) (bson.D, bool, error) {
		out, err := p.Apply(doc, vars)
		return out, err == nil, err
	}}}, nil
}

func compileReplaceRoot(name string, spec any) ([]stage, error) {
	exprSpec := spec
	what := "'replacement document'"
	if name == "$replaceRoot" {
		what = "'newRoot'"
		d, ok := spec.(bson.D)
		if !ok {
			return nil, errf(40228, "expected an object as specification for $replaceRoot stage, got %s", typeNames[bsonType(spec)])
		}
		found := false
		for _, e := range d {
			if e.Key != "newRoot" {
				return nil, errf(mongoerr.CodeIDLUnknownField, "BSON field '$replaceRoot.%s' is an unknown field.", e.Key)
			}
			exprSpec, found = e.Value, true
		}
		if !found {
			return nil, errf(mongoerr.CodeIDLFailedToParse, "BSON field '$replaceRoot.newRoot' is missing but a required field")
		}
	}
	e, err := CompileExpr(exprSpec)
	if err != nil {
		return nil, err
	}
	return []stage{&docStage{stageName: name, fn: func(doc bson.D, vars *Vars) (bson.D, bool, error) {
		v, err := e.evalCurrent(doc, doc, vars)
		if err != nil {
			return nil, false, err
		}
		d, ok := v.(bson.D)
		if !ok {
			return nil, false, errf(40228, "%s must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s",
				what, describe(v), typeNames[bsonType(v)], describe(doc))
		}
		return d, true, nil
	}}}, nil
}

func compileRedact(name string, spec any) ([]stage, error) {
	e, err := CompileExpr(spec)
	if err != nil {
		return nil, err
	}
	return []stage{&docStage{stageName: name, fn: func(doc bson.D, vars *Vars) (bson.D, bool, error) {
		return redactDoc(e, doc, doc, vars)
	}}}, nil
}

func redactDoc(e *Expr, root, cur bson.D, vars *Vars) (bson.D, bool, error) {
	v, err := e.evalCurrent(root, cur, vars)
	if err != nil {
		return nil, false, err
	}
	switch v {
	case any(redactKeep):
		return cur, true, nil
	case any(redactPrune):
		return nil, false, nil
	case any(redactDescend):
		out := make(bson.D, 0, len(cur))
		for _, f := range cur {
			switch t := f.Value.(type) {
			case bson.D:
				sub, ok, err := redactDoc(e, root, t, vars)
				if err != nil {
					return nil, false, err
				}
				if ok {
					out = append(out, bson.E{Key: f.Key, Value: sub})
				}
			case bson.A:
				arr, err := redactArray(e, root, t, vars)
				if err != nil {
					return nil, false, err
				}
				out = append(out, bson.E{Key: f.Key, Value: arr})
			default:
				out = append(out, f)
			}
		}
		return out, true, nil
	}
	return nil, false, errf(17053, "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s", describe(v))
}

func redactArray(e *Expr, root bson.D, arr bson.A, vars *Vars) (bson.A, error) {
	out := make(bson.A, 0, len(arr))
	for _, el := range arr {
		switch t := el.(type) {
		case bson.D:
			sub, ok, err := redactDoc(e, root, t, vars)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, sub)
			}
		case bson.A:
			sub, err := redactArray(e, root, t, vars)
			if err != nil {
				return nil, err
			}
			out = append(out, sub)
		default:
			out = append(out, el)
		}
	}
	return out, nil
}

func compileSortStage(name string, spec any) ([]stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15973, "the $sort key specification must be an object")
	}
	s, err := CompileSort(d)
	if err != nil {
		return nil, err
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, vars *Vars) ([]bson.D, error) {
		return s.WithCollation(collationOf(vars)).sortDocs(docs), nil
	}}}, nil
}

// sortDocs returns a stably sorted copy of docs.
func (s *Sort) sortDocs(docs []bson.D) []bson.D {
	type keyed struct {
		doc  bson.D
		keys []any
	}
	ks := make([]keyed, len(docs))
	for i, d := range docs {
		keys := make([]any, len(s.keys))
		for j, k := range s.keys {
			keys[j] = sortKeyValue(d, k.parts, k.dir)
		}
		ks[i] = keyed{doc: d, keys: keys}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		for k, sk := range s.keys {
			if c := compareSortKeysColl(ks[i].keys[k], ks[j].keys[k], s.coll); c != 0 {
				return c*sk.dir < 0
			}
		}
		return false
	})
	out := make([]bson.D, len(docs))
	for i := range ks {
		out[i] = ks[i].doc
	}
	return out
}

// Sort sorts docs (stable) and returns the sorted copy.
func (s *Sort) Sort(docs []bson.D) []bson.D { return s.sortDocs(docs) }

func compileLimit(name string, spec any) ([]stage, error) {
	n, ok := exactInt64(spec)
	if !ok {
		return nil, errf(15957, "the limit must be specified as a number")
	}
	if n <= 0 {
		return nil, errf(15958, "the limit must be positive")
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, _ *Vars) ([]bson.D, error) {
		if int64(len(docs)) > n {
			return docs[:n], nil
		}
		return docs, nil
	}}}, nil
}

func compileSkip(name string, spec any) ([]stage, error) {
	n, ok := exactInt64(spec)
	if !ok {
		return nil, errf(15972, "Argument to $skip must be a number.")
	}
	if n < 0 {
		return nil, errf(15956, "Argument to $skip cannot be negative")
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, _ *Vars) ([]bson.D, error) {
		if int64(len(docs)) <= n {
			return []bson.D{}, nil
		}
		return docs[n:], nil
	}}}, nil
}

func compileCount(name string, spec any) ([]stage, error) {
	s, ok := spec.(string)
	switch {
	case !ok || s == "":
		return nil, errf(40156, "the count field must be a non-empty string")
	case strings.HasPrefix(s, "$"):
		return nil, errf(40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(s, "."):
		return nil, errf(40160, "the count field cannot contain '.'")
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, _ *Vars) ([]bson.D, error) {
		if len(docs) == 0 {
			return []bson.D{}, nil
		}
		return []bson.D{{{Key: s, Value: int32(len(docs))}}}, nil
	}}}, nil
}

func compileSortByCount(name string, spec any) ([]stage, error) {
	switch t := spec.(type) {
	case string:
		if !strings.HasPrefix(t, "$") {
			return nil, errf(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
		}
	case bson.D:
		if len(t) == 0 || !strings.HasPrefix(t[0].Key, "$") {
			return nil, errf(40147, "the sortByCount field must be specified as a string or as an object")
		}
	default:
		return nil, errf(40149, "the sortByCount field must be specified as a string or as an object")
	}
	g, err := compileGroupStage("$group", bson.D{{Key: "_id", Value: spec}, {Key: "count", Value: bson.D{{Key: "$sum", Value: int32(1)}}}})
	if err != nil {
		return nil, err
	}
	s, err := compileSortStage("$sort", bson.D{{Key: "count", Value: int32(-1)}})
	if err != nil {
		return nil, err
	}
	return append(g, s...), nil
}

func compileMisplacedChangeStream(string, any) ([]stage, error) {
	return nil, errf(mongoerr.CodeChangeStreamNotFirstStage, "$changeStream is only valid as the first stage in a pipeline")
}

func compileUnwind(name string, spec any) ([]stage, error) {
	var path, indexField string
	preserve := false
	switch t := spec.(type) {
	case string:
		path = t
	case bson.D:
		for _, e := range t {
			switch e.Key {
			case "path":
				s, ok := e.Value.(string)
				if !ok {
					return nil, errf(28808, "expected a string as the path for $unwind stage, got %s", typeNames[bsonType(e.Value)])
				}
				path = s
			case "includeArrayIndex":
				s, ok := e.Value.(string)
				if !ok {
					return nil, errf(28810, "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got %s", typeNames[bsonType(e.Value)])
				}
				if s == "" {
					return nil, errf(28810, "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got string")
				}
				if strings.HasPrefix(s, "$") {
					return nil, errf(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", s)
				}
				indexField = s
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value.(bool)
				if !ok {
					return nil, errf(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", typeNames[bsonType(e.Value)])
				}
				preserve = b
			default:
				return nil, errf(28811, "unrecognized option to $unwind stage: %s", e.Key)
			}
		}
		if path == "" {
			return nil, errf(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, errf(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeNames[bsonType(spec)])
	}
	if !strings.HasPrefix(path, "$") {
		return nil, errf(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	parts := strings.Split(path[1:], ".")
	var indexParts []string
	if indexField != "" {
		indexParts = strings.Split(indexField, ".")
	}
	return []stage{&batchStage{stageName: name, fn: func(docs []bson.D, _ *Vars) ([]bson.D, error) {
		var out []bson.D
		for _, d := range docs {
			v := lookupParts(d, parts)
			arr, isArr := v.(bson.A)
			switch {
			case isArr && len(arr) > 0:
				for i, el := range arr {
					r := setPathValue(d, parts, el)
					if indexParts != nil {
						r = setPathValue(r, indexParts, int64(i))
					}
					out = append(out, r)
				}
			case isArr || isNullish(v):
				if preserve {
					r := d
					if isArr {
						r = setPathValue(d, parts, missing)
					}
					if indexParts != nil {
						r = setPathValue(r, indexParts, nil)
					}
					out = append(out, r)
				}
			default:
				r := d
				if indexParts != nil {
					r = setPathValue(r, indexParts, nil)
				}
				out = append(out, r)
			}
		}
		if out == nil {
			out = []bson.D{}
		}
		return out, nil
	}}}, nil
}

// setPathValue returns a copy of doc with the dotted path set to v
// (creating or replacing intermediate documents; missing removes).
func setPathValue(doc bson.D, parts []string, v any) bson.D {
	out := make(bson.D, len(doc))
	copy(out, doc)
	if len(parts) == 1 {
		return setField(out, parts[0], v)
	}
	var child bson.D
	if x, ok := getField(out, parts[0]); ok {
		child, _ = x.(bson.D)
	}
	if child == nil {
		if IsMissing(v) {
			return out
		}
		child = bson.D{}
	}
	return setField(out, parts[0], setPathValue(child, parts[1:], v))
}
