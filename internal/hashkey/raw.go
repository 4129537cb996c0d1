package hashkey

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// raw hashes an undecoded BSON value of type t. Scalars other than numbers
// contribute their value bytes verbatim, exactly as the server's
// BSONElement::value() / valuesize() do. exact requires data to hold the
// value and nothing else.
func (e *encoder) raw(t bson.Type, data []byte, name string, withName bool, depth int, exact bool) error {
	if depth > maxDepth {
		return fmt.Errorf("hashkey: value nested more than %d levels deep", maxDepth)
	}
	val, rem, ok := bsoncore.ReadValue(data, bsoncore.Type(t))
	if !ok || (exact && len(rem) != 0) {
		return fmt.Errorf("hashkey: malformed BSON %s value (%d bytes)", typeName(t), len(data))
	}
	data = val.Data
	switch t {
	case bson.TypeNull:
		return e.header(ctNull, name, withName)
	case bson.TypeUndefined:
		return e.header(ctEOO, name, withName)
	case bson.TypeMinKey:
		return e.header(ctMinKey, name, withName)
	case bson.TypeMaxKey:
		return e.header(ctMaxKey, name, withName)

	case bson.TypeInt32:
		return e.number(int64(int32(binary.LittleEndian.Uint32(data))), name, withName)
	case bson.TypeInt64:
		return e.number(int64(binary.LittleEndian.Uint64(data)), name, withName)
	case bson.TypeDouble:
		return e.number(doubleToInt64(math.Float64frombits(binary.LittleEndian.Uint64(data))), name, withName)
	case bson.TypeDecimal128:
		lo := binary.LittleEndian.Uint64(data[:8])
		hi := binary.LittleEndian.Uint64(data[8:16])
		return e.number(decimalToInt64(bson.NewDecimal128(hi, lo)), name, withName)

	case bson.TypeString, bson.TypeSymbol, bson.TypeJavaScript:
		if !validString(data) {
			return fmt.Errorf("hashkey: malformed BSON %s value", typeName(t))
		}
		ct := ctString
		if t == bson.TypeJavaScript {
			ct = ctCode
		}
		return e.verbatim(ct, data, name, withName)
	case bson.TypeBoolean:
		if data[0] > 1 {
			return fmt.Errorf("hashkey: malformed BSON boolean value %#x", data[0])
		}
		return e.verbatim(ctBool, data, name, withName)
	case bson.TypeObjectID:
		return e.verbatim(ctObjectID, data, name, withName)
	case bson.TypeDateTime:
		return e.verbatim(ctDate, data, name, withName)
	case bson.TypeTimestamp:
		return e.verbatim(ctTimestamp, data, name, withName)
	case bson.TypeBinary:
		return e.verbatim(ctBinData, data, name, withName)
	case bson.TypeRegex:
		return e.verbatim(ctRegex, data, name, withName)
	case bson.TypeDBPointer:
		if !validString(data[:len(data)-12]) {
			return fmt.Errorf("hashkey: malformed BSON DBPointer value")
		}
		return e.verbatim(ctDBPointer, data, name, withName)

	case bson.TypeEmbeddedDocument:
		if err := e.header(ctObject, name, withName); err != nil {
			return err
		}
		return e.rawElems(data, depth)
	case bson.TypeArray:
		if err := e.header(ctArray, name, withName); err != nil {
			return err
		}
		return e.rawElems(data, depth)
	case bson.TypeCodeWithScope:
		// int32 total length, string (int32 length, bytes, NUL), document.
		if len(data) < 4+4+1+5 {
			return fmt.Errorf("hashkey: malformed BSON code-with-scope value")
		}
		code := data[4:]
		n := int(int32(binary.LittleEndian.Uint32(code)))
		if n < 1 || 4+n > len(code) || !validString(code[:4+n]) {
			return fmt.Errorf("hashkey: malformed BSON code-with-scope value")
		}
		if err := e.header(ctCodeWScope, name, withName); err != nil {
			return err
		}
		e.buf = append(e.buf, code[4:4+n]...)
		return e.rawElems(code[4+n:], depth)
	}
	return fmt.Errorf("hashkey: cannot hash BSON type %#x", byte(t))
}

func (e *encoder) verbatim(ct int32, data []byte, name string, withName bool) error {
	if err := e.header(ct, name, withName); err != nil {
		return err
	}
	e.buf = append(e.buf, data...)
	return nil
}

// rawElems hashes the elements of an undecoded document or array, then the
// end-of-object element.
func (e *encoder) rawElems(doc []byte, depth int) error {
	if len(doc) < 5 || int(int32(binary.LittleEndian.Uint32(doc))) != len(doc) || doc[len(doc)-1] != 0 {
		return fmt.Errorf("hashkey: malformed BSON document (%d bytes)", len(doc))
	}
	body := doc[4 : len(doc)-1]
	for len(body) > 0 {
		t := bson.Type(body[0])
		i := bytes.IndexByte(body[1:], 0)
		if i < 0 {
			return fmt.Errorf("hashkey: malformed BSON document: unterminated field name")
		}
		name := string(body[1 : 1+i])
		val, rem, ok := bsoncore.ReadValue(body[2+i:], bsoncore.Type(t))
		if !ok {
			return fmt.Errorf("hashkey: malformed BSON document: bad %s value for field %q", typeName(t), name)
		}
		if err := e.raw(t, val.Data, name, true, depth+1, true); err != nil {
			return err
		}
		body = rem
	}
	e.end()
	return nil
}

// validString reports whether b is a well-formed BSON string value.
func validString(b []byte) bool {
	if len(b) < 5 {
		return false
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	return n >= 1 && 4+n == len(b) && b[len(b)-1] == 0
}

func typeName(t bson.Type) string {
	s := t.String()
	if s == "" {
		return fmt.Sprintf("type %#x", byte(t))
	}
	return s
}
