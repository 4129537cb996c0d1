package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a Token, Definition, Snapshot or Filter
// document, like the
// server's own BSON depth limit.
const maxDepth = 200

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// ValidateKey checks the key of a checkpoint: a non-empty Stream of valid
// UTF-8 without NUL bytes, and a non-negative Partition.
func ValidateKey(stream string, partition int) error {
	if err := ValidateStream(stream); err != nil {
		return err
	}
	if partition < 0 {
		return invalid("Partition", "%d is negative", partition)
	}
	return nil
}

// ValidateStream checks a stream name: non-empty, valid UTF-8, no NUL byte.
func ValidateStream(stream string) error {
	switch {
	case stream == "":
		return invalid("Stream", "empty")
	case !utf8.ValidString(stream):
		return invalid("Stream", "not valid UTF-8")
	case strings.IndexByte(stream, 0) >= 0:
		return invalid("Stream", "contains a NUL byte")
	}
	return nil
}

// Validate checks everything Save needs from cp: the key (ValidateKey),
// non-negative Version and Epoch, Token, Definition and Snapshot empty or a
// valid BSON document, a known State, and valid UTF-8 in Identity and Note. UpdatedAt is
// ignored (the store sets it).
func (cp Checkpoint) Validate() error {
	if err := ValidateKey(cp.Stream, cp.Partition); err != nil {
		return err
	}
	if cp.Version < 0 {
		return invalid("Version", "%d is negative", cp.Version)
	}
	if cp.Epoch < 0 {
		return invalid("Epoch", "%d is negative", cp.Epoch)
	}
	if len(cp.Token) > 0 {
		if err := validDocument(cp.Token, 0); err != nil {
			return invalid("Token", "not a valid BSON document: %v", err)
		}
	}
	if len(cp.Definition) > 0 {
		if err := validDocument(cp.Definition, 0); err != nil {
			return invalid("Definition", "not a valid BSON document: %v", err)
		}
	}
	if len(cp.Snapshot) > 0 {
		if err := validDocument(cp.Snapshot, 0); err != nil {
			return invalid("Snapshot", "not a valid BSON document: %v", err)
		}
	}
	if !cp.State.Valid() {
		return invalid("State", "unknown state %q", string(cp.State))
	}
	if !utf8.ValidString(cp.Identity) {
		return invalid("Identity", "not valid UTF-8")
	}
	if !utf8.ValidString(cp.Note) {
		return invalid("Note", "not valid UTF-8")
	}
	return nil
}

var errShort = errors.New("truncated")

// validDocument checks that b is exactly one well-formed BSON document:
// its length prefix equals len(b), every element has a known type and fits,
// nested documents and arrays are themselves well formed. It does not check
// UTF-8 inside strings: tokens are opaque bytes.
func validDocument(b []byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	if len(b) < 5 {
		return fmt.Errorf("%d bytes, a document has at least 5", len(b))
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n != len(b) {
		return fmt.Errorf("length prefix %d, but %d bytes", n, len(b))
	}
	if b[n-1] != 0 {
		return errors.New("missing the terminating NUL byte")
	}
	rest := b[4 : n-1]
	for len(rest) > 0 {
		typ := rest[0]
		end := indexNUL(rest[1:])
		if end < 0 {
			return errors.New("element key without a terminating NUL byte")
		}
		key := string(rest[1 : 1+end])
		rest = rest[2+end:]
		size, err := valueSize(typ, rest, depth)
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		rest = rest[size:]
	}
	return nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

func length32(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, errShort
	}
	return int(int32(binary.LittleEndian.Uint32(b))), nil
}

// stringSize is the size of a BSON string (int32 length, bytes, NUL).
func stringSize(b []byte) (int, error) {
	n, err := length32(b)
	if err != nil {
		return 0, err
	}
	if n < 1 || 4+n > len(b) || b[4+n-1] != 0 {
		return 0, errors.New("malformed string")
	}
	return 4 + n, nil
}

// valueSize returns how many bytes of b the value of type typ occupies.
func valueSize(typ byte, b []byte, depth int) (int, error) {
	fixed := func(n int) (int, error) {
		if len(b) < n {
			return 0, errShort
		}
		return n, nil
	}
	switch typ {
	case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
		return fixed(8)
	case 0x10: // int32
		return fixed(4)
	case 0x13: // decimal128
		return fixed(16)
	case 0x07: // ObjectId
		return fixed(12)
	case 0x06, 0x0A, 0x7F, 0xFF: // undefined, null, maxKey, minKey
		return 0, nil
	case 0x08: // bool
		if len(b) < 1 {
			return 0, errShort
		}
		if b[0] > 1 {
			return 0, fmt.Errorf("boolean byte %d", b[0])
		}
		return 1, nil
	case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
		return stringSize(b)
	case 0x0C: // DBPointer: string + ObjectId
		n, err := stringSize(b)
		if err != nil {
			return 0, err
		}
		if len(b) < n+12 {
			return 0, errShort
		}
		return n + 12, nil
	case 0x03, 0x04: // document, array
		n, err := length32(b)
		if err != nil {
			return 0, err
		}
		if n < 5 || n > len(b) {
			return 0, fmt.Errorf("embedded length %d out of range", n)
		}
		if err := validDocument(b[:n], depth+1); err != nil {
			return 0, err
		}
		return n, nil
	case 0x05: // binary: int32 length, subtype, bytes
		n, err := length32(b)
		if err != nil {
			return 0, err
		}
		if n < 0 || 5+n > len(b) {
			return 0, fmt.Errorf("binary length %d out of range", n)
		}
		return 5 + n, nil
	case 0x0B: // regex: two cstrings
		i := indexNUL(b)
		if i < 0 {
			return 0, errShort
		}
		j := indexNUL(b[i+1:])
		if j < 0 {
			return 0, errShort
		}
		return i + 1 + j + 1, nil
	case 0x0F: // code with scope: int32 total, string, document
		n, err := length32(b)
		if err != nil {
			return 0, err
		}
		if n < 14 || n > len(b) {
			return 0, fmt.Errorf("code-with-scope length %d out of range", n)
		}
		s, err := stringSize(b[4:n])
		if err != nil {
			return 0, err
		}
		if err := validDocument(b[4+s:n], depth+1); err != nil {
			return 0, err
		}
		return n, nil
	}
	return 0, fmt.Errorf("unknown BSON type 0x%02x", typ)
}
