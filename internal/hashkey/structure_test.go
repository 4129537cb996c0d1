package hashkey

import (
	"crypto/md5"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func mustHash(t *testing.T, v any) int64 {
	t.Helper()
	h, err := Hash(v)
	if err != nil {
		t.Fatalf("Hash(%#v): %v", v, err)
	}
	return h
}

func mustJSON(t *testing.T, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// Structural checks from src/mongo/db/hasher_test.cpp.
func TestServerStructuralProperties(t *testing.T) {
	// RecursiveSquashingIntsAndDoubles.
	a := mustJSON(t, `{"x": {"a": 3, "b": [3.1, {"c": 3}]}}`)
	b := mustJSON(t, `{"x": {"a": 3.1, "b": [3, {"c": 3.0}]}}`)
	if mustHash(t, a[0].Value) != mustHash(t, b[0].Value) {
		t.Error("recursive squashing: hashes differ")
	}
	// ArrayAndSubobjectHashesDiffer.
	if mustHash(t, bson.D{{Key: "0", Value: int32(0)}, {Key: "1", Value: int32(1)}}) == mustHash(t, bson.A{int32(0), int32(1)}) {
		t.Error("array and subobject hash equal")
	}
	// SubDocumentGroupingHashesDiffer.
	x1 := mustJSON(t, `{"a": {}, "b": 1}`)
	x2 := mustJSON(t, `{"a": {"b": 1}}`)
	if mustHash(t, x1) == mustHash(t, x2) {
		t.Error("sub-document grouping hashes equal")
	}
	// RegexAndStringHashesDiffer.
	if mustHash(t, "3") == mustHash(t, bson.Regex{Pattern: "3"}) {
		t.Error("regex and string hash equal")
	}
	// MinKeyMaxKeyHashesDiffer.
	if mustHash(t, bson.MinKey{}) == mustHash(t, bson.MaxKey{}) {
		t.Error("MinKey and MaxKey hash equal")
	}
	// CodeWithScopeSquashesScopeIntsAndDoubles.
	code := bson.JavaScript("print('this is some stupid code')")
	c1 := mustHash(t, bson.CodeWithScope{Code: code, Scope: bson.D{{Key: "a", Value: int32(3)}}})
	c2 := mustHash(t, bson.CodeWithScope{Code: code, Scope: bson.D{{Key: "a", Value: 3.1}}})
	c3 := mustHash(t, bson.CodeWithScope{Code: "print('this is \nsome stupider code')", Scope: bson.D{{Key: "a", Value: int32(3)}}})
	if c1 != c2 || c1 == c3 {
		t.Errorf("code with scope: %d %d %d", c1, c2, c3)
	}
	// Field names matter; field order matters.
	if mustHash(t, bson.D{{Key: "a", Value: int32(1)}}) == mustHash(t, bson.D{{Key: "b", Value: int32(1)}}) {
		t.Error("field name ignored")
	}
	ab := bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}
	ba := bson.D{{Key: "b", Value: int32(2)}, {Key: "a", Value: int32(1)}}
	if mustHash(t, ab) == mustHash(t, ba) {
		t.Error("field order ignored")
	}
}

// The server's timestamp vector in hasher_test.cpp predates canonical type
// 47 for timestamps (it was 45, like dates, so a timestamp and a date with
// the same 8 bytes hashed equal). Check the byte layout against that vector
// by hashing our encoding with the old canonical type.
func TestTimestampLayout(t *testing.T) {
	e := encoder{}
	e.i32(Seed)
	if err := e.value(bson.Timestamp{T: 0x55667788, I: 0x11223344}, "", false, 0); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.LittleEndian.Uint32(e.buf[4:8])); got != ctTimestamp {
		t.Fatalf("canonical type %d, want %d", got, ctTimestamp)
	}
	binary.LittleEndian.PutUint32(e.buf[4:8], uint32(ctDate))
	d := md5.Sum(e.buf)
	if got := int64(binary.LittleEndian.Uint64(d[:8])); got != 4476222765095560467 {
		t.Errorf("timestamp bytes with date type hash to %d, want 4476222765095560467", got)
	}
	// With the current canonical type a timestamp and a date differ.
	if mustHash(t, bson.Timestamp{}) == mustHash(t, bson.DateTime(0)) {
		t.Error("timestamp and date hash equal")
	}
	checkHash(t, "timestamp", bson.Timestamp{T: 0x55667788, I: 0x11223344}, mustHash(t, bson.Timestamp{T: 0x55667788, I: 0x11223344}))
}

func TestGoAliasesMatchBSONTypes(t *testing.T) {
	tm := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	pairs := []struct {
		name string
		a, b any
	}{
		{"int", int(5), int32(5)},
		{"big uint64", uint64(1) << 63, twoTo63},
		{"time", tm, bson.NewDateTimeFromTime(tm)},
		{"[]byte", []byte{1, 2}, bson.Binary{Data: []byte{1, 2}}},
		{"[]any", []any{"x", int32(1)}, bson.A{"x", int32(1)}},
		{"[]string", []string{"x", "y"}, bson.A{"x", "y"}},
		{"[]bson.D", []bson.D{{{Key: "k", Value: true}}}, bson.A{bson.D{{Key: "k", Value: true}}}},
		{"bson.M", bson.M{"k": "v"}, bson.D{{Key: "k", Value: "v"}}},
		{"map", map[string]any{}, bson.D{}},
		{"code scope nil", bson.CodeWithScope{Code: "f"}, bson.CodeWithScope{Code: "f", Scope: bson.D{}}},
		{"code scope M", bson.CodeWithScope{Code: "f", Scope: bson.M{"a": 1}}, bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "a", Value: int32(1)}}}},
	}
	for _, p := range pairs {
		if ha, hb := mustHash(t, p.a), mustHash(t, p.b); ha != hb {
			t.Errorf("%s: %d != %d", p.name, ha, hb)
		}
	}
}

func TestRawMatchesDecoded(t *testing.T) {
	doc := bson.D{
		{Key: "_id", Value: mustOID(t, "65a0f1e2d3c4b5a697887766")},
		{Key: "n", Value: int32(1)}, {Key: "l", Value: int64(-2)}, {Key: "f", Value: 2.75},
		{Key: "dec", Value: mustDec(t, "-12.5")},
		{Key: "s", Value: "héllo\x00world"}, {Key: "sym", Value: bson.Symbol("s")},
		{Key: "b", Value: true}, {Key: "null", Value: nil}, {Key: "u", Value: bson.Undefined{}},
		{Key: "d", Value: bson.DateTime(-1)}, {Key: "ts", Value: bson.Timestamp{T: 7, I: 9}},
		{Key: "bin", Value: bson.Binary{Subtype: 3, Data: []byte("0123456789abcdef")}},
		{Key: "old", Value: bson.Binary{Subtype: 2, Data: []byte("xyz")}},
		{Key: "re", Value: bson.Regex{Pattern: "^a", Options: "im"}},
		{Key: "ptr", Value: bson.DBPointer{DB: "db.c", Pointer: mustOID(t, "010203040506070809101112")}},
		{Key: "js", Value: bson.JavaScript("x")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "y", Scope: bson.D{{Key: "z", Value: bson.A{int32(1), bson.D{}}}}}},
		{Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
		{Key: "arr", Value: bson.A{bson.A{}, bson.D{{Key: "q", Value: "r"}}, nil}},
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := mustHash(t, doc)
	if got := mustHash(t, bson.Raw(raw)); got != want {
		t.Errorf("Hash(bson.Raw) = %d, want %d", got, want)
	}
	got, err := HashRaw(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if err != nil || got != want {
		t.Errorf("HashRaw = %d, %v; want %d", got, err, want)
	}
	// Decoding the raw bytes back gives the same hash too.
	var back bson.D
	if err := bson.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got := mustHash(t, back); got != want {
		t.Errorf("Hash(unmarshalled) = %d, want %d", got, want)
	}
	// Each element on its own.
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		t.Fatal(err)
	}
	for i, el := range elems {
		rv := el.Value()
		got, err := HashRaw(rv)
		if err != nil {
			t.Errorf("%s: HashRaw: %v", el.Key(), err)
			continue
		}
		if want := mustHash(t, doc[i].Value); got != want {
			t.Errorf("%s: HashRaw = %d, Hash = %d", el.Key(), got, want)
		}
		if got2 := mustHash(t, rv); got2 != got {
			t.Errorf("%s: Hash(RawValue) = %d, HashRaw = %d", el.Key(), got2, got)
		}
	}
}

// Regex options are hashed as given: the server does not sort them (the Go
// driver sorts them when it encodes a bson.Regex).
func TestRegexOptionsVerbatim(t *testing.T) {
	if mustHash(t, bson.Regex{Pattern: "a", Options: "mi"}) == mustHash(t, bson.Regex{Pattern: "a", Options: "im"}) {
		t.Error("regex options were normalised")
	}
}

func TestErrors(t *testing.T) {
	type custom struct{ A int }
	cyclic := bson.A{nil}
	cyclic[0] = cyclic
	bad := []struct {
		name string
		v    any
		msg  string
	}{
		{"struct", custom{1}, "Go type"},
		{"pointer", &custom{}, "Go type"},
		{"chan", make(chan int), "Go type"},
		{"nested struct", bson.D{{Key: "x", Value: bson.A{custom{}}}}, "Go type"},
		{"big map", bson.M{"a": 1, "b": 2}, "order"},
		{"big scope map", bson.CodeWithScope{Code: "f", Scope: bson.M{"a": 1, "b": 2}}, "order"},
		{"scope type", bson.CodeWithScope{Code: "f", Scope: 3}, "code scope"},
		{"nul key", bson.D{{Key: "a\x00b", Value: 1}}, "NUL"},
		{"nul regex", bson.Regex{Pattern: "a\x00"}, "NUL"},
		{"cyclic", cyclic, "nested"},
		{"bad raw doc", bson.Raw{5, 0, 0, 0, 1}, "malformed"},
		{"truncated raw", bson.Raw{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0}, "malformed"},
		{"raw bad element", bson.Raw{8, 0, 0, 0, 0x10, 'a', 0, 0}, "malformed"},
		{"raw unknown type", bson.Raw{8, 0, 0, 0, 0x42, 'a', 0, 0}, "malformed"},
		{"raw bad bool", bson.RawValue{Type: bson.TypeBoolean, Value: []byte{7}}, "boolean"},
		{"raw bad string", bson.RawValue{Type: bson.TypeString, Value: []byte{2, 0, 0, 0, 'a', 'b'}}, "malformed"},
		{"raw trailing bytes", bson.RawValue{Type: bson.TypeInt32, Value: []byte{1, 0, 0, 0, 9}}, "malformed"},
		{"raw empty", bson.RawValue{}, "malformed"},
	}
	for _, c := range bad {
		_, err := Hash(c.v)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.msg)
		}
	}
}
