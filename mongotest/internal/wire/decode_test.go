package wire

import (
	"math"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// decodeCases are documents with every BSON type and the edge cases of each
// (empty documents, arrays and binaries, the old binary subtype, NaN and
// -0, extreme numbers, unicode, deep nesting).
func decodeCases(t testing.TB) [][]byte {
	d128, _ := bson.ParseDecimal128("-1234.5678E-10")
	oid := bson.ObjectID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8}
	deep := bson.D{{Key: "leaf", Value: int32(1)}}
	for i := 0; i < 50; i++ {
		deep = bson.D{{Key: "d", Value: deep}, {Key: "a", Value: bson.A{deep}}}
		if i > 3 {
			deep = deep[:1]
		}
	}
	docs := []any{
		bson.D{},
		bson.D{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "db"},
			{Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
			{Key: "txnNumber", Value: int64(7)}},
		bson.D{
			{Key: "double", Value: 1.5}, {Key: "nan", Value: math.NaN()}, {Key: "inf", Value: math.Inf(-1)}, {Key: "negzero", Value: math.Copysign(0, -1)},
			{Key: "string", Value: "héllo, 世界"}, {Key: "empty", Value: ""}, {Key: "nul inside", Value: "a\x00b"},
			{Key: "doc", Value: bson.D{{Key: "x", Value: int32(1)}}}, {Key: "emptydoc", Value: bson.D{}},
			{Key: "array", Value: bson.A{int32(1), "two", bson.D{{Key: "three", Value: 3.0}}, bson.A{}, nil}}, {Key: "emptyarray", Value: bson.A{}},
			{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}}}, {Key: "emptybin", Value: bson.Binary{Subtype: 0, Data: []byte{}}},
			{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "user", Value: bson.Binary{Subtype: 0x80, Data: []byte("x")}},
			{Key: "old", Value: bson.Binary{Subtype: 2, Data: []byte{9, 8, 7, 6, 5}}}, {Key: "oldshort", Value: bson.Binary{Subtype: 2, Data: []byte{1}}},
			{Key: "undefined", Value: bson.Undefined{}}, {Key: "oid", Value: oid},
			{Key: "true", Value: true}, {Key: "false", Value: false},
			{Key: "date", Value: bson.DateTime(-62135596800000)}, {Key: "null", Value: nil},
			{Key: "regex", Value: bson.Regex{Pattern: "^a.*b$", Options: "imsx"}}, {Key: "emptyregex", Value: bson.Regex{}},
			{Key: "js", Value: bson.JavaScript("function() {}")}, {Key: "symbol", Value: bson.Symbol("sym")},
			{Key: "int32", Value: int32(math.MinInt32)}, {Key: "ts", Value: bson.Timestamp{T: 4000000000, I: 7}},
			{Key: "int64", Value: int64(math.MaxInt64)}, {Key: "dec", Value: d128},
			{Key: "max", Value: bson.MaxKey{}}, {Key: "min", Value: bson.MinKey{}},
			{Key: "", Value: "empty key"}, {Key: "ключ", Value: int32(2)}, {Key: "dup", Value: int32(1)}, {Key: "dup", Value: int32(2)},
		},
		bson.D{{Key: "deep", Value: deep}},
		// What bson.Unmarshal decodes, decodeDoc hands back to it.
		bson.D{{Key: "cws", Value: bson.CodeWithScope{Code: "x", Scope: bson.D{{Key: "y", Value: int32(1)}}}}},
		bson.D{{Key: "ptr", Value: bson.DBPointer{DB: "db.c", Pointer: oid}}},
		bson.D{{Key: "nested", Value: bson.A{bson.D{{Key: "cws", Value: bson.CodeWithScope{Code: "x", Scope: bson.D{}}}}}}},
	}
	var out [][]byte
	for _, d := range docs {
		out = append(out, mustDoc(t, d))
	}
	return out
}

// sameAsUnmarshal fails when decodeD and bson.Unmarshal disagree on raw.
func sameAsUnmarshal(t *testing.T, raw []byte) {
	t.Helper()
	var want bson.D
	wantErr := bson.Unmarshal(raw, &want)
	if want == nil {
		want = bson.D{}
	}
	// Decode a copy and scribble over it afterwards: what decodeD built
	// must not share the message's bytes, which the connection reuses.
	buf := append([]byte(nil), raw...)
	got, err := decodeD(buf, "doc")
	for i := range buf {
		buf[i] = 0xee
	}
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeD error %v, bson.Unmarshal error %v, on %x", err, wantErr, raw)
	}
	if err == nil && !sameValue(got, want) {
		t.Fatalf("decodeD gives\n%#v\nbson.Unmarshal gives\n%#v\nfor %x", got, want, raw)
	}
	// decodeDocShared (strings sharing the bytes) builds the same, and
	// decodes exactly what decodeDoc decodes.
	own := append([]byte(nil), raw...)
	shared, sok := decodeDocShared(own)
	if _, ok := decodeDoc(raw); ok != sok {
		t.Fatalf("decodeDoc decodes %x: %v, decodeDocShared: %v", raw, ok, sok)
	}
	if sok && !sameValue(shared, want) {
		t.Fatalf("decodeDocShared gives\n%#v\nbson.Unmarshal gives\n%#v\nfor %x", shared, want, raw)
	}
}

// sameValue is reflect.DeepEqual with doubles compared bit for bit (NaN is
// not DeepEqual to itself), also inside a code with scope's scope.
func sameValue(a, b any) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	switch x := a.(type) {
	case float64:
		return math.Float64bits(x) == math.Float64bits(b.(float64))
	case bson.CodeWithScope:
		y := b.(bson.CodeWithScope)
		return x.Code == y.Code && sameValue(x.Scope, y.Scope)
	case bson.D:
		y := b.(bson.D)
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !sameValue(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y := b.(bson.A)
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestDecodeDocMatchesUnmarshal(t *testing.T) {
	for i, raw := range decodeCases(t) {
		if err := validateDoc(raw); err != nil {
			t.Fatalf("case %d is not valid BSON: %v", i, err)
		}
		sameAsUnmarshal(t, raw)
	}
	// decodeDoc itself decodes everything but code with scope and
	// DBPointer (an old binary whose lengths disagree, which it also
	// leaves, the validator rejects).
	cases := decodeCases(t)
	for i, raw := range cases[:4] {
		if _, ok := decodeDoc(raw); !ok {
			t.Errorf("case %d: decodeDoc fell back to bson.Unmarshal", i)
		}
	}
	for i, raw := range cases[4:] {
		if _, ok := decodeDoc(raw); ok {
			t.Errorf("case %d: decodeDoc decoded what it must leave to bson.Unmarshal", 4+i)
		}
	}
}

// FuzzDecodeDoc: on every document the wire validator accepts, decodeD
// and bson.Unmarshal build the same bson.D; on anything else decodeDoc
// does not panic. The seeds are decodeCases, 200 random documents and
// MongoDB's spec test files of up to 4 KiB when they are there (specDocs).
func FuzzDecodeDoc(f *testing.F) {
	for _, raw := range decodeCases(f) {
		f.Add(raw)
	}
	for _, raw := range genDocs(f, 200) {
		f.Add(raw)
	}
	for _, raw := range specDocs(f) {
		if len(raw) <= 4096 { // larger ones make slow seeds
			f.Add(raw)
		}
	}
	f.Fuzz(checkDecode)
}

func BenchmarkDecodeCommand(b *testing.B) {
	raw := mustDoc(b, bson.D{
		{Key: "_id", Value: int32(12345)},
		{Key: "customer", Value: "customer-xxxxxxxxxxxxxxxxxxxx"},
		{Key: "status", Value: "new"},
		{Key: "payload", Value: string(make([]byte, 900))},
		{Key: "n", Value: int64(12345)},
		{Key: "tags", Value: bson.A{"a", "b", bson.D{{Key: "k", Value: 1.5}}}},
	})
	b.Run("decodeDoc", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := decodeDoc(raw); !ok {
				b.Fatal("fell back")
			}
		}
	})
	b.Run("bson.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var d bson.D
			if err := bson.Unmarshal(raw, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
