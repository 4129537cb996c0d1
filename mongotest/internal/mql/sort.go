package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Sort is a compiled sort specification ({a: 1, "b.c": -1}).
type Sort struct {
	keys []sortKey
	coll *Collation
}

// WithCollation returns the sort with strings compared under c (nil:
// simple).
func (s *Sort) WithCollation(c *Collation) *Sort {
	if s == nil || c == s.coll {
		return s
	}
	cp := *s
	cp.coll = c
	return &cp
}

type sortKey struct {
	path  string
	parts []string
	dir   int // 1 or -1
}

// CompileSort compiles a sort specification. Values must be 1 or -1
// (any numeric type); {$meta: ...} is not supported.
func CompileSort(spec bson.D) (*Sort, error) {
	if len(spec) == 0 {
		return nil, errf(15976, "$sort stage must have at least one sort key")
	}
	s := &Sort{}
	for _, e := range spec {
		if e.Key == "" {
			return nil, errf(40352, "FieldPath cannot be constructed with empty string")
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		for _, p := range strings.Split(e.Key, ".") {
			if p == "" {
				return nil, errf(15998, "FieldPath field names may not be empty strings.")
			}
		}
		if d, ok := e.Value.(bson.D); ok && len(d) > 0 && d[0].Key == "$meta" {
			return nil, unsupported("$meta sort")
		}
		n, ok := exactInt64(normalize(e.Value))
		if !ok || (n != 1 && n != -1) {
			return nil, errf(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		s.keys = append(s.keys, sortKey{path: e.Key, parts: strings.Split(e.Key, "."), dir: int(n)})
	}
	return s, nil
}

// Less reports whether a sorts before b. Arrays sort by their smallest
// element ascending and largest descending; an empty array sorts before
// null; missing fields sort as null.
func (s *Sort) Less(a, b bson.D) bool {
	return s.compare(a, b) < 0
}

// Compare returns -1, 0 or +1 like Less.
func (s *Sort) compare(a, b bson.D) int {
	for _, k := range s.keys {
		ka := sortKeyValue(a, k.parts, k.dir)
		kb := sortKeyValue(b, k.parts, k.dir)
		if c := compareSortKeysColl(ka, kb, s.coll); c != 0 {
			return c * k.dir
		}
	}
	return 0
}

// emptyArrayKey is the sort key of an empty array: below null.
type emptyArrayKey struct{}

func compareSortKeys(a, b any) int { return compareSortKeysColl(a, b, nil) }

func compareSortKeysColl(a, b any, coll *Collation) int {
	_, ea := a.(emptyArrayKey)
	_, eb := b.(emptyArrayKey)
	switch {
	case ea && eb:
		return 0
	case ea:
		if _, isMin := b.(bson.MinKey); isMin {
			return 1
		}
		return -1
	case eb:
		if _, isMin := a.(bson.MinKey); isMin {
			return -1
		}
		return 1
	}
	return CompareCollated(a, b, coll)
}

// sortKeyValue extracts the sort key of doc for one path.
func sortKeyValue(doc bson.D, parts []string, dir int) any {
	var best any
	found := false
	sawEmpty := false
	consider := func(v any) {
		if !found {
			best, found = v, true
			return
		}
		c := compareSortKeys(v, best)
		if (dir > 0 && c < 0) || (dir < 0 && c > 0) {
			best = v
		}
	}
	collectSortValues(doc, parts, func(v any) {
		if a, ok := v.(bson.A); ok {
			if len(a) == 0 {
				sawEmpty = true
				return
			}
			for _, x := range a {
				consider(x)
			}
			return
		}
		consider(v)
	})
	if !found {
		if sawEmpty {
			return emptyArrayKey{}
		}
		return nil
	}
	if IsMissing(best) {
		return nil
	}
	return best
}

// collectSortValues walks parts through documents and arrays (arrays of
// documents on the way are traversed; numeric components index arrays).
func collectSortValues(v any, parts []string, emit func(any)) {
	if len(parts) == 0 {
		emit(v)
		return
	}
	switch t := v.(type) {
	case bson.D:
		x, ok := getField(t, parts[0])
		if !ok {
			emit(nil)
			return
		}
		collectSortValues(x, parts[1:], emit)
	case bson.A:
		if n, ok := arrayIndex(parts[0]); ok {
			if n < len(t) {
				collectSortValues(t[n], parts[1:], emit)
			} else {
				emit(nil)
			}
			return
		}
		sawDoc := false
		for _, el := range t {
			if d, ok := el.(bson.D); ok {
				sawDoc = true
				collectSortValues(d, parts, emit)
			}
		}
		if !sawDoc {
			emit(nil)
		}
	default:
		emit(nil)
	}
}
