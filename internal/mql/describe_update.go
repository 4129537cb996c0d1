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

func compsPrefix(p, q []pathComp) bool {
	if len(p) > len(q) {
		return false
	}
	for i := range p {
		if p[i].name != q[i].name {
			return false
		}
	}
	return true
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

// description turns the operator log into an UpdateDescription, reading
// values from the final document (like MongoDB's log builder, which holds
// live elements).
func (a *applier) description() *UpdateDescription {
	d := &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}
	var covered [][]pathComp
	for _, e := range a.log {
		skip := false
		for _, c := range covered {
			if compsPrefix(c, e.comps) {
				skip = true
				break
			}
		}
		if skip {
			continue
		}
		switch e.kind {
		case logDeleted:
			d.RemovedFields = append(d.RemovedFields, dotted(e.comps))
		default:
			v := valueAtComps(a.root, e.comps)
			if IsMissing(v) {
				continue
			}
			d.UpdatedFields = append(d.UpdatedFields, bson.E{Key: dotted(e.comps), Value: v})
			covered = append(covered, e.comps)
		}
		d.noteAmbiguous(e.comps)
	}
	return d
}

// Diff computes the description between two versions of a document the way
// MongoDB's $v:2 delta does for pipeline-style updates: new or changed
// fields at their top-most changed path, nested documents diffed
// recursively, arrays diffed element-wise (changed or appended elements as
// "arr.i", a shorter array as a truncatedArrays entry), removed fields in
// RemovedFields. Values that are equal but of another type (1 vs 1.0) count
// as changed.
func Diff(before, after bson.D) *UpdateDescription {
	d := &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}
	diffDocs(d, nil, before, after)
	return d
}

func diffDocs(d *UpdateDescription, prefix []pathComp, before, after bson.D) {
	// Removed fields first (MongoDB lists deletes before updates).
	for _, e := range before {
		if fieldIndex(after, e.Key) < 0 {
			p := appendComp(prefix, pathComp{name: e.Key})
			d.RemovedFields = append(d.RemovedFields, dotted(p))
			d.noteAmbiguous(p)
		}
	}
	for _, e := range after {
		p := appendComp(prefix, pathComp{name: e.Key})
		old, ok := getField(before, e.Key)
		if !ok {
			d.addUpdated(p, e.Value)
			continue
		}
		diffValues(d, p, old, e.Value)
	}
}

func diffValues(d *UpdateDescription, p []pathComp, old, nw any) {
	if identical(old, nw) {
		return
	}
	switch o := old.(type) {
	case bson.D:
		if n, ok := nw.(bson.D); ok {
			diffDocs(d, p, o, n)
			return
		}
	case bson.A:
		if n, ok := nw.(bson.A); ok {
			diffArrays(d, p, o, n)
			return
		}
	}
	d.addUpdated(p, nw)
}

func diffArrays(d *UpdateDescription, p []pathComp, old, nw bson.A) {
	if len(nw) < len(old) {
		d.TruncatedArrays = append(d.TruncatedArrays, TruncatedArray{Field: dotted(p), NewSize: int32(len(nw))})
		d.noteAmbiguous(p)
	}
	for i, v := range nw {
		ip := appendComp(p, pathComp{name: strconv.Itoa(i), index: true})
		if i >= len(old) {
			d.addUpdated(ip, v)
			continue
		}
		diffValues(d, ip, old[i], v)
	}
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
