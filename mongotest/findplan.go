package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// The find planner: which finds read a range of an ordered index
// (recordindex.go) instead of scanning the collection.
//
//   - min/max (inclusive lower, exclusive upper bound of the hinted
//     index's keys): the hinted index's range between them. The hint is
//     required (NoQueryExecutionPlans, 51173 before 8.0), min and max
//     must name the index's fields in order (51174), and min must come
//     before max (51175), as on a real server. The emulator reads min/max
//     ranges of the _id index and of {_id: "hashed"} indexes, whose keys
//     are the hashed _ids ({$toHashedIndexKey: "$_id"}): min {_id:
//     NumberLong(a)}, max {_id: NumberLong(b)} or {_id: MaxKey} read the
//     documents whose hashed _id is in [a, b), in hashed order.
//   - A hint of the _id index, a sort {_id: 1}, or conditions that bound
//     _id ($gt, $gte, $lt, $lte, see idRange): the _id index's range those
//     conditions bound, in _id order, so that a sort {_id: 1} (or none)
//     needs no sorting and a limit stops the scan; another sort sorts what
//     the range holds.
//
// Every other find reads as before: the _id map for a filter that pins
// _id to values, else a collection scan.

// indexPlan is a find's read of one index's range.
type indexPlan struct {
	hashed *index // the {_id: "hashed"} index read; nil: the _id index
	keys   keyRange
	// sorted is set when the index order is the find's sort order (or
	// the find has none): a limit can stop the scan.
	sorted bool
}

// planFind returns the index range a find reads, or nil when it reads as
// before. Callers hold e.mu.
func (e *engine) planFind(r *request, c *collection, filter, sortD bson.D, vars *mql.Vars) (*indexPlan, error) {
	minD, err := boundArg(r.cmd, "min")
	if err != nil {
		return nil, err
	}
	maxD, err := boundArg(r.cmd, "max")
	if err != nil {
		return nil, err
	}
	if c == nil || c.isView {
		return nil, nil
	}
	hint := lookupD(r.cmd, "hint")
	ix := hintedIndex(c, hint)
	if len(minD) > 0 || len(maxD) > 0 {
		return planMinMax(c, ix, minD, maxD, sortD, vars)
	}
	if hint != nil && ix != c.indexes[0] || vars.Collation != nil || e.idScanOnly {
		return nil, nil
	}
	keys, bounded := idRange(filter)
	sortID := isIDSort(sortD)
	switch {
	case ix != nil, sortID:
	case bounded:
		if _, pinned := idKeys(filter); pinned {
			return nil, nil // the _id map answers it
		}
	default:
		return nil, nil
	}
	return &indexPlan{keys: keys, sorted: len(sortD) == 0 || sortID}, nil
}

// planMinMax checks min and max against the hinted index as the server's
// planner does and returns the range between them.
func planMinMax(c *collection, ix *index, minD, maxD, sortD bson.D, vars *mql.Vars) (*indexPlan, error) {
	if ix == nil {
		// 51173 before 8.0 (SERVER-88948); 8.x is emulated.
		return nil, plannerError(c, mongoerr.CodeNoQueryExecutionPlans, "When using min()/max() a hint of which index to use must be provided")
	}
	for _, b := range []bson.D{minD, maxD} {
		if len(b) > 0 && !minMaxCompatible(b, ix.key, vars) {
			return nil, plannerError(c, 51174, "The index chosen is not compatible with min/max")
		}
	}
	if ix != c.indexes[0] && ix.hashed == nil {
		return nil, errorf(mongoerr.CodeNotImplemented, "mongotest reads min/max ranges of the _id index and of {_id: \"hashed\"} indexes only, not of index %s", ix.name)
	}
	// An absent bound is the index's first or last key (both indexes
	// have one ascending field).
	lo, hi := any(bson.MinKey{}), any(bson.MaxKey{})
	if len(minD) > 0 {
		lo = minD[0].Value
	}
	if len(maxD) > 0 {
		hi = maxD[0].Value
	}
	if mql.Compare(lo, hi) >= 0 {
		return nil, plannerError(c, 51175, "The value provided for min() does not come before the value provided for max() in the hinted index")
	}
	p := &indexPlan{keys: keyRange{lo: before(lo), hi: before(hi)}, sorted: len(sortD) == 0}
	if ix.hashed != nil {
		p.hashed = ix
	} else {
		p.sorted = p.sorted || isIDSort(sortD)
	}
	return p, nil
}

// plannerError is a planning failure as find reports it.
func plannerError(c *collection, code int32, msg string) error {
	return errorf(code, "error processing query: ns=%s planner returned error :: caused by :: %s", c.ns(), msg)
}

// boundArg reads find's min or max: a document, or absent.
func boundArg(cmd bson.D, name string) (bson.D, error) {
	v, ok := lookupTop(cmd, name)
	if !ok {
		return nil, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'FindCommandRequest.%s' is the wrong type '%s', expected type 'object'", name, typeName(v))
	}
	return d, nil
}

// hintedIndex is the index a hint names (by name or key pattern), nil for
// none or {$natural: ...}.
func hintedIndex(c *collection, hint any) *index {
	switch h := hint.(type) {
	case string:
		if h != "" {
			return c.findIndex(h, nil)
		}
	case bson.D:
		if len(h) > 0 && h[0].Key != "$natural" {
			return c.findIndex(nil, h)
		}
	}
	return nil
}

// minMaxCompatible reports whether a min or max document names the
// index's fields in order (indexCompatibleMaxMin): under a collation other
// than the index's (always the simple one here), no bound may be a value
// the collation compares.
func minMaxCompatible(b, key bson.D, vars *mql.Vars) bool {
	if len(b) != len(key) {
		return false
	}
	for i, el := range b {
		if el.Key != key[i].Key {
			return false
		}
		if vars.Collation != nil {
			switch el.Value.(type) {
			case string, bson.Symbol, bson.D, bson.A:
				return false
			}
		}
	}
	return true
}

// isIDSort reports whether a sort is {_id: 1}.
func isIDSort(sortD bson.D) bool {
	if len(sortD) != 1 || sortD[0].Key != "_id" {
		return false
	}
	n, ok := asInt64(sortD[0].Value)
	return ok && n == 1
}
