package mongotest

import (
	"cmp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The _id index path. A filter whose top level pins _id to one value, to
// {$eq: value} or to {$in: [values]} can only match the documents with
// those _ids, so the emulator looks them up in the _id map instead of
// testing every document, as a real server's IDHACK and _id index plans do.
// The documents found are still tested against the whole filter and
// returned in natural order, so the result is exactly the scan's.
//
// The map's keys (keyOf) are equal exactly when MongoDB's equality says
// the values are equal only for the canonical values of canonicalID:
// numbers of the three binary types (1, 1.0 and NumberLong(1) share a
// key), strings, booleans, ObjectIds, dates, timestamps, binary data and
// documents (and arrays inside them) of those. A filter naming any other
// value (null, which also matches a missing _id; a regex, which matches by
// pattern; an array; Decimal128, MinKey, symbols...) scans, and so does a
// collection that has ever stored a non-canonical _id, a filter under a
// collation (whose string equality is not bytewise) and one with $expr
// (whose evaluation errors depend on every document).

// idKeys returns the _id map keys the filter pins _id to (none for an
// empty $in), and false when the filter does not pin _id to canonical
// values.
func idKeys(filter bson.D) ([]string, bool) {
	v, ok := lookupTop(filter, "_id")
	if !ok {
		return nil, false
	}
	if ops, isOps := operatorDoc(v); isOps {
		for _, op := range ops {
			switch op.Key {
			case "$eq":
				if topLevelCanonical(op.Value) {
					return []string{keyOf(op.Value)}, true
				}
				return nil, false
			case "$in":
				arr, ok := op.Value.(bson.A)
				if !ok {
					return nil, false
				}
				keys := make([]string, 0, len(arr))
				for _, x := range arr {
					if !topLevelCanonical(x) {
						return nil, false
					}
					keys = append(keys, keyOf(x))
				}
				return keys, true
			}
		}
		return nil, false
	}
	if !topLevelCanonical(v) {
		return nil, false
	}
	return []string{keyOf(v)}, true
}

// operatorDoc reports whether a filter value is an operator document
// ({$in: [...]}) rather than a literal one, as the filter compiler decides
// (a first key starting with $, DBRef fields aside).
func operatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		return nil, false
	}
	switch d[0].Key {
	case "$ref", "$id", "$db":
		return nil, false
	}
	return d, true
}

// topLevelCanonical reports whether a value an _id is compared with has a
// faithful key: canonical, and neither an array (an _id never is one) nor
// null (which also matches a missing field).
func topLevelCanonical(v any) bool {
	switch v.(type) {
	case nil, bson.A:
		return false
	}
	return canonicalID(v)
}

// canonicalID reports whether keyOf(v) is equal to keyOf(x) for every x
// MongoDB's equality finds equal to v (no collation).
func canonicalID(v any) bool {
	switch x := v.(type) {
	case int32, int64, float64, string, bool, bson.ObjectID, bson.DateTime, bson.Timestamp, bson.Binary, nil:
		return true
	case bson.D:
		for _, e := range x {
			if !canonicalID(e.Value) {
				return false
			}
		}
		return true
	case bson.A:
		for _, e := range x {
			if !canonicalID(e) {
				return false
			}
		}
		return true
	}
	return false
}

// noteID counts a stored document's _id when it is not canonical: from
// then on the collection is always scanned.
func (c *collection) noteID(doc bson.D) {
	if id, _ := lookupTop(doc, "_id"); !canonicalID(id) {
		c.oddIDs++
	}
}

// idLookup returns the live records whose _id has one of keys, in natural
// order, and false when the collection cannot answer from its _id map.
func (c *collection) idLookup(keys []string) ([]*record, bool) {
	if c.oddIDs > 0 {
		return nil, false
	}
	var out []*record
	for _, k := range keys {
		if rec := c.byID[k]; rec != nil {
			out = append(out, rec)
		}
	}
	return naturalOrder(out), true
}

// idCandidates returns every record of c.records, live or deleted, whose
// _id has one of keys, in natural order: the records a snapshot read may
// see with those _ids. False when the collection cannot tell.
func (c *collection) idCandidates(keys []string) ([]*record, bool) {
	if c.oddIDs > 0 {
		return nil, false
	}
	var out []*record
	for _, k := range keys {
		if rec := c.byID[k]; rec != nil {
			out = append(out, rec)
		}
		out = append(out, c.dead[k]...)
	}
	return naturalOrder(out), true
}

// naturalOrder sorts records by insertion and drops repeats (an $in may
// name one _id twice, as 1 and 1.0).
func naturalOrder(recs []*record) []*record {
	if len(recs) < 2 {
		return recs
	}
	slices.SortFunc(recs, func(a, b *record) int { return cmp.Compare(a.ord, b.ord) })
	return slices.Compact(recs)
}
