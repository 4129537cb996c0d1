package resumetoken

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDecodeErrors(t *testing.T) {
	const ts = "820000000100000002"
	uuid := "5A1004" + strings.ToUpper(hex.EncodeToString(testUUID))
	tests := []struct {
		name     string
		data     string
		typeBits []byte
		code     int32
	}{
		{"odd hex", "823", nil, 9},
		{"bad hex digit", "8G", nil, 9},
		{"empty", "", nil, 40649},
		{"only end", "04", nil, 40649},
		{"no version", ts + "04", nil, 50796},
		{"version 3", ts + "2B0604", nil, 50795},
		{"version int64", ts + "2B0204", []byte{0x02}, 50854},
		{"no tokenType", ts + "2B0204", nil, 51055},
		{"tokenType 5", ts + "2B022B0A04", nil, 51057},
		{"tokenType double", ts + "2B022904", []byte{0x04}, 51056},
		{"no txnOpIndex", ts + "2B022904", nil, 50793},
		{"negative txnOpIndex", ts + "2B022927FD04", nil, 50794},
		{"txnOpIndex int64", ts + "2B02292904", []byte{0x20}, 50855},
		{"no fromInvalidate", ts + "2B02292904", nil, 50872},
		{"fromInvalidate not bool", ts + "2B0229292904", nil, 50870},
		{"v2 without UUID slot", ts + "2B042C0100296E04", nil, 6189500},
		{"UUID slot holds a string", ts + "2B042C0100296E3C610004", nil, 207},
		{"UUID of subtype 0", ts + "2B042C0100296E5A1000" + strings.Repeat("00", 16) + "04", nil, 207},
		{"HWM with identifier", ts + "2B0429296E14460004", nil, 6189504},
		{"v2 event without identifier", ts + "2B042C0100296E1404", nil, 6189501},
		{"identifier not an object", ts + "2B042C0100296E142904", nil, 6189503},
		{"negative fragmentNum", ts + "2B042C0100296E14460027FD04", nil, 7182501},
		{"v1 trailing value", ts + "2B022C0100296E" + uuid + "46002904", nil, 40646},
		{"v2 trailing after fragmentNum", ts + "2B042C0100296E144600292904", nil, 40646},
		{"unknown ctype", ts + "0504", nil, 50811},
		{"truncated timestamp", "8200", nil, 15},
		{"unterminated field name", ts + "2B042C0100296E14463C6162", nil, 50816},
		{"truncated object", ts + "2B042C0100296E14461E6100", nil, 15},
		{"type bits too short", ts + "2B022C0100296E" + uuid + "461E61002B021E62002B020004", []byte{0x81, 0x00}, 50615},
		{"type bits overlong size", ts + "2B0229296E04", []byte{0x80, 5, 0, 0, 0, 1, 1, 1, 1, 1}, 50910},
		{"type bits size past end", ts + "2B0229296E04", []byte{0x85, 0x01}, 15},
		{"int32 type bits on a fraction", ts + "2B022C0100296E" + uuid + "461E5F6964002B038000000000000000", nil, 50810},
		{"NaN as int32", ts + "2B022C0100296E" + uuid + "461E5F6964001E0004", nil, 50819},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Decode(tc.data, tc.typeBits)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode = %+v, %v; want *Error code %d", tok, err, tc.code)
			}
			if e.Code != tc.code {
				t.Errorf("code = %d (%v), want %d", e.Code, err, tc.code)
			}
		})
	}
}

func TestDecodeLenient(t *testing.T) {
	tok := Token{ClusterTime: bson.Timestamp{T: 3, I: 4}, Version: 1, TokenType: TypeHighWaterMark}
	data, _ := tok.Encode()
	for name, d := range map[string]string{
		"lower case":                  strings.ToLower(data),
		"bytes after end of key":      data + "FFEE",
		"exclusive-after marker":      strings.TrimSuffix(data, "04") + "FE04",
		"end of input without marker": strings.TrimSuffix(data, "04"),
	} {
		got, err := Decode(d, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if Compare(got, tok) != 0 {
			t.Errorf("%s: decoded %+v", name, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	hwm, _ := Token{Version: 2}.Encode()
	tests := []struct {
		name string
		doc  bson.D
		code int32
	}{
		{"no _data", bson.D{}, 40647},
		{"_data not a string", bson.D{{Key: "_data", Value: int32(1)}}, 40647},
		{"_typeBits not binary", bson.D{{Key: "_data", Value: hwm}, {Key: "_typeBits", Value: "x"}}, 40648},
		{"_typeBits subtype 4", bson.D{{Key: "_data", Value: hwm}, {Key: "_typeBits", Value: bson.Binary{Subtype: 4, Data: []byte{1}}}}, 40648},
		{"bad hex", bson.D{{Key: "_data", Value: "XYZ"}}, 9},
	}
	for _, tc := range tests {
		raw, err := bson.Marshal(tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(raw)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: err = %v, want code %d", tc.name, err, tc.code)
		}
	}
	// Unknown fields are ignored, as on the server.
	raw, _ := bson.Marshal(bson.D{{Key: "_data", Value: hwm}, {Key: "extra", Value: true}})
	if _, err := Parse(raw); err != nil {
		t.Errorf("extra field: %v", err)
	}
}

func TestValidate(t *testing.T) {
	one := 1
	tests := []struct {
		name string
		tok  Token
		code int32
	}{
		{"version 3", Token{Version: 3}, 50795},
		{"token type 7", Token{Version: 2, TokenType: 7}, 51057},
		{"negative txnOpIndex", Token{Version: 1, TokenType: TypeEvent, TxnOpIndex: -1}, 50794},
		{"huge txnOpIndex", Token{Version: 1, TokenType: TypeEvent, TxnOpIndex: 1 << 30}, 50855},
		{"short UUID", Token{Version: 1, TokenType: TypeEvent, UUID: []byte{1}}, 207},
		{"HWM with UUID", Token{Version: 2, UUID: testUUID}, 6189505},
		{"HWM with txnOpIndex", Token{Version: 2, TxnOpIndex: 1}, 6189505},
		{"v1 identifier without UUID", Token{Version: 1, TokenType: TypeEvent, EventIdentifier: bson.D{}}, 50788},
		{"v2 event without identifier", Token{Version: 2, TokenType: TypeEvent}, 6189502},
		{"v1 fragmentNum", Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, FragmentNum: &one}, 7182504},
		{"v0 high-water mark", Token{Version: 0, TokenType: TypeHighWaterMark}, 9},
	}
	for _, tc := range tests {
		err := tc.tok.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: Validate = %v, want code %d", tc.name, err, tc.code)
		}
		if d, _ := tc.tok.Encode(); d != "" {
			t.Errorf("%s: invalid token encoded as %s", tc.name, d)
		}
	}
}
