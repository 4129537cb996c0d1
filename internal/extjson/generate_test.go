package extjson

import (
	"encoding/binary"
	"math"
)

// generate builds a well-formed document (with an occasional driver
// leniency) from the bytes of data, read as a program: which types, keys
// and values to use, nested up to a few levels. Random bytes alone rarely
// get past the length fields; this walks the fuzzer through every type's
// edge values, invalid UTF-8 and escapes included. Exhausted data reads as
// zeros, so every input gives a document.
func generate(data []byte) []byte {
	g := &gen{data: data}
	return g.doc(0)
}

type gen struct {
	data []byte
	i    int
}

func (g *gen) byte() byte {
	if g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return b
}

func (g *gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = g.byte()
	}
	return b
}

func (g *gen) u64() uint64 { return binary.LittleEndian.Uint64(g.bytes(8)) }

func (g *gen) done() bool { return g.i >= len(g.data) }

var (
	genKeys    = []string{"_id", "a", "", "fullDocument", "q\"\\\n", "\xff\xfe", "café", "\u2028", "$oid", "0"}
	genStrings = []string{"", "x", "hello, world", "\x00", "\"\\/\b\f\n\r\t", "\x01\x1f\x7f", "<>&", "é☕😀",
		"\u2028\u2029", "\xff", "\xe2\x82", "\xed\xa0\x80", "\uFFFD", "\xc0\x80"}
	genDoubles = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 123456, 1234567, 1e21, 1e-5, 1e-4,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, math.Inf(1), math.Inf(-1), math.NaN()}
	genDates = []int64{0, -1, 1, 999, 1356351330501, 253402300799999, 253402300800000, -62135596800000,
		math.MaxInt64, math.MinInt64, -62135596800001, 253402300800000 * 1000}
	genSubtypes = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x80, 0xff}
)

// types lists every BSON type byte.
var genTypes = []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F,
	0x10, 0x11, 0x12, 0x13, 0x7F, 0xFF}

const genMaxDepth = 4

func (g *gen) doc(depth int) []byte {
	n := int(g.byte() % 6)
	es := make([]el, 0, n)
	for j := 0; j < n && !g.done(); j++ {
		es = append(es, g.elem(depth))
	}
	return doc(es...)
}

func (g *gen) arr(depth int) []byte {
	n := int(g.byte() % 6)
	es := make([]el, 0, n)
	for j := 0; j < n && !g.done(); j++ {
		e := g.elem(depth)
		e.k = ""
		es = append(es, e)
	}
	return arr(es...)
}

// cstring is a name or pattern: a listed key or random bytes without NUL.
func (g *gen) cstring() string {
	b := g.byte()
	if b < 128 {
		return genKeys[int(b)%len(genKeys)]
	}
	s := g.bytes(int(b % 12))
	for i := range s {
		if s[i] == 0 {
			s[i] = 'x'
		}
	}
	return string(s)
}

// str is a string value: a listed one or random bytes (NUL allowed).
func (g *gen) str() string {
	b := g.byte()
	if b < 128 {
		return genStrings[int(b)%len(genStrings)]
	}
	return string(g.bytes(int(b % 24)))
}

func (g *gen) elem(depth int) el {
	t := genTypes[int(g.byte())%len(genTypes)]
	k := g.cstring()
	if depth >= genMaxDepth && (t == 0x03 || t == 0x04 || t == 0x0F) {
		t = 0x0A
	}
	switch t {
	case 0x01:
		if b := g.byte(); b < 128 {
			return eDouble(k, genDoubles[int(b)%len(genDoubles)])
		}
		return eDoubleBits(k, g.u64())
	case 0x02:
		return eString(k, g.str())
	case 0x03:
		return eDoc(k, g.doc(depth+1))
	case 0x04:
		return eArray(k, g.arr(depth+1))
	case 0x05:
		sub := genSubtypes[int(g.byte())%len(genSubtypes)]
		data := string(g.bytes(int(g.byte() % 20)))
		if sub == 2 {
			if g.byte()%4 == 0 {
				// The leniency: padding after the inner data, which the
				// driver reads differently at the top and below it.
				pad := int(g.byte() % 4)
				v := append(le32(int32(len(data)+4+pad)), 2)
				v = append(v, le32(int32(len(data)))...)
				v = append(append(v, data...), make([]byte, pad)...)
				return eRaw(0x05, k, v)
			}
			return eOldBinary(k, data)
		}
		return eBinary(k, sub, data)
	case 0x06:
		return eUndefined(k)
	case 0x07:
		return eRaw(0x07, k, g.bytes(12))
	case 0x08:
		return eRaw(0x08, k, []byte{g.byte() % 2})
	case 0x09:
		switch b := g.byte(); {
		case b < 96:
			return eDate(k, genDates[int(b)%len(genDates)])
		case b < 192:
			// Within the relaxed range, with any milliseconds.
			return eDate(k, int64(g.u64()%253402300800000))
		default:
			return eDate(k, int64(g.u64()))
		}
	case 0x0A:
		return eNull(k)
	case 0x0B:
		return eRegex(k, g.cstring(), g.cstring())
	case 0x0C:
		return eRaw(0x0C, k, append(bstr(g.str()), g.bytes(12)...))
	case 0x0D:
		return eCode(k, g.str())
	case 0x0E:
		return eSymbol(k, g.str())
	case 0x0F:
		return eCWS(k, g.str(), g.doc(depth+1))
	case 0x10:
		return eInt32(k, int32(g.u64()))
	case 0x11:
		u := g.u64()
		return eTimestamp(k, uint32(u>>32), uint32(u))
	case 0x12:
		return eInt64(k, int64(g.u64()))
	case 0x13:
		if b := g.byte(); b < 64 {
			return eDecimal(k, []string{"0", "-0", "1.0", "NaN", "Infinity", "-Infinity", "1E+6144", "0E-6176", "19.99"}[int(b)%9])
		}
		return eDecimalBits(k, g.u64(), g.u64())
	case 0x7F:
		return eMaxKey(k)
	default:
		return eMinKey(k)
	}
}
