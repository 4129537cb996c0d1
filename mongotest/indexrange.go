package mongotest

import (
	"cmp"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// An index range is what an index scan reads: the keys between two edges,
// as a real server's index bounds. An edge lies between keys: just before
// or just after a value, or before or after every key of one type (the end
// of a type bracket: {_id: {$gt: 5}} reads the numbers above 5 and stops
// at the first key that is not a number), or before or after every key.

// edge is a place in an index's key order.
type edge struct {
	rank  int // the type order (mql.TypeOrder) the edge lies in
	where int // -1: before every key of the rank; +1: after every one; 0: at v
	v     any
	after bool // where 0: just after v, else just before it
}

var (
	edgeFirst = edge{rank: math.MinInt, where: -1}
	edgeLast  = edge{rank: math.MaxInt, where: +1}
	rankNum   = mql.TypeOrder(int64(0))
)

// before is the edge just before v (an inclusive lower bound, an exclusive
// upper one); after the edge just after it.
func before(v any) edge { return edge{rank: mql.TypeOrder(v), v: v} }
func after(v any) edge  { return edge{rank: mql.TypeOrder(v), v: v, after: true} }

// side tells where key k lies: negative before the edge, positive after
// it (a key is never on an edge).
func (e edge) side(k any) int {
	if r := mql.TypeOrder(k); r != e.rank {
		return cmp.Compare(r, e.rank)
	}
	return e.sideSameRank(mql.Compare(k, e.v))
}

// sideInt is side for an int64 key (a hashed index's), without boxing it.
func (e edge) sideInt(k int64) int {
	if e.rank != rankNum {
		return cmp.Compare(rankNum, e.rank)
	}
	return e.sideSameRank(cmpInt64(k, e.v))
}

func (e edge) sideSameRank(c int) int {
	switch e.where {
	case -1:
		return 1
	case 1:
		return -1
	}
	if c != 0 {
		return c
	}
	if e.after {
		return -1
	}
	return 1
}

// cmpEdges orders two edges.
func cmpEdges(a, b edge) int {
	if a.rank != b.rank {
		return cmp.Compare(a.rank, b.rank)
	}
	if a.where != b.where {
		return cmp.Compare(a.where, b.where)
	}
	if a.where != 0 {
		return 0
	}
	if c := mql.Compare(a.v, b.v); c != 0 {
		return c
	}
	switch {
	case a.after == b.after:
		return 0
	case a.after:
		return 1
	}
	return -1
}

// cmpInt64 compares an int64 with a number (mql.Compare's order: NaN below
// every number), boxing neither in the common cases.
func cmpInt64(k int64, v any) int {
	switch x := v.(type) {
	case int64:
		return cmp.Compare(k, x)
	case int32:
		return cmp.Compare(k, int64(x))
	case float64:
		switch {
		case math.IsNaN(x):
			return 1
		case x >= 0x1p63:
			return -1
		case x < -0x1p63:
			return 1
		}
		t := int64(x) // |x| < 2^63: exact truncation
		if k != t {
			return cmp.Compare(k, t)
		}
		return cmp.Compare(0, x-float64(t))
	}
	return mql.Compare(k, v)
}

// keyRange is a range of keys: those after lo and before hi.
type keyRange struct{ lo, hi edge }

func fullRange() keyRange { return keyRange{lo: edgeFirst, hi: edgeLast} }

func (r keyRange) empty() bool { return cmpEdges(r.lo, r.hi) >= 0 }

// intersect narrows r to o.
func (r keyRange) intersect(o keyRange) keyRange {
	if cmpEdges(o.lo, r.lo) > 0 {
		r.lo = o.lo
	}
	if cmpEdges(o.hi, r.hi) < 0 {
		r.hi = o.hi
	}
	return r
}

// idRange returns the range of _id keys a filter's conditions on _id
// bound, as a real server's index bounds for the _id index: the
// comparisons ($gt, $gte, $lt, $lte, $eq and equality) on _id at the top
// level and inside top-level $and, intersected, each within its value's
// type bracket. bounded is false when no condition bounds _id. The range
// may hold keys the filter does not match (a scan tests every document
// against the whole filter); it holds every key the filter matches.
func idRange(filter bson.D) (r keyRange, bounded bool) {
	r = fullRange()
	var walk func(d bson.D)
	walk = func(d bson.D) {
		for _, el := range d {
			switch el.Key {
			case "_id":
				if b, ok := idCondition(el.Value); ok {
					r, bounded = r.intersect(b), true
				}
			case "$and":
				arr, _ := el.Value.(bson.A)
				for _, x := range arr {
					if sub, ok := x.(bson.D); ok {
						walk(sub)
					}
				}
			}
		}
	}
	walk(filter)
	return r, bounded
}

// idCondition returns the range of one _id condition: a value (equality)
// or an operator document, whose range operators intersect.
func idCondition(v any) (keyRange, bool) {
	ops, isOps := operatorDoc(v)
	if !isOps {
		if !bracketable(v) {
			return keyRange{}, false
		}
		return keyRange{lo: before(v), hi: after(v)}, true
	}
	r, bounded := fullRange(), false
	for _, op := range ops {
		x := op.Value
		if !bracketable(x) {
			continue
		}
		rank := mql.TypeOrder(x)
		var b keyRange
		switch op.Key {
		case "$eq":
			b = keyRange{lo: before(x), hi: after(x)}
		case "$gt":
			b = keyRange{lo: after(x), hi: edge{rank: rank, where: +1}}
		case "$gte":
			b = keyRange{lo: before(x), hi: edge{rank: rank, where: +1}}
		case "$lt":
			b = keyRange{lo: edge{rank: rank, where: -1}, hi: before(x)}
		case "$lte":
			b = keyRange{lo: edge{rank: rank, where: -1}, hi: after(x)}
		default:
			continue
		}
		r, bounded = r.intersect(b), true
	}
	return r, bounded
}

// bracketable reports whether a comparison with v matches exactly the
// values of v's type bracket on its side of v (no null or missing, no
// array element, no NaN): the values whose bounds the range may use.
func bracketable(v any) bool {
	switch x := v.(type) {
	case int32, int64, string, bson.ObjectID, bool, bson.DateTime, bson.Timestamp, bson.Binary:
		return true
	case float64:
		return !math.IsNaN(x)
	}
	return false
}
