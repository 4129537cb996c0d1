package hashkey

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func mustOID(t *testing.T, hex string) bson.ObjectID {
	t.Helper()
	id, err := bson.ObjectIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustDec(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkHash asserts Hash(v) == want, and that hashing the value's BSON
// encoding with HashRaw agrees.
func checkHash(t *testing.T, name string, v any, want int64) {
	t.Helper()
	got, err := Hash(v)
	if err != nil {
		t.Errorf("%s: Hash(%#v): %v", name, v, err)
		return
	}
	if got != want {
		t.Errorf("%s: Hash(%#v) = %d, want %d", name, v, got, want)
	}
	if v == nil {
		v = bson.Null{} // MarshalValue has no encoder for a bare nil
	}
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Errorf("%s: MarshalValue: %v", name, err)
		return
	}
	raw, err := HashRaw(bson.RawValue{Type: typ, Value: data})
	if err != nil {
		t.Errorf("%s: HashRaw: %v", name, err)
		return
	}
	if raw != want {
		t.Errorf("%s: HashRaw = %d, want %d", name, raw, want)
	}
}

// TestManualExample checks the example in the MongoDB manual's
// $toHashedIndexKey page: "string to hash" -> Long("763543691661428748").
func TestManualExample(t *testing.T) {
	checkHash(t, "manual", "string to hash", 763543691661428748)
}

// The vectors below are the hard-coded expected values of the server's own
// unit test, src/mongo/db/hasher_test.cpp in mongodb/mongo ("determined
// experimentally ... to ensure the hash function is consistent across
// platforms and server versions"), all with seed 0.

func TestServerVectorsNumbers(t *testing.T) {
	cases := []struct {
		name string
		vals []any
		want int64
	}{
		{"42", []any{int32(42), 42.123, int64(42)}, -944302157085130861},
		{"0", []any{int32(0), 0.456, int64(0), math.NaN(), math.Copysign(0, -1), mustDec(t, "0"), mustDec(t, "-0E+10")}, 4854801880128277513},
		{"1", []any{int32(1), 1.987, int64(1)}, 5902408780260971510},
		{"-1", []any{int32(-1), -1.789, int64(-1)}, 1140205862565771219},
		{"MinInt32", []any{int32(math.MinInt32), float64(math.MinInt32), int64(math.MinInt32)}, 6165898260261354870},
		{"MaxInt32", []any{int32(math.MaxInt32), float64(math.MaxInt32), int64(math.MaxInt32)}, 1143184177162245883},
		{"MaxInt64", []any{math.MaxFloat64, int64(math.MaxInt64), math.Inf(1)}, 921523596458303250},
		{"MinInt64", []any{-math.MaxFloat64, int64(math.MinInt64), math.Inf(-1)}, 4532067210535695462},
	}
	for _, c := range cases {
		for _, v := range c.vals {
			checkHash(t, c.name, v, c.want)
		}
	}
}

func TestServerVectorsOtherTypes(t *testing.T) {
	bytes6 := []byte{0, 1, 2, 3, 4, 6}
	uuid := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	cases := []struct {
		name string
		v    any
		want int64
	}{
		{"MinKey", bson.MinKey{}, 7961148599568647290},
		{"MaxKey", bson.MaxKey{}, 5504842513779440750},
		{"Undefined", bson.Undefined{}, 40158834000849533},
		{"Null", nil, 2338878944348059895},
		{"bson.Null", bson.Null{}, 2338878944348059895},
		{"string abc", "abc", 8478485326885698097},
		{"symbol abc", bson.Symbol("abc"), 8478485326885698097},
		{"empty string", "", 2049396243249673340},
		{"empty symbol", bson.Symbol(""), 2049396243249673340},
		{"object", bson.D{{Key: "a", Value: "abc"}, {Key: "b", Value: int64(123)}}, 4771603801758380216},
		{"empty object", bson.D{}, 7980500913326740417},
		{"array", bson.A{"bar", "baz", "qux"}, -2938911267422831539},
		{"empty array", bson.A{}, 8849948234993459283},
		{"binary general", bson.Binary{Subtype: 0, Data: bytes6}, 7252465090394235301},
		{"binary custom", bson.Binary{Subtype: 128, Data: bytes6}, 5736670452907618262},
		{"binary uuid", bson.Binary{Subtype: 4, Data: uuid}, 6084661258071355978},
		{"oid", mustOID(t, "010203040506070809101112"), -5588663249627035708},
		{"oid zero", mustOID(t, "000000000000000000000000"), -4293118519463489418},
		{"true", true, 6405873908747105701},
		{"false", false, 6289544573401934092},
		{"date", bson.DateTime(0x5566778811223344), 4476222765095560467},
		{"date zero", bson.DateTime(0), -1178696894582842035},
		{"regex", bson.Regex{Pattern: "mongodb"}, -7275792090268217043},
		{"regex flags", bson.Regex{Pattern: ".*", Options: "i"}, 7095855029187981886},
		{"dbref c", bson.DBPointer{DB: "c", Pointer: mustOID(t, "010203040506070809101112")}, 940175826736461384},
		{"dbref db.c", bson.DBPointer{DB: "db.c", Pointer: mustOID(t, "010203040506070809101112")}, 2426768198104018194},
		{"code", bson.JavaScript("func f() { return 1; }"), 6861638109178014270},
		{"code w scope", bson.CodeWithScope{Code: "func f() { return 1; }", Scope: bson.D{{Key: "c", Value: true}}}, 501342939894575968},
		// hasher.cpp's start-up self test: BSON("check" << 42).
		{"startup check", int32(42), -944302157085130861},
	}
	for _, c := range cases {
		checkHash(t, c.name, c.v, c.want)
	}
}
