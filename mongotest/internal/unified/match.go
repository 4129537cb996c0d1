package unified

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// entityValues gives the matcher access to the entities that the special
// operators $$matchesEntity and $$sessionLsid refer to.
type entityValues interface {
	bsonValue(name string) (bson.RawValue, error)
	sessionLsid(name string) (bson.Raw, error)
}

// mismatch is a failed match: where in the actual value, and what differed.
type mismatch struct {
	path string
	msg  string
}

func (m *mismatch) Error() string {
	if m.path == "" {
		return m.msg
	}
	return m.path + ": " + m.msg
}

// matcher implements "Evaluating Matches" of the unified test format.
type matcher struct {
	ents entityValues // may be nil when no entity operator is used
}

// Match reports whether actual matches expected under the unified test
// format rules, with actual taken as a root-level document (extra fields
// allowed at its top level only). It is exported for tests and tools; the
// runner uses the same code.
func Match(expected, actual bson.RawValue) error {
	return (&matcher{}).match("", expected, actual, true, true)
}

// match compares one expected value with the actual value at path. present
// says whether the actual value exists at all (a missing field is not the
// same as null); root says whether a document here may have extra fields.
func (m *matcher) match(path string, exp, act bson.RawValue, present, root bool) error {
	if exp.Type == bson.TypeEmbeddedDocument {
		doc, ok := exp.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: bad expected document", orRoot(path))
		}
		if op, arg, ok := specialOperator(doc); ok {
			return m.special(path, op, arg, act, present, root)
		}
		if !present {
			return &mismatch{path, "missing; expected " + show(exp)}
		}
		got, ok := act.DocumentOK()
		if !ok {
			return &mismatch{path, fmt.Sprintf("expected a document %s, got %s %s", show(exp), typeName(act.Type), show(act))}
		}
		return m.matchDoc(path, doc, got, root)
	}
	if !present {
		return &mismatch{path, "missing; expected " + show(exp)}
	}
	if exp.Type == bson.TypeArray {
		got, ok := act.ArrayOK()
		if !ok {
			return &mismatch{path, fmt.Sprintf("expected an array %s, got %s %s", show(exp), typeName(act.Type), show(act))}
		}
		want, ok := exp.ArrayOK()
		if !ok {
			return fmt.Errorf("%s: bad expected array", orRoot(path))
		}
		return m.matchArray(path, want, got, false)
	}
	if !scalarEqual(exp, act) {
		return &mismatch{path, fmt.Sprintf("expected %s, got %s", showTyped(exp), showTyped(act))}
	}
	return nil
}

func (m *matcher) matchDoc(path string, exp, act bson.Raw, root bool) error {
	elems, err := exp.Elements()
	if err != nil {
		return fmt.Errorf("%s: bad expected document: %w", path, err)
	}
	want := make(map[string]bool, len(elems))
	for _, e := range elems {
		key := e.Key()
		want[key] = true
		v, err := act.LookupErr(key)
		if err := m.match(joinPath(path, key), e.Value(), v, err == nil, false); err != nil {
			return err
		}
	}
	if root {
		return nil
	}
	got, err := act.Elements()
	if err != nil {
		return &mismatch{path, "bad actual document: " + err.Error()}
	}
	for _, e := range got {
		if !want[e.Key()] {
			return &mismatch{joinPath(path, e.Key()), "unexpected field (nested documents must not have extra fields), value " + show(e.Value())}
		}
	}
	return nil
}

// matchArray compares arrays element by element; rootElems makes each
// element a root-level document (results of iterable operations).
func (m *matcher) matchArray(path string, exp, act bson.RawArray, rootElems bool) error {
	ev, err := exp.Values()
	if err != nil {
		return fmt.Errorf("%s: bad expected array: %w", path, err)
	}
	av, err := act.Values()
	if err != nil {
		return &mismatch{path, "bad actual array: " + err.Error()}
	}
	if len(ev) != len(av) {
		return &mismatch{path, fmt.Sprintf("expected %d elements, got %d: %s", len(ev), len(av), show(bson.RawValue{Type: bson.TypeArray, Value: act}))}
	}
	for i := range ev {
		if err := m.match(fmt.Sprintf("%s[%d]", path, i), ev[i], av[i], true, rootElems); err != nil {
			return err
		}
	}
	return nil
}

// specialOperator reports whether doc is a special operator: a document
// whose first and only key starts with "$$".
func specialOperator(doc bson.Raw) (string, bson.RawValue, bool) {
	elems, err := doc.Elements()
	if err != nil || len(elems) != 1 || !strings.HasPrefix(elems[0].Key(), "$$") {
		return "", bson.RawValue{}, false
	}
	return elems[0].Key(), elems[0].Value(), true
}

func (m *matcher) special(path, op string, arg, act bson.RawValue, present, root bool) error {
	switch op {
	case "$$exists":
		want, ok := arg.BooleanOK()
		if !ok {
			return fmt.Errorf("%s: $$exists takes a boolean, not %s", path, arg.Type)
		}
		if want && !present {
			return &mismatch{path, "missing; expected it to exist"}
		}
		if !want && present {
			return &mismatch{path, "expected no such field, got " + showTyped(act)}
		}
		return nil
	case "$$type":
		return matchType(path, arg, act, present)
	case "$$unsetOrMatches":
		if !present {
			return nil
		}
		return m.match(path, arg, act, true, root)
	case "$$matchesEntity":
		name, ok := arg.StringValueOK()
		if !ok {
			return fmt.Errorf("%s: $$matchesEntity takes an entity name", path)
		}
		if m.ents == nil {
			return fmt.Errorf("%s: $$matchesEntity %q: no entities", path, name)
		}
		v, err := m.ents.bsonValue(name)
		if err != nil {
			return fmt.Errorf("%s: $$matchesEntity: %w", path, err)
		}
		return m.match(path, v, act, present, root)
	case "$$matchesHexBytes":
		return matchHexBytes(path, arg, act, present)
	case "$$sessionLsid":
		name, ok := arg.StringValueOK()
		if !ok {
			return fmt.Errorf("%s: $$sessionLsid takes an entity name", path)
		}
		if m.ents == nil {
			return fmt.Errorf("%s: $$sessionLsid %q: no entities", path, name)
		}
		lsid, err := m.ents.sessionLsid(name)
		if err != nil {
			return fmt.Errorf("%s: $$sessionLsid: %w", path, err)
		}
		if !present {
			return &mismatch{path, "missing; expected the lsid of " + name}
		}
		got, ok := act.DocumentOK()
		if !ok || !sameDocument(lsid, got) {
			return &mismatch{path, fmt.Sprintf("expected the lsid of %s %s, got %s", name, showDoc(lsid), show(act))}
		}
		return nil
	case "$$lte":
		if !present {
			return &mismatch{path, "missing; expected a number <= " + show(arg)}
		}
		a, aok := number(act)
		e, eok := number(arg)
		if !eok {
			return fmt.Errorf("%s: $$lte takes a number, not %s", path, arg.Type)
		}
		if !aok || a > e {
			return &mismatch{path, fmt.Sprintf("expected a number <= %s, got %s", show(arg), showTyped(act))}
		}
		return nil
	case "$$matchAsDocument":
		if !present {
			return &mismatch{path, "missing; expected an Extended JSON string"}
		}
		s, ok := act.StringValueOK()
		if !ok {
			return &mismatch{path, "$$matchAsDocument: expected a string, got " + showTyped(act)}
		}
		var doc bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), false, &doc); err != nil {
			return &mismatch{path, "$$matchAsDocument: not an Extended JSON document: " + shorten(s)}
		}
		return m.match(path, arg, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}, true, false)
	case "$$matchAsRoot":
		want, ok := arg.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: $$matchAsRoot takes a document", path)
		}
		if !present {
			return &mismatch{path, "missing; expected " + show(arg)}
		}
		got, ok := act.DocumentOK()
		if !ok {
			return &mismatch{path, "$$matchAsRoot: expected a document, got " + showTyped(act)}
		}
		return m.matchDoc(path, want, got, true)
	}
	return fmt.Errorf("unified runner: %s: special operator %s not supported", orRoot(path), op)
}

// typeAliases maps the $type query operator's names to BSON types.
var typeAliases = map[string][]bson.Type{
	"double":              {bson.TypeDouble},
	"string":              {bson.TypeString},
	"object":              {bson.TypeEmbeddedDocument},
	"array":               {bson.TypeArray},
	"binData":             {bson.TypeBinary},
	"undefined":           {bson.TypeUndefined},
	"objectId":            {bson.TypeObjectID},
	"bool":                {bson.TypeBoolean},
	"date":                {bson.TypeDateTime},
	"null":                {bson.TypeNull},
	"regex":               {bson.TypeRegex},
	"dbPointer":           {bson.TypeDBPointer},
	"javascript":          {bson.TypeJavaScript},
	"symbol":              {bson.TypeSymbol},
	"javascriptWithScope": {bson.TypeCodeWithScope},
	"int":                 {bson.TypeInt32},
	"timestamp":           {bson.TypeTimestamp},
	"long":                {bson.TypeInt64},
	"decimal":             {bson.TypeDecimal128},
	"minKey":              {bson.TypeMinKey},
	"maxKey":              {bson.TypeMaxKey},
	"number":              {bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128},
}

func matchType(path string, arg, act bson.RawValue, present bool) error {
	var names []string
	if s, ok := arg.StringValueOK(); ok {
		names = []string{s}
	} else if arr, ok := arg.ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				return fmt.Errorf("%s: $$type takes type names", path)
			}
			names = append(names, s)
		}
	} else {
		return fmt.Errorf("%s: $$type takes a type name or an array of them", path)
	}
	for _, n := range names {
		if _, ok := typeAliases[n]; !ok {
			return fmt.Errorf("unified runner: %s: $$type %q not supported", orRoot(path), n)
		}
	}
	if !present {
		return &mismatch{path, fmt.Sprintf("missing; expected a value of type %s", strings.Join(names, " or "))}
	}
	for _, n := range names {
		for _, t := range typeAliases[n] {
			if act.Type == t {
				return nil
			}
		}
	}
	return &mismatch{path, fmt.Sprintf("expected type %s, got %s", strings.Join(names, " or "), showTyped(act))}
}

func matchHexBytes(path string, arg, act bson.RawValue, present bool) error {
	s, ok := arg.StringValueOK()
	if !ok {
		return fmt.Errorf("%s: $$matchesHexBytes takes a string", path)
	}
	want, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("%s: $$matchesHexBytes: malformed hex %q", path, s)
	}
	if !present {
		return &mismatch{path, "missing; expected bytes " + s}
	}
	var got []byte
	if s, ok := act.StringValueOK(); ok {
		got = []byte(s)
	} else if _, b, ok := act.BinaryOK(); ok {
		got = b
	} else {
		return &mismatch{path, "expected a string of bytes, got " + showTyped(act)}
	}
	if !bytes.Equal(want, got) {
		return &mismatch{path, fmt.Sprintf("expected bytes %s, got %x", strings.ToLower(s), got)}
	}
	return nil
}

// number converts int32, int64 and double to float64 (Decimal128 is not a
// flexible numeric type).
func number(v bson.RawValue) (float64, bool) {
	if n, ok := v.Int32OK(); ok {
		return float64(n), true
	}
	if n, ok := v.Int64OK(); ok {
		return float64(n), true
	}
	if d, ok := v.DoubleOK(); ok {
		return d, true
	}
	return 0, false
}

// scalarEqual compares two non-document, non-array values: numbers
// flexibly, everything else by type and bytes (documents inside types such
// as code with scope compare regardless of key order).
func scalarEqual(exp, act bson.RawValue) bool {
	if e, ok := number(exp); ok {
		a, ok := number(act)
		if !ok {
			return false
		}
		if exp.Type != bson.TypeDouble && act.Type != bson.TypeDouble {
			ei, _ := asInt64(exp)
			ai, _ := asInt64(act)
			return ei == ai // exact for large int64 values
		}
		return e == a || (math.IsNaN(e) && math.IsNaN(a))
	}
	if exp.Type != act.Type {
		return false
	}
	if exp.Type == bson.TypeCodeWithScope {
		ec, es, eok := exp.CodeWithScopeOK()
		ac, as, aok := act.CodeWithScopeOK()
		return eok && aok && ec == ac && sameDocument(es, as)
	}
	return bytes.Equal(exp.Value, act.Value)
}

// sameDocument compares two documents exactly except for key order, with
// flexible numbers.
func sameDocument(a, b bson.Raw) bool {
	return sameValue(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: a}, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: b})
}

// sameValue is exact equality (no special operators, no extra fields),
// ignoring key order and with flexible numbers. It is used for outcome and
// $$sessionLsid.
func sameValue(a, b bson.RawValue) bool {
	switch a.Type {
	case bson.TypeEmbeddedDocument:
		bd, ok := b.DocumentOK()
		if !ok {
			return false
		}
		ad, ok := a.DocumentOK()
		if !ok {
			return false
		}
		ae, err1 := ad.Elements()
		be, err2 := bd.Elements()
		if err1 != nil || err2 != nil || len(ae) != len(be) {
			return false
		}
		for _, e := range ae {
			v, err := bd.LookupErr(e.Key())
			if err != nil || !sameValue(e.Value(), v) {
				return false
			}
		}
		return true
	case bson.TypeArray:
		ba, ok := b.ArrayOK()
		if !ok {
			return false
		}
		aa, ok := a.ArrayOK()
		if !ok {
			return false
		}
		av, err1 := aa.Values()
		bv, err2 := ba.Values()
		if err1 != nil || err2 != nil || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !sameValue(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(a, b)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// maxShown bounds how much of a value a failure reason quotes.
const maxShown = 160

// show renders a value as relaxed Extended JSON, shortened.
func show(v bson.RawValue) string {
	if v.Type == 0 {
		return "(nothing)"
	}
	out, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return shorten(v.String())
	}
	s := strings.TrimSuffix(strings.TrimPrefix(string(out), `{"v":`), "}")
	return shorten(s)
}

// showDoc renders a document as relaxed Extended JSON, shortened.
func showDoc(d bson.Raw) string {
	return show(docValue(d))
}

func showTyped(v bson.RawValue) string {
	return typeName(v.Type) + " " + show(v)
}

func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return s[:maxShown-3] + "..."
}

func typeName(t bson.Type) string {
	for name, ts := range typeAliases {
		if len(ts) == 1 && ts[0] == t {
			return name
		}
	}
	return t.String()
}
