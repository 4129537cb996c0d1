package mql

import (
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file mirrors MongoDB's $v:2 delta ("diff tree"): the structure the
// server logs for updates and from which change streams derive
// updateDescription. Document nodes hold deletes, updates, inserts and
// sub-diffs; array nodes hold a resize and per-index updates or sub-diffs.
// Sizes follow the server's approximate BSON size accounting, which decides
// when a sub-diff is replaced by a whole-value update and when a pipeline
// update is logged as a replacement.

type diffEntry struct {
	name  string
	comps []pathComp
	value any
}

type docDiff struct {
	size    int
	deletes []diffEntry
	updates []diffEntry
	inserts []diffEntry
	subs    []subDiff
	names   map[string]any // child name → *docDiff, *arrDiff or leafMark
}

type subDiff struct {
	name string
	node any // *docDiff or *arrDiff
}

type arrEntry struct {
	idx   int
	comps []pathComp
	value any // leaf value when node is nil
	node  any // *docDiff or *arrDiff
}

type arrDiff struct {
	comps   []pathComp // the array's own path
	size    int
	resize  int // -1 when the array did not shrink
	entries []arrEntry
}

type leafMark struct{}

const (
	sizeEmptyDocDiff = 5
	sizeEmptyArrDiff = 9
	sizeDeltaPadding = 15 // update_oplog_entry::kSizeOfDeltaOplogEntryMetadata
)

func newDocDiff(padding int) *docDiff {
	return &docDiff{size: padding + sizeEmptyDocDiff, names: map[string]any{}}
}

func newArrDiff(comps []pathComp) *arrDiff {
	return &arrDiff{comps: comps, size: sizeEmptyArrDiff, resize: -1}
}

func nodeSize(n any) int {
	switch t := n.(type) {
	case *docDiff:
		return t.size
	case *arrDiff:
		return t.size
	}
	return 0
}

func (d *docDiff) addDelete(name string, comps []pathComp) {
	d.size += len(name) + 2 + 1
	if len(d.deletes) == 0 {
		d.size += 8
	}
	d.deletes = append(d.deletes, diffEntry{name: name, comps: comps})
	d.names[name] = leafMark{}
}

func (d *docDiff) addUpdate(name string, comps []pathComp, v any) {
	d.size += len(name) + 2 + bsonValueSize(v)
	if len(d.updates) == 0 {
		d.size += 8
	}
	d.updates = append(d.updates, diffEntry{name: name, comps: comps, value: v})
	d.names[name] = leafMark{}
}

func (d *docDiff) addInsert(name string, comps []pathComp, v any) {
	d.size += len(name) + 2 + bsonValueSize(v)
	if len(d.inserts) == 0 {
		d.size += 8
	}
	d.inserts = append(d.inserts, diffEntry{name: name, comps: comps, value: v})
	d.names[name] = leafMark{}
}

func (d *docDiff) addSub(name string, n any) {
	d.size += len(name) + 2 + nodeSize(n) + 1
	d.subs = append(d.subs, subDiff{name: name, node: n})
	d.names[name] = n
}

func (a *arrDiff) add(e arrEntry) {
	a.size += 1 + len(strconv.Itoa(e.idx)) + 2
	if e.node != nil {
		a.size += nodeSize(e.node)
	} else {
		a.size += bsonValueSize(e.value)
	}
	// keep entries in index order
	i := len(a.entries)
	for i > 0 && a.entries[i-1].idx > e.idx {
		i--
	}
	a.entries = append(a.entries, arrEntry{})
	copy(a.entries[i+1:], a.entries[i:])
	a.entries[i] = e
}

func (a *arrDiff) find(idx int) *arrEntry {
	for i := range a.entries {
		if a.entries[i].idx == idx {
			return &a.entries[i]
		}
	}
	return nil
}

func (a *arrDiff) setResize(n int) {
	a.resize = n
	a.size += 1 + 4 + 2
}

// computeDocDiff is the server's computeDocDiff: fields are compared in
// parallel; a field whose name differs at the same position is deleted
// and, if present later in post, inserted again. Returns nil when the diff
// is not smaller than post (unless ignoreSize).
func computeDocDiff(pre, post bson.D, prefix []pathComp, ignoreSize bool, padding int) *docDiff {
	d := newDocDiff(padding)
	postSize := bsonDocSize(post)
	var deletes []string
	i, j := 0, 0
	for i < len(pre) && j < len(post) {
		if !ignoreSize && postSize < d.size {
			return nil
		}
		pv, qv := pre[i], post[j]
		if pv.Key == qv.Key && identical(pv.Value, qv.Value) {
			i++
			j++
			continue
		}
		if pv.Key == qv.Key {
			comps := appendComp(prefix, pathComp{name: pv.Key})
			if sub := subDiffOf(pv.Value, qv.Value, comps, ignoreSize); sub != nil {
				d.addSub(pv.Key, sub)
			} else {
				d.addUpdate(pv.Key, comps, qv.Value)
			}
			i++
			j++
			continue
		}
		deletes = append(deletes, pv.Key)
		i++
	}
	for ; i < len(pre); i++ {
		d.addDelete(pre[i].Key, appendComp(prefix, pathComp{name: pre[i].Key}))
	}
	for ; j < len(post); j++ {
		d.addInsert(post[j].Key, appendComp(prefix, pathComp{name: post[j].Key}), post[j].Value)
		for k, name := range deletes {
			if name == post[j].Key {
				deletes = append(deletes[:k], deletes[k+1:]...)
				break
			}
		}
	}
	// The server keeps the remaining deletes in a sorted set.
	sortStrings(deletes)
	for _, name := range deletes {
		d.addDelete(name, appendComp(prefix, pathComp{name: name}))
	}
	if ignoreSize || postSize > d.size {
		return d
	}
	return nil
}

// subDiffOf diffs two values of the same container type; nil means "log
// the whole new value" (different types, or a sub-diff that is too big).
func subDiffOf(pre, post any, comps []pathComp, ignoreSize bool) any {
	switch p := pre.(type) {
	case bson.D:
		if q, ok := post.(bson.D); ok {
			if sub := computeDocDiff(p, q, comps, ignoreSize, 0); sub != nil {
				return sub
			}
		}
	case bson.A:
		if q, ok := post.(bson.A); ok {
			if sub := computeArrDiff(p, q, comps, ignoreSize); sub != nil {
				return sub
			}
		}
	}
	return nil
}

func computeArrDiff(pre, post bson.A, prefix []pathComp, ignoreSize bool) *arrDiff {
	a := newArrDiff(prefix)
	postSize := bsonArraySize(post)
	n := 0
	for ; n < len(pre) && n < len(post); n++ {
		if !ignoreSize && postSize < a.size {
			return nil
		}
		if identical(pre[n], post[n]) {
			continue
		}
		comps := appendComp(prefix, pathComp{name: strconv.Itoa(n), index: true})
		if sub := subDiffOf(pre[n], post[n], comps, ignoreSize); sub != nil {
			a.add(arrEntry{idx: n, comps: comps, node: sub})
		} else {
			a.add(arrEntry{idx: n, comps: comps, value: post[n]})
		}
	}
	for ; n < len(post); n++ {
		comps := appendComp(prefix, pathComp{name: strconv.Itoa(n), index: true})
		a.add(arrEntry{idx: n, comps: comps, value: post[n]})
	}
	if len(pre) > len(post) {
		a.setResize(len(post))
	}
	if ignoreSize || postSize > a.size {
		return a
	}
	return nil
}

// describeDiff turns a diff tree into an UpdateDescription the way the
// change stream transform reads a delta: per document level deletes, then
// updates, then inserts, then sub-diffs; arrays in index order.
func describeDiff(root *docDiff) *UpdateDescription {
	d := &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}
	describeDocDiff(d, root)
	return d
}

func describeDocDiff(d *UpdateDescription, n *docDiff) {
	for _, e := range n.deletes {
		d.RemovedFields = append(d.RemovedFields, dotted(e.comps))
		d.noteAmbiguous(e.comps)
	}
	for _, e := range n.updates {
		d.addUpdated(e.comps, e.value)
	}
	for _, e := range n.inserts {
		d.addUpdated(e.comps, e.value)
	}
	for _, s := range n.subs {
		describeNode(d, s.node)
	}
}

func describeNode(d *UpdateDescription, n any) {
	switch t := n.(type) {
	case *docDiff:
		describeDocDiff(d, t)
	case *arrDiff:
		describeArrDiff(d, t)
	}
}

func describeArrDiff(d *UpdateDescription, a *arrDiff) {
	if a.resize >= 0 {
		d.TruncatedArrays = append(d.TruncatedArrays, TruncatedArray{Field: dotted(a.comps), NewSize: int32(a.resize)})
		d.noteAmbiguous(a.comps)
	}
	for _, e := range a.entries {
		if e.node != nil {
			describeNode(d, e.node)
			continue
		}
		d.addUpdated(e.comps, e.value)
	}
}

// serializeDiff renders the $v:2 "diff" document of a tree.
func serializeDiff(n *docDiff) bson.D {
	out := bson.D{}
	if len(n.deletes) > 0 {
		sec := bson.D{}
		for _, e := range n.deletes {
			sec = append(sec, bson.E{Key: e.name, Value: false})
		}
		out = append(out, bson.E{Key: "d", Value: sec})
	}
	if len(n.updates) > 0 {
		sec := bson.D{}
		for _, e := range n.updates {
			sec = append(sec, bson.E{Key: e.name, Value: e.value})
		}
		out = append(out, bson.E{Key: "u", Value: sec})
	}
	if len(n.inserts) > 0 {
		sec := bson.D{}
		for _, e := range n.inserts {
			sec = append(sec, bson.E{Key: e.name, Value: e.value})
		}
		out = append(out, bson.E{Key: "i", Value: sec})
	}
	for _, s := range n.subs {
		out = append(out, bson.E{Key: "s" + s.name, Value: serializeNode(s.node)})
	}
	return out
}

func serializeNode(n any) bson.D {
	switch t := n.(type) {
	case *docDiff:
		return serializeDiff(t)
	case *arrDiff:
		out := bson.D{{Key: "a", Value: true}}
		if t.resize >= 0 {
			out = append(out, bson.E{Key: "l", Value: int32(t.resize)})
		}
		for _, e := range t.entries {
			if e.node != nil {
				out = append(out, bson.E{Key: "s" + strconv.Itoa(e.idx), Value: serializeNode(e.node)})
			} else {
				out = append(out, bson.E{Key: "u" + strconv.Itoa(e.idx), Value: e.value})
			}
		}
		return out
	}
	return bson.D{}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// bsonDocSize is the encoded size of a document.
func bsonDocSize(d bson.D) int {
	n := 5
	for _, e := range d {
		n += 1 + len(e.Key) + 1 + bsonValueSize(e.Value)
	}
	return n
}

func bsonArraySize(a bson.A) int {
	n := 5
	for i, v := range a {
		n += 1 + len(strconv.Itoa(i)) + 1 + bsonValueSize(v)
	}
	return n
}

// bsonValueSize is the encoded size of a value (without type byte and
// field name).
func bsonValueSize(v any) int {
	switch t := v.(type) {
	case nil, bson.Null, bson.Undefined, bson.MinKey, bson.MaxKey, missingT:
		return 0
	case bool:
		return 1
	case int32:
		return 4
	case int64, float64, bson.DateTime, bson.Timestamp:
		return 8
	case int:
		if t >= math.MinInt32 && t <= math.MaxInt32 {
			return 4
		}
		return 8
	case string:
		return 4 + len(t) + 1
	case bson.Symbol:
		return 4 + len(t) + 1
	case bson.JavaScript:
		return 4 + len(t) + 1
	case bson.D:
		return bsonDocSize(t)
	case bson.A:
		return bsonArraySize(t)
	case bson.ObjectID:
		return 12
	case bson.Decimal128:
		return 16
	case bson.Binary:
		if t.Subtype == 2 {
			return 4 + 1 + 4 + len(t.Data)
		}
		return 4 + 1 + len(t.Data)
	case bson.Regex:
		return len(t.Pattern) + 1 + len(t.Options) + 1
	case bson.DBPointer:
		return 4 + len(t.DB) + 1 + 12
	case bson.CodeWithScope:
		scope, _ := normalize(t.Scope).(bson.D)
		return 4 + 4 + len(t.Code) + 1 + bsonDocSize(scope)
	}
	if needsNorm(v) {
		return bsonValueSize(normalize(v))
	}
	return 0
}

// logTree builds the diff tree of an operator update from its log, like
// MongoDB's V2 log builder: paths below an already logged update or insert
// are covered by it; values are read from the final document.
func logTree(log []logEntry, final any) *docDiff {
	root := newDocDiff(0)
	for _, e := range log {
		addLogEntry(root, e, final)
	}
	return root
}

func addLogEntry(root *docDiff, e logEntry, final any) {
	var node any = root
	last := len(e.comps) - 1
	for i, c := range e.comps[:last] {
		mk := func() any {
			if e.comps[i+1].index {
				return newArrDiff(append([]pathComp(nil), e.comps[:i+1]...))
			}
			return newDocDiff(0)
		}
		switch t := node.(type) {
		case *docDiff:
			switch ch := t.names[c.name].(type) {
			case leafMark:
				return
			case nil:
				n := mk()
				t.addSub(c.name, n)
				node = n
			default:
				node = ch
			}
		case *arrDiff:
			idx, _ := strconv.Atoi(c.name)
			if ent := t.find(idx); ent != nil {
				if ent.node == nil {
					return
				}
				node = ent.node
			} else {
				n := mk()
				t.add(arrEntry{idx: idx, node: n})
				node = n
			}
		}
	}
	c := e.comps[last]
	switch t := node.(type) {
	case *docDiff:
		if _, dup := t.names[c.name]; dup {
			return
		}
		switch e.kind {
		case logDeleted:
			t.addDelete(c.name, e.comps)
		case logCreated:
			t.addInsert(c.name, e.comps, valueAtComps(final, e.comps))
		default:
			t.addUpdate(c.name, e.comps, valueAtComps(final, e.comps))
		}
	case *arrDiff:
		idx, _ := strconv.Atoi(c.name)
		if t.find(idx) != nil {
			return
		}
		t.add(arrEntry{idx: idx, comps: e.comps, value: valueAtComps(final, e.comps)})
	}
}
