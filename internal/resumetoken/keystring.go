package resumetoken

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/ferry-io/ferry/mongoerr"
)

// maxDepth is the server's default maximum BSON nesting depth, enforced when
// decoding (the KeyString decoder fails with Overflow beyond it).
const maxDepth = 200

// encoder builds a KeyString V1 (all fields ascending) and its type bits.
type encoder struct {
	buf []byte
	tb  typeBitsWriter
}

// value appends one BSON value of type t whose raw bytes are v (v may extend
// past the value; only what the type needs is read). v comes from a
// validated BSON document, but every read is still bounds-checked.
func (e *encoder) value(t byte, v []byte, depth int) error {
	if depth > maxDepth {
		return newErr(mongoerr.CodeOverflow, "document nested too deeply")
	}
	short := func() error { return newErr(mongoerr.CodeFailedToParse, "truncated BSON value of type 0x%02x", t) }
	switch t {
	case bsonMinKey:
		e.buf = append(e.buf, ctMinKey)
	case bsonMaxKey:
		e.buf = append(e.buf, ctMaxKey)
	case bsonNull:
		e.buf = append(e.buf, ctNullish)
	case bsonUndefined:
		e.buf = append(e.buf, ctUndefined)
	case bsonBool:
		if len(v) < 1 {
			return short()
		}
		if v[0] != 0 {
			e.buf = append(e.buf, ctBoolTrue)
		} else {
			e.buf = append(e.buf, ctBoolFalse)
		}
	case bsonInt32:
		if len(v) < 4 {
			return short()
		}
		e.tb.bits(tbInt, 2)
		e.buf = appendInteger(e.buf, int64(int32(binary.LittleEndian.Uint32(v))))
	case bsonInt64:
		if len(v) < 8 {
			return short()
		}
		e.tb.bits(tbLong, 2)
		e.buf = appendInteger(e.buf, int64(binary.LittleEndian.Uint64(v)))
	case bsonDouble:
		if len(v) < 8 {
			return short()
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		if f == 0 && math.Signbit(f) {
			e.tb.bits(tbV1NegativeDouble0, 5)
		} else {
			e.tb.bits(tbDouble, 2)
		}
		e.buf = appendDouble(e.buf, f)
	case bsonDecimal128:
		if len(v) < 16 {
			return short()
		}
		return e.appendDecimal(binary.LittleEndian.Uint64(v[8:]), binary.LittleEndian.Uint64(v))
	case bsonString, bsonSymbol:
		s, ok := readBSONString(v)
		if !ok {
			return short()
		}
		if t == bsonSymbol {
			e.tb.bit(1)
		} else {
			e.tb.bit(0)
		}
		e.buf = append(e.buf, ctStringLike)
		e.appendStringLike(s)
	case bsonJavaScript:
		s, ok := readBSONString(v)
		if !ok {
			return short()
		}
		e.buf = append(e.buf, ctCode)
		e.appendStringLike(s)
	case bsonObjectID:
		if len(v) < 12 {
			return short()
		}
		e.buf = append(e.buf, ctOID)
		e.buf = append(e.buf, v[:12]...)
	case bsonDateTime:
		if len(v) < 8 {
			return short()
		}
		e.buf = append(e.buf, ctDate)
		e.buf = binary.BigEndian.AppendUint64(e.buf, binary.LittleEndian.Uint64(v)^(1<<63))
	case bsonTimestamp:
		if len(v) < 8 {
			return short()
		}
		// BSON stores the increment first, then the seconds: as a
		// little-endian uint64 that is seconds<<32 | increment.
		e.buf = append(e.buf, ctTimestamp)
		e.buf = binary.BigEndian.AppendUint64(e.buf, binary.LittleEndian.Uint64(v))
	case bsonBinary:
		if len(v) < 5 {
			return short()
		}
		n := int32(binary.LittleEndian.Uint32(v))
		if n < 0 || int64(n) > int64(len(v)-5) {
			return short()
		}
		e.buf = append(e.buf, ctBinData)
		if n < 0xff {
			e.buf = append(e.buf, byte(n))
		} else {
			e.buf = append(e.buf, 0xff)
			e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
		}
		e.buf = append(e.buf, v[4])
		e.buf = append(e.buf, v[5:5+n]...)
	case bsonRegex:
		p, rest, ok := cstring(v)
		if !ok {
			return short()
		}
		o, _, ok := cstring(rest)
		if !ok {
			return short()
		}
		e.buf = append(e.buf, ctRegEx)
		e.buf = append(e.buf, p...)
		e.buf = append(e.buf, 0)
		e.buf = append(e.buf, o...)
		e.buf = append(e.buf, 0)
	case bsonDBPointer:
		ns, ok := readBSONString(v)
		if !ok || len(v) < 4+len(ns)+1+12 {
			return short()
		}
		e.buf = append(e.buf, ctDBRef)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(len(ns)))
		e.buf = append(e.buf, ns...)
		e.buf = append(e.buf, v[4+len(ns)+1:4+len(ns)+1+12]...)
	case bsonCodeWithScope:
		if len(v) < 4 {
			return short()
		}
		code, ok := readBSONString(v[4:])
		if !ok {
			return short()
		}
		scope, ok := readBSONDoc(v[4+4+len(code)+1:])
		if !ok {
			return short()
		}
		e.buf = append(e.buf, ctCodeWithScope)
		e.appendStringLike(code)
		return e.objectBody(scope, depth+2)
	case bsonDocument:
		doc, ok := readBSONDoc(v)
		if !ok {
			return short()
		}
		e.buf = append(e.buf, ctObject)
		return e.objectBody(doc, depth+1)
	case bsonArray:
		doc, ok := readBSONDoc(v)
		if !ok {
			return short()
		}
		e.buf = append(e.buf, ctArray)
		err := forEachElement(doc, func(t byte, _ string, v []byte) error { return e.value(t, v, depth+1) })
		if err != nil {
			return err
		}
		e.buf = append(e.buf, 0)
	default:
		return newErr(mongoerr.CodeFailedToParse, "unknown BSON type 0x%02x", t)
	}
	return nil
}

// objectBody appends the fields of doc as (generic type, name, value)
// followed by a zero byte.
func (e *encoder) objectBody(doc []byte, depth int) error {
	err := forEachElement(doc, func(t byte, name string, v []byte) error {
		g, ok := genericCType(t)
		if !ok {
			return newErr(mongoerr.CodeFailedToParse, "unknown BSON type 0x%02x", t)
		}
		e.buf = append(e.buf, g)
		e.buf = append(e.buf, name...)
		e.buf = append(e.buf, 0)
		return e.value(t, v, depth)
	})
	if err != nil {
		return err
	}
	e.buf = append(e.buf, 0)
	return nil
}

// appendStringLike writes s with every NUL byte escaped as 00 FF, then 00.
func (e *encoder) appendStringLike(s string) {
	for i := 0; i < len(s); i++ {
		e.buf = append(e.buf, s[i])
		if s[i] == 0 {
			e.buf = append(e.buf, 0xFF)
		}
	}
	e.buf = append(e.buf, 0)
}

// --- raw BSON helpers ---

func readBSONString(v []byte) (string, bool) {
	if len(v) < 5 {
		return "", false
	}
	n := int32(binary.LittleEndian.Uint32(v))
	if n < 1 || int64(n) > int64(len(v)-4) || v[4+n-1] != 0 {
		return "", false
	}
	return string(v[4 : 4+n-1]), true
}

func readBSONDoc(v []byte) ([]byte, bool) {
	if len(v) < 5 {
		return nil, false
	}
	n := int32(binary.LittleEndian.Uint32(v))
	if n < 5 || int64(n) > int64(len(v)) || v[n-1] != 0 {
		return nil, false
	}
	return v[:n], true
}

func cstring(v []byte) (string, []byte, bool) {
	for i, c := range v {
		if c == 0 {
			return string(v[:i]), v[i+1:], true
		}
	}
	return "", nil, false
}

// valueSize returns the size of a BSON value of type t at the start of v.
func valueSize(t byte, v []byte) (int, bool) {
	if n, ok := fixedSize(t); ok {
		return n, len(v) >= n
	}
	switch t {
	case bsonString, bsonJavaScript, bsonSymbol:
		s, ok := readBSONString(v)
		return 4 + len(s) + 1, ok
	case bsonDocument, bsonArray, bsonCodeWithScope:
		if len(v) < 4 {
			return 0, false
		}
		n := int32(binary.LittleEndian.Uint32(v))
		return int(n), n >= 5 && int64(n) <= int64(len(v))
	case bsonBinary:
		if len(v) < 5 {
			return 0, false
		}
		n := int32(binary.LittleEndian.Uint32(v))
		return 5 + int(n), n >= 0 && int64(n) <= int64(len(v)-5)
	case bsonRegex:
		_, rest, ok := cstring(v)
		if !ok {
			return 0, false
		}
		_, rest, ok = cstring(rest)
		return len(v) - len(rest), ok
	case bsonDBPointer:
		s, ok := readBSONString(v)
		return 4 + len(s) + 1 + 12, ok && len(v) >= 4+len(s)+1+12
	}
	return 0, false
}

func fixedSize(t byte) (int, bool) {
	switch t {
	case bsonNull, bsonUndefined, bsonMinKey, bsonMaxKey:
		return 0, true
	case bsonBool:
		return 1, true
	case bsonInt32:
		return 4, true
	case bsonDouble, bsonDateTime, bsonTimestamp, bsonInt64:
		return 8, true
	case bsonObjectID:
		return 12, true
	case bsonDecimal128:
		return 16, true
	}
	return 0, false
}

// forEachElement calls f for each element of a BSON document.
func forEachElement(doc []byte, f func(t byte, name string, v []byte) error) error {
	if len(doc) < 5 {
		return newErr(mongoerr.CodeFailedToParse, "truncated BSON document")
	}
	rest := doc[4 : len(doc)-1]
	for len(rest) > 0 {
		t := rest[0]
		name, after, ok := cstring(rest[1:])
		if !ok {
			return newErr(mongoerr.CodeFailedToParse, "unterminated BSON field name")
		}
		n, ok := valueSize(t, after)
		if !ok {
			return newErr(mongoerr.CodeFailedToParse, "invalid BSON value of type 0x%02x in field %q", t, name)
		}
		if err := f(t, name, after[:n]); err != nil {
			return err
		}
		rest = after[n:]
	}
	return nil
}

// --- decoding ---

// decoder turns KeyString bytes back into BSON.
type decoder struct {
	b   []byte
	off int
	tb  *typeBitsReader
}

func (d *decoder) byte1() (byte, error) {
	if d.off >= len(d.b) {
		return 0, ksErr(mongoerr.CodeOverflow, "unexpected end of KeyString")
	}
	c := d.b[d.off]
	d.off++
	return c, nil
}

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || len(d.b)-d.off < n {
		return nil, ksErr(mongoerr.CodeOverflow, "unexpected end of KeyString")
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s, nil
}

func (d *decoder) u64(invert bool) (uint64, error) {
	s, err := d.take(8)
	if err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(s)
	if invert {
		v = ^v
	}
	return v, nil
}

// cstring reads bytes up to a zero byte (no NULs inside).
func (d *decoder) cstring() (string, error) {
	for i := d.off; i < len(d.b); i++ {
		if d.b[i] == 0 {
			s := string(d.b[d.off:i])
			d.off = i + 1
			return s, nil
		}
	}
	return "", ksErr(50816, "Failed to find null terminator in string.")
}

// stringLike reads a string whose NUL bytes are escaped as 00 FF.
func (d *decoder) stringLike() (string, error) {
	s, err := d.cstring()
	if err != nil {
		return "", err
	}
	for d.off < len(d.b) && d.b[d.off] == 0xFF {
		d.off++
		next, err := d.cstring()
		if err != nil {
			return "", err
		}
		s += "\x00" + next
	}
	return s, nil
}

// value decodes the value with the given ctype and appends it to dst as a
// BSON element named key.
func (d *decoder) value(ctype byte, dst []byte, key string, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, ksErr(mongoerr.CodeOverflow, "KeyString encoding exceeded maximum allowable BSON nesting depth")
	}
	switch ctype {
	case ctMinKey:
		return appendHeader(dst, bsonMinKey, key), nil
	case ctMaxKey:
		return appendHeader(dst, bsonMaxKey, key), nil
	case ctNullish:
		return appendHeader(dst, bsonNull, key), nil
	case ctUndefined:
		return appendHeader(dst, bsonUndefined, key), nil
	case ctBoolTrue, ctBoolFalse:
		dst = appendHeader(dst, bsonBool, key)
		if ctype == ctBoolTrue {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case ctDate:
		v, err := d.u64(false)
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(appendHeader(dst, bsonDateTime, key), v^(1<<63)), nil
	case ctTimestamp:
		v, err := d.u64(false)
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(appendHeader(dst, bsonTimestamp, key), v), nil
	case ctOID:
		s, err := d.take(12)
		if err != nil {
			return nil, err
		}
		return append(appendHeader(dst, bsonObjectID, key), s...), nil
	case ctStringLike:
		bit, err := d.tb.bit()
		if err != nil {
			return nil, err
		}
		s, err := d.stringLike()
		if err != nil {
			return nil, err
		}
		t := byte(bsonString)
		if bit == 1 {
			t = bsonSymbol
		}
		return appendStringValue(appendHeader(dst, t, key), s), nil
	case ctCode:
		s, err := d.stringLike()
		if err != nil {
			return nil, err
		}
		return appendStringValue(appendHeader(dst, bsonJavaScript, key), s), nil
	case ctCodeWithScope:
		code, err := d.stringLike()
		if err != nil {
			return nil, err
		}
		dst = appendHeader(dst, bsonCodeWithScope, key)
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = appendStringValue(dst, code)
		if dst, err = d.objectBody(dst, depth+2); err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
		return dst, nil
	case ctBinData:
		c, err := d.byte1()
		if err != nil {
			return nil, err
		}
		n := uint64(c)
		if c == 0xff {
			s, err := d.take(4)
			if err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint32(s))
		}
		sub, err := d.byte1()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(d.b)) {
			return nil, ksErr(mongoerr.CodeOverflow, "unexpected end of KeyString")
		}
		data, err := d.take(int(n))
		if err != nil {
			return nil, err
		}
		dst = appendHeader(dst, bsonBinary, key)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
		dst = append(dst, sub)
		return append(dst, data...), nil
	case ctRegEx:
		p, err := d.cstring()
		if err != nil {
			return nil, err
		}
		o, err := d.cstring()
		if err != nil {
			return nil, err
		}
		dst = appendHeader(dst, bsonRegex, key)
		dst = append(append(dst, p...), 0)
		return append(append(dst, o...), 0), nil
	case ctDBRef:
		s, err := d.take(4)
		if err != nil {
			return nil, err
		}
		n := uint64(binary.BigEndian.Uint32(s))
		if n > uint64(len(d.b)) {
			return nil, ksErr(mongoerr.CodeOverflow, "unexpected end of KeyString")
		}
		ns, err := d.take(int(n))
		if err != nil {
			return nil, err
		}
		oid, err := d.take(12)
		if err != nil {
			return nil, err
		}
		dst = appendStringValue(appendHeader(dst, bsonDBPointer, key), string(ns))
		return append(dst, oid...), nil
	case ctObject:
		dst = appendHeader(dst, bsonDocument, key)
		return d.objectBody(dst, depth+1)
	case ctArray:
		dst = appendHeader(dst, bsonArray, key)
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		for i := 0; ; i++ {
			c, err := d.byte1()
			if err != nil {
				return nil, err
			}
			if c == 0 {
				break
			}
			if dst, err = d.value(c, dst, strconv.Itoa(i), depth+1); err != nil {
				return nil, err
			}
		}
		dst = append(dst, 0)
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
		return dst, nil
	}
	if ctype >= ctNumericNaN && ctype <= ctPositiveLarge {
		return d.readNumber(ctype, dst, key)
	}
	return nil, ksErr(50811, "Unknown type: %d", ctype)
}

// objectBody decodes (generic type, name, value)* 0 into a BSON document
// appended to dst.
func (d *decoder) objectBody(dst []byte, depth int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for {
		g, err := d.byte1()
		if err != nil {
			return nil, err
		}
		if g == 0 {
			break
		}
		name, err := d.cstring()
		if err != nil {
			return nil, err
		}
		c, err := d.byte1()
		if err != nil {
			return nil, err
		}
		if dst, err = d.value(c, dst, name, depth); err != nil {
			return nil, err
		}
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}

// --- raw BSON writers ---

func appendHeader(dst []byte, t byte, key string) []byte {
	dst = append(dst, t)
	dst = append(dst, key...)
	return append(dst, 0)
}

func appendStringValue(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)+1))
	dst = append(dst, s...)
	return append(dst, 0)
}

func appendDoubleElem(dst []byte, key string, f float64) []byte {
	return binary.LittleEndian.AppendUint64(appendHeader(dst, bsonDouble, key), math.Float64bits(f))
}

func appendInt32Elem(dst []byte, key string, n int32) []byte {
	return binary.LittleEndian.AppendUint32(appendHeader(dst, bsonInt32, key), uint32(n))
}

func appendInt64Elem(dst []byte, key string, n int64) []byte {
	return binary.LittleEndian.AppendUint64(appendHeader(dst, bsonInt64, key), uint64(n))
}

func appendDecimalElem(dst []byte, key string, hi, lo uint64) []byte {
	dst = binary.LittleEndian.AppendUint64(appendHeader(dst, bsonDecimal128, key), lo)
	return binary.LittleEndian.AppendUint64(dst, hi)
}
