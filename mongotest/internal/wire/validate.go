package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxDepth bounds document nesting, like the server's default BSON depth
// limit; it also bounds the recursion of validateDoc.
const maxDepth = 200

// validateDoc checks that doc is exactly one well-formed BSON document:
// length prefix equal to len(doc), trailing NUL, every element of a known
// type with in-bounds lengths, nested documents and arrays valid recursively,
// strings NUL-terminated, booleans 0 or 1. bson.Raw.Validate does not recurse
// into nested documents, hence this validator.
func validateDoc(doc []byte) error { return validateDocDepth(doc, 0) }

var errDepth = errors.New("document nested too deeply")

func validateDocDepth(doc []byte, depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	if len(doc) < 5 {
		return fmt.Errorf("document of %d bytes is shorter than 5", len(doc))
	}
	if n := int32(binary.LittleEndian.Uint32(doc)); int64(n) != int64(len(doc)) {
		return fmt.Errorf("document length prefix %d does not match its %d bytes", n, len(doc))
	}
	if doc[len(doc)-1] != 0 {
		return errors.New("document does not end with NUL")
	}
	r := reader{b: doc[:len(doc)-1], off: 4}
	for r.remaining() > 0 {
		t, _ := r.u8()
		key, ok := r.cstring()
		if !ok {
			return errors.New("element name is not NUL-terminated")
		}
		if err := skipValue(&r, t, depth); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	return nil
}

// fixedWidth is the size of a value of BSON type t when every value of
// the type has one size, or -1.
func fixedWidth(t byte) int {
	switch t {
	case 0x06, 0x0A, 0x7F, 0xFF: // undefined, null, maxKey, minKey
		return 0
	case 0x08: // bool
		return 1
	case 0x10: // int32
		return 4
	case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
		return 8
	case 0x07: // ObjectId
		return 12
	case 0x13: // decimal128
		return 16
	}
	return -1
}

// skipValue validates and skips one value of BSON type t.
func skipValue(r *reader, t byte, depth int) error {
	fixed := func(n int) error {
		if r.remaining() < n {
			return fmt.Errorf("type 0x%02x needs %d bytes, have %d", t, n, r.remaining())
		}
		r.off += n
		return nil
	}
	if n := fixedWidth(t); n >= 0 && t != 0x08 {
		return fixed(n)
	}
	switch t {
	case 0x08: // bool
		b, ok := r.u8()
		if !ok {
			return errors.New("truncated bool")
		}
		if b > 1 {
			return fmt.Errorf("bool byte %d is neither 0 nor 1", b)
		}
		return nil
	case 0x02, 0x0D, 0x0E: // string, JavaScript code, symbol
		return skipString(r)
	case 0x03, 0x04: // document, array
		return skipDoc(r, depth)
	case 0x05: // binary
		n, ok := r.i32()
		if !ok || n < 0 || int64(n)+1 > int64(r.remaining()) {
			return errors.New("binary length out of bounds")
		}
		sub, _ := r.u8()
		if sub == 0x02 { // old binary: an inner length that must match
			if n < 4 || int32(binary.LittleEndian.Uint32(r.b[r.off:])) != n-4 {
				return errors.New("old binary (subtype 2) inner length mismatch")
			}
		}
		r.off += int(n)
		return nil
	case 0x0B: // regex: pattern, options
		if _, ok := r.cstring(); !ok {
			return errors.New("regex pattern not NUL-terminated")
		}
		if _, ok := r.cstring(); !ok {
			return errors.New("regex options not NUL-terminated")
		}
		return nil
	case 0x0C: // DBPointer
		if err := skipString(r); err != nil {
			return err
		}
		return fixed(12)
	case 0x0F: // code with scope: int32 total, string, document
		start := r.off
		n, ok := r.i32()
		if !ok || n < 14 || int64(n)-4 > int64(r.remaining()) {
			return errors.New("code-with-scope length out of bounds")
		}
		if err := skipString(r); err != nil {
			return err
		}
		if err := skipDoc(r, depth); err != nil {
			return err
		}
		if r.off-start != int(n) {
			return errors.New("code-with-scope length does not match its contents")
		}
		return nil
	default:
		return fmt.Errorf("unknown BSON type 0x%02x", t)
	}
}

func skipString(r *reader) error {
	n, ok := r.i32()
	if !ok || n < 1 || int64(n) > int64(r.remaining()) {
		return errors.New("string length out of bounds")
	}
	if r.b[r.off+int(n)-1] != 0 {
		return errors.New("string not NUL-terminated")
	}
	r.off += int(n)
	return nil
}

func skipDoc(r *reader, depth int) error {
	if r.remaining() < 4 {
		return errors.New("truncated embedded document")
	}
	n := int32(binary.LittleEndian.Uint32(r.b[r.off:]))
	if n < 5 || int64(n) > int64(r.remaining()) {
		return fmt.Errorf("embedded document length %d out of bounds", n)
	}
	if err := validateDocDepth(r.b[r.off:r.off+int(n)], depth+1); err != nil {
		return err
	}
	r.off += int(n)
	return nil
}
