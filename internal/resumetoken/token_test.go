package resumetoken

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var testUUID = []byte{0x6E, 0x5A, 0x10, 0x04, 0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF}

func TestRealV1EventToken(t *testing.T) {
	tok := Token{
		ClusterTime:     bson.Timestamp{T: 0x5F103409, I: 4},
		Version:         1,
		TokenType:       TypeEvent,
		UUID:            testUUID,
		EventIdentifier: bson.D{{Key: "_id", Value: int32(2)}},
	}
	want := "825F103409000000042B022C0100296E5A1004" + strings.ToUpper(hex.EncodeToString(testUUID)) + "461E5F6964002B040004"
	data, tb := tok.Encode()
	if data != want {
		t.Fatalf("Encode =\n %s\nwant\n %s", data, want)
	}
	if tb != nil {
		t.Errorf("type bits = %x, want none", tb)
	}
	got, err := Decode(data, tb)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tok) {
		t.Errorf("Decode = %+v, want %+v", got, tok)
	}
}

func TestHighWaterMarks(t *testing.T) {
	ts := bson.Timestamp{T: 0x5F103409, I: 4}
	for _, tc := range []struct {
		version int
		want    string
	}{
		{1, "825F103409000000042B0229296E04"},
		{2, "825F103409000000042B0429296E1404"},
	} {
		tok := Token{ClusterTime: ts, Version: tc.version, TokenType: TypeHighWaterMark}
		data, tb := tok.Encode()
		if data != tc.want || tb != nil {
			t.Errorf("v%d HWM = %s %x, want %s", tc.version, data, tb, tc.want)
		}
		got, err := Decode(data, nil)
		if err != nil || !reflect.DeepEqual(got, tok) {
			t.Errorf("v%d HWM decode = %+v, %v", tc.version, got, err)
		}
	}
}

func TestNumericTypesShareData(t *testing.T) {
	mk := func(v any) Token {
		return Token{ClusterTime: bson.Timestamp{T: 100, I: 1}, Version: 2, TokenType: TypeEvent, UUID: testUUID,
			EventIdentifier: bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: v}}}}}
	}
	values := []any{int32(5), int64(5), float64(5)}
	var datas []string
	var tbs [][]byte
	for _, v := range values {
		tok := mk(v)
		d, tb := tok.Encode()
		datas = append(datas, d)
		tbs = append(tbs, tb)
		got, err := Decode(d, tb)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(got, tok) {
			t.Errorf("%T: decoded %+v", v, got.EventIdentifier)
		}
	}
	if datas[0] != datas[1] || datas[1] != datas[2] {
		t.Errorf("_data differs across numeric types:\n%s\n%s\n%s", datas[0], datas[1], datas[2])
	}
	if tbs[0] != nil {
		t.Errorf("int32 type bits = %x, want none", tbs[0])
	}
	if tbs[1] == nil || tbs[2] == nil || bytes.Equal(tbs[1], tbs[2]) {
		t.Errorf("int64/double type bits = %x / %x, want distinct non-empty", tbs[1], tbs[2])
	}
	// Without the type bits, the int64 token decodes as int32.
	got, err := Decode(datas[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, mk(int32(5))) {
		t.Errorf("decoding without type bits = %+v", got.EventIdentifier)
	}
}

func TestTypeBitsBytes(t *testing.T) {
	// v2 event with documentKey {_id: int64(1)}: type bits are
	// version 00, tokenType 00, txnOpIndex 00, "insert" 0, int64 01 => bit 8
	// set: two data bytes {0x00, 0x01} => 0x82 0x00 0x01.
	tok := Token{Version: 2, TokenType: TypeEvent, UUID: testUUID,
		EventIdentifier: bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int64(1)}}}}}
	_, tb := tok.Encode()
	if want := []byte{0x82, 0x00, 0x01}; !bytes.Equal(tb, want) {
		t.Errorf("type bits = %x, want %x", tb, want)
	}
	// v1 with {_id: 1.5}: version 00, tokenType 00, txnOpIndex 00, double 10
	// => bit 6 set: one byte 0x40.
	tok = Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: 1.5}}}
	data, tb := tok.Encode()
	if want := []byte{0x40}; !bytes.Equal(tb, want) {
		t.Errorf("type bits = %x, want %x", tb, want)
	}
	// 1.5 (fractions fill 8 bytes): ctype Positive8ByteInt-7 = 2B, then the
	// integer part with the fraction bit (1<<1|1 = 03), then the fraction
	// 0.5 in 7 bytes (80 00..), the low 2 bits being the marker "equal to
	// double" (0).
	if !strings.HasSuffix(data, "461E5F6964002B03800000000000000004") {
		t.Errorf("1.5 encoded as %s", data)
	}
}

func TestDocumentAndParse(t *testing.T) {
	tok := Token{ClusterTime: bson.Timestamp{T: 7, I: 9}, Version: 2, TokenType: TypeEvent, UUID: testUUID,
		EventIdentifier: bson.D{{Key: "operationType", Value: "delete"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: 2.25}}}}}
	doc := tok.Document()
	if len(doc) != 2 || doc[0].Key != "_data" || doc[1].Key != "_typeBits" {
		t.Fatalf("Document = %v", doc)
	}
	if b, ok := doc[1].Value.(bson.Binary); !ok || b.Subtype != 0 {
		t.Fatalf("_typeBits = %#v", doc[1].Value)
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tok) {
		t.Errorf("Parse = %+v, want %+v", got, tok)
	}
	// A token with int32-only values has no _typeBits.
	hwm := Token{ClusterTime: bson.Timestamp{T: 1}, Version: 2}
	if d := hwm.Document(); len(d) != 1 {
		t.Errorf("HWM Document = %v", d)
	}
}

func TestSpecialNumbers(t *testing.T) {
	negZero := math.Copysign(0, -1)
	values := []any{
		0.0, negZero, math.Inf(1), math.Inf(-1), 0.5, -0.5, 1e-300, -1e-300, 5e-324, math.Ldexp(1, -255), math.Ldexp(1, -256),
		math.MaxFloat64, -math.MaxFloat64, math.Ldexp(1, 63), -math.Ldexp(1, 63), math.Ldexp(1, 52) + 0.5, 123.456, -123.456,
		int64(math.MinInt64), int64(math.MaxInt64), int32(math.MinInt32), int32(math.MaxInt32), int64(0), int32(0),
		int64(-1), int64(1 << 40), -float64(1 << 40),
	}
	for _, v := range values {
		tok := Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: v}}}
		data, tb := tok.Encode()
		if data == "" {
			t.Fatalf("%v (%T) did not encode: %v", v, v, tok.Validate())
		}
		got, err := Decode(data, tb)
		if err != nil {
			t.Fatalf("%v (%T): %v", v, v, err)
		}
		gv := got.EventIdentifier[0].Value
		if reflect.TypeOf(gv) != reflect.TypeOf(v) || gv != v {
			t.Errorf("%v (%T) decoded as %v (%T)", v, v, gv, gv)
		}
		if f, ok := v.(float64); ok && math.Signbit(f) != math.Signbit(gv.(float64)) {
			t.Errorf("%v lost its sign", v)
		}
	}
	nan := Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: math.NaN()}}}
	data, tb := nan.Encode()
	if !strings.HasSuffix(data, "461E5F6964001E0004") {
		t.Errorf("NaN encoded as %s", data)
	}
	got, err := Decode(data, tb)
	if err != nil || !math.IsNaN(got.EventIdentifier[0].Value.(float64)) {
		t.Errorf("NaN decoded as %v, %v", got.EventIdentifier, err)
	}
}

func TestAllTypesRoundTrip(t *testing.T) {
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	key := bson.D{
		{Key: "s", Value: "a\x00b\x00"},
		{Key: "sym", Value: bson.Symbol("sym")},
		{Key: "oid", Value: oid},
		{Key: "t", Value: true},
		{Key: "f", Value: false},
		{Key: "date", Value: bson.DateTime(-1234567)},
		{Key: "ts", Value: bson.Timestamp{T: 42, I: 7}},
		{Key: "null", Value: nil},
		{Key: "min", Value: bson.MinKey{}},
		{Key: "max", Value: bson.MaxKey{}},
		{Key: "undef", Value: bson.Undefined{}},
		{Key: "bin", Value: bson.Binary{Subtype: 0x80, Data: []byte{1, 2, 3}}},
		{Key: "bigbin", Value: bson.Binary{Subtype: 0, Data: bytes.Repeat([]byte{7}, 300)}},
		{Key: "oldbin", Value: bson.Binary{Subtype: 2, Data: []byte{9, 9}}},
		{Key: "doc", Value: bson.D{{Key: "a", Value: bson.A{int32(1), "x", bson.D{}, bson.A{}}}}},
		{Key: "re", Value: bson.Regex{Pattern: "^a.*", Options: "i"}},
		{Key: "js", Value: bson.JavaScript("function(){}")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "x", Scope: bson.D{{Key: "y", Value: int32(1)}}}},
		{Key: "dbp", Value: bson.DBPointer{DB: "db.c", Pointer: oid}},
		{Key: "dec", Value: mustDecimal(t, "2.50")},
		{Key: "dec0", Value: mustDecimal(t, "-0.000")},
		{Key: "decInf", Value: mustDecimal(t, "-Infinity")},
		{Key: "decBig", Value: mustDecimal(t, "1.000000000000000000000000000000000E+20")},
	}
	tok := Token{ClusterTime: bson.Timestamp{T: 1, I: 2}, Version: 2, TokenType: TypeEvent, UUID: testUUID,
		EventIdentifier: bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: key}}}
	data, tb := tok.Encode()
	if data == "" {
		t.Fatalf("did not encode: %v", tok.Validate())
	}
	got, err := Decode(data, tb)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tok) {
		t.Errorf("round trip:\n got %v\nwant %v", got.EventIdentifier, tok.EventIdentifier)
	}
}

func mustDecimal(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecimalUnsupported(t *testing.T) {
	tok := Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: mustDecimal(t, "0.1")}}}
	var e *Error
	if err := tok.Validate(); !errors.As(err, &e) {
		t.Fatalf("Validate = %v, want *Error", err)
	}
	if d, tb := tok.Encode(); d != "" || tb != nil {
		t.Errorf("Encode of an invalid token = %q %x", d, tb)
	}
}
