package resumetoken

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Parse decodes a resume token document as given in resumeAfter or
// startAfter: {_data: <hex string>, _typeBits?: BinData(0)}. Other fields are
// ignored, like the server does. Errors are *Error with the server's code:
// 40647 when _data is missing or not a string, 40648 when _typeBits is not
// BinData subtype 0, and Decode's codes otherwise.
func Parse(doc bson.Raw) (Token, error) {
	dataVal, err := doc.LookupErr("_data")
	if err != nil {
		return Token{}, newErr(40647, "Bad resume token: _data of missing or of wrong type. Expected string, got %s", docString(doc))
	}
	data, ok := dataVal.StringValueOK()
	if !ok {
		return Token{}, newErr(40647, "Bad resume token: _data of missing or of wrong type. Expected string, got %s", docString(doc))
	}
	var typeBits []byte
	if tbVal, err := doc.LookupErr("_typeBits"); err == nil {
		sub, b, ok := tbVal.BinaryOK()
		if !ok || sub != 0 {
			return Token{}, newErr(40648, "Bad resume token: _typeBits of wrong type %s", docString(doc))
		}
		typeBits = b
	}
	return Decode(data, typeBits)
}

func docString(doc bson.Raw) string {
	if err := doc.Validate(); err != nil {
		return "<invalid BSON>"
	}
	return doc.String()
}

// Decode is the inverse of Encode: it decodes the _data hex string (either
// case) and the type bits (nil or empty when all zero) of a resume token. It
// accepts what a real server accepts and fails with the codes it uses
// (resume_token.cpp): 9 bad hex; 40649 empty; 50796/50854/50795 version;
// 51055/51056/51057 tokenType; 50793/50855/50794 txnOpIndex; 50872/50870
// fromInvalidate; 6189500 missing UUID slot (v2); 207 bad UUID; 6189504
// high-water mark with an event identifier; 6189501 v2 event without one;
// 6189503 event identifier not a document; 7182501 bad fragmentNum; 40646
// trailing values; KeyString format errors (15, 50811, 50816, 50615, ...).
// As on the server, bytes after the end-of-key marker are ignored.
func Decode(data string, typeBits []byte) (Token, error) {
	if len(data)%2 != 0 {
		return Token{}, newErr(mongoerr.CodeFailedToParse, "resume token string was not a valid hex string")
	}
	ks, err := hex.DecodeString(data)
	if err != nil {
		return Token{}, newErr(mongoerr.CodeFailedToParse, "resume token string was not a valid hex string")
	}
	tb, err := newTypeBitsReader(typeBits)
	if err != nil {
		return Token{}, err
	}
	elems, err := decodeKeyString(ks, tb)
	if err != nil {
		return Token{}, err
	}
	return tokenFromElements(elems)
}

type element struct {
	t byte
	v []byte
}

// decodeKeyString decodes the top-level values of a KeyString into BSON.
func decodeKeyString(ks []byte, tb *typeBitsReader) ([]element, error) {
	d := decoder{b: ks, tb: tb}
	doc := []byte{0, 0, 0, 0}
	for i := 0; d.off < len(d.b); i++ {
		c, _ := d.byte1()
		if c == ksLess || c == ksGreater {
			var err error
			if c, err = d.byte1(); err != nil {
				return nil, err
			}
		}
		if c == ksEnd {
			break
		}
		var err error
		if doc, err = d.value(c, doc, strconv.Itoa(i), 1); err != nil {
			return nil, err
		}
	}
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	var elems []element
	err := forEachElement(doc, func(t byte, _ string, v []byte) error {
		elems = append(elems, element{t, v})
		return nil
	})
	return elems, err
}

func tokenFromElements(elems []element) (Token, error) {
	var t Token
	next := func() (element, bool) {
		if len(elems) == 0 {
			return element{}, false
		}
		e := elems[0]
		elems = elems[1:]
		return e, true
	}
	int32Of := func(e element) (int32, bool) {
		if e.t != bsonInt32 {
			return 0, false
		}
		return int32(binary.LittleEndian.Uint32(e.v)), true
	}

	e, ok := next()
	if !ok {
		return t, newErr(40649, "invalid empty resume token")
	}
	// BSONElement::timestamp(): a Timestamp or Date's 8 bytes, else zero.
	if e.t == bsonTimestamp || e.t == bsonDateTime {
		v := binary.LittleEndian.Uint64(e.v)
		t.ClusterTime = bson.Timestamp{T: uint32(v >> 32), I: uint32(v)}
	}

	if e, ok = next(); !ok {
		return t, newErr(50796, "Resume Token does not contain version")
	}
	v, ok := int32Of(e)
	if !ok {
		return t, newErr(50854, "Invalid resume token: wrong type for version")
	}
	if v < 0 || v > 2 {
		return t, newErr(50795, "Invalid Resume Token: only supports version 0, 1 and 2")
	}
	t.Version = int(v)
	t.TokenType = TypeEvent

	if t.Version >= 1 {
		if e, ok = next(); !ok {
			return t, newErr(51055, "Resume Token does not contain tokenType")
		}
		tt, ok := int32Of(e)
		if !ok {
			return t, newErr(51056, "Resume Token tokenType is not an int.")
		}
		if tt != TypeEvent && tt != TypeHighWaterMark {
			return t, newErr(51057, "Token type %d not recognized", tt)
		}
		t.TokenType = int(tt)
	}

	if e, ok = next(); !ok {
		return t, newErr(50793, "Resume Token does not contain txnOpIndex")
	}
	idx, ok := int32Of(e)
	if !ok {
		return t, newErr(50855, "Resume Token txnOpIndex is not an integer")
	}
	if idx < 0 {
		return t, newErr(50794, "Invalid Resume Token: txnOpIndex should be non-negative")
	}
	t.TxnOpIndex = int(idx)

	if t.Version >= 1 {
		if e, ok = next(); !ok {
			return t, newErr(50872, "Resume Token does not contain fromInvalidate")
		}
		if e.t != bsonBool {
			return t, newErr(50870, "Resume Token fromInvalidate is not a boolean.")
		}
		t.FromInvalidate = e.v[0] != 0
	}

	if e, ok = next(); !ok {
		if t.Version >= 2 {
			return t, newErr(6189500, "Expected UUID or null")
		}
		return t, nil
	}
	if e.t != bsonNull {
		if e.t != bsonBinary || e.v[4] != 4 || binary.LittleEndian.Uint32(e.v) != 16 {
			return t, newErr(mongoerr.CodeInvalidUUID, "uuid must be a 16-byte binary field with UUID (4) subtype")
		}
		t.UUID = append([]byte(nil), e.v[5:21]...)
	}

	if t.TokenType == TypeHighWaterMark && len(elems) > 0 {
		return t, newErr(6189504, "Invalid high water mark token")
	}
	if e, ok = next(); !ok {
		if t.TokenType == TypeEvent && t.Version >= 2 {
			return t, newErr(6189501, "Expected an eventIdentifier for an event resume token")
		}
		return t, nil
	}
	if e.t != bsonDocument {
		return t, newErr(6189503, "Resume Token eventIdentifier is not an object")
	}
	var id bson.D
	if err := bson.Unmarshal(e.v, &id); err != nil {
		return t, newErr(mongoerr.CodeFailedToParse, "Resume Token eventIdentifier: %v", err)
	}
	if id == nil {
		id = bson.D{}
	}
	t.EventIdentifier = id

	if len(elems) > 0 && t.Version >= 2 {
		e, _ = next()
		n, ok := int32Of(e)
		if !ok || n < 0 {
			return t, newErr(7182501, "Resume token 'fragmentNum' must be a non-negative integer.")
		}
		f := int(n)
		t.FragmentNum = &f
	}
	if len(elems) > 0 {
		return t, newErr(40646, "invalid oversized resume token")
	}
	return t, nil
}
