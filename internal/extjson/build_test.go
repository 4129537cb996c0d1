package extjson

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file builds BSON by hand, so that the tests can state every byte,
// malformed ones included.

// An el is one element: its type byte, its name and its value bytes.
type el struct {
	t byte
	k string
	v []byte
}

// doc returns the document of es.
func doc(es ...el) []byte {
	b := []byte{0, 0, 0, 0}
	for _, e := range es {
		b = append(b, e.t)
		b = append(b, e.k...)
		b = append(b, 0)
		b = append(b, e.v...)
	}
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

// arr returns the array of es, naming unnamed elements by their index.
func arr(es ...el) []byte {
	for i := range es {
		if es[i].k == "" {
			es[i].k = strconv.Itoa(i)
		}
	}
	return doc(es...)
}

func le32(v int32) []byte  { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// bstr is a BSON string value: length, bytes, NUL.
func bstr(s string) []byte { return append(append(le32(int32(len(s)+1)), s...), 0) }

func oidBytes(h string) []byte {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 12 {
		panic("bad ObjectId hex " + h)
	}
	return b
}

func eDouble(k string, f float64) el    { return el{0x01, k, le64(math.Float64bits(f))} }
func eDoubleBits(k string, u uint64) el { return el{0x01, k, le64(u)} }
func eString(k, s string) el            { return el{0x02, k, bstr(s)} }
func eDoc(k string, d []byte) el        { return el{0x03, k, d} }
func eArray(k string, a []byte) el      { return el{0x04, k, a} }
func eBinary(k string, sub byte, data string) el {
	return el{0x05, k, append(append(le32(int32(len(data))), sub), data...)}
}

// eOldBinary is a subtype-2 binary as the driver writes one: outer length
// (data + 4), subtype, inner length, data.
func eOldBinary(k, data string) el {
	v := append(le32(int32(len(data)+4)), 2)
	v = append(v, le32(int32(len(data)))...)
	return el{0x05, k, append(v, data...)}
}
func eUndefined(k string) el      { return el{0x06, k, nil} }
func eOID(k, h string) el         { return el{0x07, k, oidBytes(h)} }
func eBool(k string, b bool) el   { return el{0x08, k, []byte{map[bool]byte{false: 0, true: 1}[b]}} }
func eDate(k string, ms int64) el { return el{0x09, k, le64(uint64(ms))} }
func eNull(k string) el           { return el{0x0A, k, nil} }
func eRegex(k, pattern, options string) el {
	return el{0x0B, k, append(append(append([]byte(pattern), 0), options...), 0)}
}
func eDBPointer(k, ns, h string) el { return el{0x0C, k, append(bstr(ns), oidBytes(h)...)} }
func eCode(k, s string) el          { return el{0x0D, k, bstr(s)} }
func eSymbol(k, s string) el        { return el{0x0E, k, bstr(s)} }
func eCWS(k, code string, scope []byte) el {
	v := append(le32(int32(4+4+len(code)+1+len(scope))), bstr(code)...)
	return el{0x0F, k, append(v, scope...)}
}
func eInt32(k string, v int32) el { return el{0x10, k, le32(v)} }

// eTimestamp is a timestamp: increment first, then seconds, on the wire.
func eTimestamp(k string, t, i uint32) el {
	return el{0x11, k, append(le32(int32(i)), le32(int32(t))...)}
}
func eInt64(k string, v int64) el { return el{0x12, k, le64(uint64(v))} }

// eDecimal is a decimal128 from its string form.
func eDecimal(k, s string) el {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic(err)
	}
	h, l := d.GetBytes()
	return eDecimalBits(k, h, l)
}
func eDecimalBits(k string, h, l uint64) el { return el{0x13, k, append(le64(l), le64(h)...)} }
func eMinKey(k string) el                   { return el{0xFF, k, nil} }
func eMaxKey(k string) el                   { return el{0x7F, k, nil} }
func eRaw(t byte, k string, v []byte) el    { return el{t, k, v} }

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
