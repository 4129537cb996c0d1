package resumetoken

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func fuzzSeeds() []Token {
	one := 1
	return []Token{
		{ClusterTime: bson.Timestamp{T: 0x5F103409, I: 4}, Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: int32(2)}}},
		{ClusterTime: bson.Timestamp{T: 9, I: 1}, Version: 2, TokenType: TypeHighWaterMark},
		{ClusterTime: bson.Timestamp{T: 9, I: 1}, Version: 2, TokenType: TypeEvent, UUID: testUUID, FragmentNum: &one,
			EventIdentifier: bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: -2.75}, {Key: "k", Value: int64(1 << 40)}, {Key: "s", Value: "a\x00b"}}}}},
	}
}

// checkDecoded asserts the properties every successful decode must have:
// a valid token re-encodes to something that decodes to the same encoding.
func checkDecoded(t *testing.T, tok Token) {
	t.Helper()
	if tok.Validate() != nil {
		return // e.g. a v1 token with a null UUID slot: accepted, not re-encodable
	}
	data, tb := tok.Encode()
	again, err := Decode(data, tb)
	if err != nil {
		t.Fatalf("re-encoded token does not decode: %v\n%+v\n%s %x", err, tok, data, tb)
	}
	data2, tb2 := again.Encode()
	if data2 != data || string(tb2) != string(tb) {
		t.Fatalf("encoding not stable:\n%s %x\n%s %x", data, tb, data2, tb2)
	}
}

func FuzzDecode(f *testing.F) {
	for _, tok := range fuzzSeeds() {
		data, tb := tok.Encode()
		f.Add(data, tb)
	}
	f.Add("825F103409000000042B0229296E04", []byte(nil))
	f.Add("", []byte{0x80, 5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data string, typeBits []byte) {
		tok, err := Decode(data, typeBits)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == 0 {
				t.Fatalf("error without a code: %T %v", err, err)
			}
			return
		}
		checkDecoded(t, tok)
	})
}

func FuzzParse(f *testing.F) {
	for _, tok := range fuzzSeeds() {
		raw, err := bson.Marshal(tok.Document())
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(raw))
	}
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, doc []byte) {
		raw := bson.Raw(doc)
		if raw.Validate() != nil {
			return // the server validates the command document before this point
		}
		tok, err := Parse(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == 0 {
				t.Fatalf("error without a code: %T %v", err, err)
			}
			return
		}
		checkDecoded(t, tok)
	})
}
