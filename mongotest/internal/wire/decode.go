package wire

import (
	"encoding/binary"
	"math"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decoding commands without reflection. Every command arrives as BSON and
// the emulator works on bson.D; bson.Unmarshal builds that through the
// driver's reflection-based codecs, which were a third of the emulator's
// CPU. decodeDoc walks the bytes instead and builds exactly the values
// bson.Unmarshal builds into a bson.D: nested documents as bson.D and arrays
// as bson.A (empty ones not nil), doubles as float64, strings as string,
// binary data as bson.Binary (its own copy of the bytes), ObjectIds, bools,
// dates as bson.DateTime, null as nil, regexes, JavaScript, symbols,
// int32, timestamps, int64, Decimal128, MinKey, MaxKey and undefined as
// their bson types. TestDecodeDocMatchesUnmarshal (every type and its edge
// cases), TestDecodeGeneratedDocs (3,000 random documents),
// TestDecodeSpecDocs (MongoDB's unified test files), TestDecodeCorruptedDocs
// (every one-byte corruption the validator still accepts) and
// FuzzDecodeDoc hold it to that, bit for bit.
//
// It expects a document validateDoc accepted, and still checks every
// bound. What it does not decode itself — code with scope, DBPointer, a
// subtype-2 binary whose two lengths disagree, anything malformed — it
// reports, and decodeD falls back to bson.Unmarshal.

// decodeDoc decodes a BSON document; false when decodeD must fall back.
func decodeDoc(b []byte) (bson.D, bool) { return decodeDocIn(b, false) }

// decodeDocShared is decodeDoc with the keys and the string values
// sharing b's bytes instead of copying them: b must never change (Command
// decodes each document of a sequence from its own copy), and a string
// kept keeps all of b.
func decodeDocShared(b []byte) (bson.D, bool) { return decodeDocIn(b, true) }

func decodeDocIn(b []byte, shared bool) (bson.D, bool) {
	n, ok := countElements(b)
	if !ok {
		return nil, false
	}
	d := make(bson.D, 0, n)
	ok = walkElements(b, func(t byte, key, v []byte) bool {
		x, ok := decodeValue(t, v, shared)
		if ok {
			d = append(d, bson.E{Key: str(key, shared), Value: x})
		}
		return ok
	})
	return d, ok
}

// str is b as a string: b's bytes themselves when shared, else a copy.
func str(b []byte, shared bool) string {
	if shared && len(b) > 0 {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

// decodeArray decodes a BSON array as bson.A.
func decodeArray(b []byte, shared bool) (bson.A, bool) {
	n, ok := countElements(b)
	if !ok {
		return nil, false
	}
	a := make(bson.A, 0, n)
	ok = walkElements(b, func(t byte, _, v []byte) bool {
		x, ok := decodeValue(t, v, shared)
		if ok {
			a = append(a, x)
		}
		return ok
	})
	return a, ok
}

func countElements(b []byte) (int, bool) {
	n := 0
	ok := walkElements(b, func(byte, []byte, []byte) bool { n++; return true })
	return n, ok
}

// walkElements calls fn with each element's type, key and value bytes;
// false when the document is malformed or fn returns false.
func walkElements(b []byte, fn func(t byte, key, v []byte) bool) bool {
	if len(b) < 5 || int(binary.LittleEndian.Uint32(b)) != len(b) || b[len(b)-1] != 0 {
		return false
	}
	i, end := 4, len(b)-1
	for i < end {
		t := b[i]
		i++
		k := i
		for k < end && b[k] != 0 {
			k++
		}
		if k >= end {
			return false
		}
		key := b[i:k]
		i = k + 1
		n, ok := valueSize(t, b[i:end])
		if !ok {
			return false
		}
		if !fn(t, key, b[i:i+n]) {
			return false
		}
		i += n
	}
	return i == end
}

// valueSize returns the size of a value of type t at the start of b.
func valueSize(t byte, b []byte) (int, bool) {
	if n := fixedWidth(t); n >= 0 {
		return n, len(b) >= n
	}
	switch t {
	case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
		if len(b) < 4 {
			return 0, false
		}
		n := int64(int32(binary.LittleEndian.Uint32(b)))
		if n < 1 || 4+n > int64(len(b)) || b[4+n-1] != 0 {
			return 0, false
		}
		return int(4 + n), true
	case 0x03, 0x04: // document, array
		if len(b) < 5 {
			return 0, false
		}
		n := int64(int32(binary.LittleEndian.Uint32(b)))
		if n < 5 || n > int64(len(b)) {
			return 0, false
		}
		return int(n), true
	case 0x05: // binary
		if len(b) < 5 {
			return 0, false
		}
		n := int64(int32(binary.LittleEndian.Uint32(b)))
		if n < 0 || 5+n > int64(len(b)) {
			return 0, false
		}
		return int(5 + n), true
	case 0x0B: // regex: two cstrings
		i := 0
		for c := 0; c < 2; c++ {
			for i < len(b) && b[i] != 0 {
				i++
			}
			if i >= len(b) {
				return 0, false
			}
			i++
		}
		return i, true
	}
	// Code with scope, DBPointer and unknown types: bson.Unmarshal.
	return 0, false
}

// decodeValue decodes a value of type t whose bytes are exactly v (its
// strings sharing v's bytes when shared, see decodeDocShared).
func decodeValue(t byte, v []byte, shared bool) (any, bool) {
	switch t {
	case 0x01:
		return math.Float64frombits(binary.LittleEndian.Uint64(v)), true
	case 0x02:
		return str(v[4:len(v)-1], shared), true
	case 0x03:
		return decodeDocIn(v, shared)
	case 0x04:
		return decodeArray(v, shared)
	case 0x05:
		sub := v[4]
		data := v[5:]
		if sub == 0x02 && len(data) > 4 {
			// The old binary subtype repeats the length inside.
			if int(binary.LittleEndian.Uint32(data)) != len(data)-4 {
				return nil, false
			}
			data = data[4:]
		}
		return bson.Binary{Subtype: sub, Data: append(make([]byte, 0, len(data)), data...)}, true
	case 0x06:
		return bson.Undefined{}, true
	case 0x07:
		var id bson.ObjectID
		copy(id[:], v)
		return id, true
	case 0x08:
		switch v[0] {
		case 0:
			return false, true
		case 1:
			return true, true
		}
		return nil, false
	case 0x09:
		return bson.DateTime(int64(binary.LittleEndian.Uint64(v))), true
	case 0x0A:
		return nil, true
	case 0x0B:
		i := 0
		for v[i] != 0 {
			i++
		}
		return bson.Regex{Pattern: string(v[:i]), Options: string(v[i+1 : len(v)-1])}, true
	case 0x0D:
		return bson.JavaScript(v[4 : len(v)-1]), true
	case 0x0E:
		return bson.Symbol(v[4 : len(v)-1]), true
	case 0x10:
		return int32(binary.LittleEndian.Uint32(v)), true
	case 0x11:
		return bson.Timestamp{I: binary.LittleEndian.Uint32(v), T: binary.LittleEndian.Uint32(v[4:])}, true
	case 0x12:
		return int64(binary.LittleEndian.Uint64(v)), true
	case 0x13:
		return bson.NewDecimal128(binary.LittleEndian.Uint64(v[8:]), binary.LittleEndian.Uint64(v)), true
	case 0x7F:
		return bson.MaxKey{}, true
	case 0xFF:
		return bson.MinKey{}, true
	}
	return nil, false
}
