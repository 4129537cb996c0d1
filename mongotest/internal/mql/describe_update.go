package mql

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// UpdateDescription is the updateDescription of a change-stream update
// event (MongoDB 5.0+, $v:2 oplog deltas).
type UpdateDescription struct {
	// UpdatedFields maps dotted paths to their new values.
	UpdatedFields bson.D
	// RemovedFields lists removed dotted paths.
	RemovedFields []string
	// TruncatedArrays lists arrays that shrank, with their new size.
	TruncatedArrays []TruncatedArray
	// DisambiguatedPaths maps each ambiguous path (one with a numeric-string
	// field name or a field name containing a dot) to its components:
	// strings, and int32 for array indexes. Change streams report it only
	// with showExpandedEvents.
	DisambiguatedPaths bson.D
	// Replacement reports that MongoDB logs this write as a full-document
	// replacement: change streams show a "replace" event (with the new
	// document) instead of an "update" event with this description. It is
	// set for replacement-style updates, and for pipeline updates whose
	// delta would not be smaller than the new document.
	Replacement bool
}

// TruncatedArray is one truncatedArrays entry.
type TruncatedArray struct {
	Field   string
	NewSize int32
}

// Empty reports whether the update changed nothing.
func (d *UpdateDescription) Empty() bool {
	return d == nil || (len(d.UpdatedFields) == 0 && len(d.RemovedFields) == 0 && len(d.TruncatedArrays) == 0)
}

// Document renders the description as the change event's
// updateDescription document: updatedFields, removedFields (always arrays),
// truncatedArrays, and disambiguatedPaths when withDisambiguated is true.
func (d *UpdateDescription) Document(withDisambiguated bool) bson.D {
	uf := d.UpdatedFields
	if uf == nil {
		uf = bson.D{}
	}
	rf := bson.A{}
	for _, f := range d.RemovedFields {
		rf = append(rf, f)
	}
	ta := bson.A{}
	for _, t := range d.TruncatedArrays {
		ta = append(ta, bson.D{{Key: "field", Value: t.Field}, {Key: "newSize", Value: t.NewSize}})
	}
	out := bson.D{{Key: "updatedFields", Value: uf}, {Key: "removedFields", Value: rf}, {Key: "truncatedArrays", Value: ta}}
	if withDisambiguated {
		dp := d.DisambiguatedPaths
		if dp == nil {
			dp = bson.D{}
		}
		out = append(out, bson.E{Key: "disambiguatedPaths", Value: dp})
	}
	return out
}

func dotted(comps []pathComp) string {
	var b strings.Builder
	for i, c := range comps {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(c.name)
	}
	return b.String()
}

// ambiguous reports whether a path needs disambiguation.
func ambiguous(comps []pathComp) bool {
	for _, c := range comps {
		if !c.index && (allDigitsStr(c.name) || strings.Contains(c.name, ".")) {
			return true
		}
	}
	return false
}

func (d *UpdateDescription) noteAmbiguous(comps []pathComp) {
	if !ambiguous(comps) {
		return
	}
	key := dotted(comps)
	for _, e := range d.DisambiguatedPaths {
		if e.Key == key {
			return
		}
	}
	arr := make(bson.A, len(comps))
	for i, c := range comps {
		if c.index {
			n, _ := strconv.Atoi(c.name)
			arr[i] = int32(n)
		} else {
			arr[i] = c.name
		}
	}
	d.DisambiguatedPaths = append(d.DisambiguatedPaths, bson.E{Key: key, Value: arr})
}

func valueAtComps(root any, comps []pathComp) any {
	v := root
	for _, c := range comps {
		switch t := v.(type) {
		case bson.D:
			x, ok := getField(t, c.name)
			if !ok {
				return missing
			}
			v = x
		case bson.A:
			n, ok := arrayIndex(c.name)
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

// description turns the operator log into an UpdateDescription.
func (a *applier) description() *UpdateDescription {
	return describeDiff(logTree(a.log, a.root))
}

// Diff computes the description between two versions of a document the way
// MongoDB's $v:2 delta does for pipeline-style updates: fields are compared
// position by position (a field that moved is reported as updated), changed
// sub-documents and arrays are diffed recursively unless their diff would
// not be smaller than the new value (then the whole value is reported),
// arrays element-wise (changed or appended elements as "arr.i", a shorter
// array as a truncatedArrays entry), removed fields in RemovedFields. Values
// that are equal but of another type (1 vs 1.0) count as changed.
// Replacement is set when MongoDB would log the change as a full-document
// replacement (the delta is not smaller than the new document); change
// streams then report a "replace" event.
func Diff(before, after bson.D) *UpdateDescription {
	if root := computeDocDiff(before, after, nil, false, sizeDeltaPadding); root != nil {
		if bsonDocSize(serializeDiff(root)) < bsonDocSize(after) {
			return describeDiff(root)
		}
	}
	d := describeDiff(computeDocDiff(before, after, nil, true, 0))
	d.Replacement = true
	return d
}

func (d *UpdateDescription) addUpdated(p []pathComp, v any) {
	d.UpdatedFields = append(d.UpdatedFields, bson.E{Key: dotted(p), Value: v})
	d.noteAmbiguous(p)
}

func appendComp(prefix []pathComp, c pathComp) []pathComp {
	out := make([]pathComp, len(prefix)+1)
	copy(out, prefix)
	out[len(prefix)] = c
	return out
}
