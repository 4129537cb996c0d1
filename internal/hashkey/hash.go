package hashkey

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type numbers from canonicalizeBSONType (src/mongo/bson/bsontypes.h).
// They are what the server feeds the hash, not the BSON type bytes.
const (
	ctMinKey     int32 = -1
	ctEOO        int32 = 0 // also Undefined
	ctNull       int32 = 5
	ctNumber     int32 = 10 // double, int32, int64, decimal128
	ctString     int32 = 15 // string, symbol
	ctObject     int32 = 20
	ctArray      int32 = 25
	ctBinData    int32 = 30
	ctObjectID   int32 = 35
	ctBool       int32 = 40
	ctDate       int32 = 45
	ctTimestamp  int32 = 47
	ctRegex      int32 = 50
	ctDBPointer  int32 = 55
	ctCode       int32 = 60
	ctCodeWScope int32 = 65
	ctMaxKey     int32 = 127
)

// Seed is the seed hashed indexes and $toHashedIndexKey use
// (BSONElementHasher::DEFAULT_HASH_SEED).
const Seed int32 = 0

// maxDepth bounds the nesting of documents and arrays. The server refuses
// BSON nested deeper than 200 levels; the bound here only has to stop
// cyclic Go values (a bson.A containing itself) from recursing forever.
const maxDepth = 512

// Hash returns the hashed-index key of v, the value a real server's
// $toHashedIndexKey returns for it (seed 0).
//
// v is a Go value as bson.Unmarshal produces it for a bson.D: nil (null),
// int32, int64, float64, string, bool, bson.D, bson.A, bson.ObjectID,
// bson.DateTime, bson.Timestamp, bson.Binary, bson.Regex, bson.Decimal128,
// bson.MinKey, bson.MaxKey, bson.Undefined, bson.Null, bson.JavaScript,
// bson.Symbol, bson.DBPointer, bson.CodeWithScope; also bson.Raw,
// bson.RawArray, bson.RawValue, []any, []byte, time.Time, the other Go
// integer and float types, and maps of at most one key. Anything else is an
// error.
func Hash(v any) (int64, error) {
	e := getEncoder()
	defer putEncoder(e)
	e.i32(Seed)
	if err := e.value(v, "", false, 0); err != nil {
		return 0, err
	}
	return e.sum(), nil
}

// HashRaw returns the hashed-index key of an undecoded BSON value. Its bytes
// are hashed as the server would see them (regex options are not re-sorted,
// binary subtype 2 keeps its inner length). Malformed BSON is an error.
func HashRaw(v bson.RawValue) (int64, error) {
	e := getEncoder()
	defer putEncoder(e)
	e.i32(Seed)
	if err := e.raw(v.Type, v.Value, "", false, 0, true); err != nil {
		return 0, err
	}
	return e.sum(), nil
}

// encoder accumulates the bytes the server would feed to MD5.
type encoder struct {
	buf []byte
}

// encoders recycles encoder buffers so that hashing a small key (an
// ObjectID _id, typically) does not allocate.
var encoders = sync.Pool{New: func() any { return &encoder{buf: make([]byte, 0, 256)} }}

// maxPooledBuf is the largest buffer kept for reuse.
const maxPooledBuf = 64 << 10

func getEncoder() *encoder { return encoders.Get().(*encoder) }

func putEncoder(e *encoder) {
	if cap(e.buf) > maxPooledBuf {
		return
	}
	e.buf = e.buf[:0]
	encoders.Put(e)
}

func (e *encoder) sum() int64 {
	d := md5.Sum(e.buf)
	return int64(binary.LittleEndian.Uint64(d[:8]))
}

func (e *encoder) i32(v int32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(v)) }
func (e *encoder) i64(v int64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(v)) }

// cstring appends s and its terminating NUL; s must not contain a NUL.
func (e *encoder) cstring(s, what string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("hashkey: %s %q contains a NUL byte", what, s)
	}
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
	return nil
}

// str appends a BSON string value: int32 length (with the NUL), bytes, NUL.
// Unlike names, BSON string values may contain NUL bytes.
func (e *encoder) str(s string) error {
	if len(s) >= math.MaxInt32 {
		return fmt.Errorf("hashkey: string of %d bytes is too long for BSON", len(s))
	}
	e.i32(int32(len(s) + 1))
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
	return nil
}

// header appends an element's canonical type and, inside documents and
// arrays, its field name.
func (e *encoder) header(ct int32, name string, withName bool) error {
	e.i32(ct)
	if withName {
		return e.cstring(name, "field name")
	}
	return nil
}

// end appends the end-of-object element: canonical type 0, with an empty
// name and value that contribute no bytes.
func (e *encoder) end() { e.i32(ctEOO) }

func (e *encoder) value(v any, name string, withName bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("hashkey: value nested more than %d levels deep", maxDepth)
	}
	switch t := v.(type) {
	case nil, bson.Null:
		return e.header(ctNull, name, withName)
	case bson.Undefined:
		return e.header(ctEOO, name, withName)
	case bson.MinKey:
		return e.header(ctMinKey, name, withName)
	case bson.MaxKey:
		return e.header(ctMaxKey, name, withName)

	case int32:
		return e.number(int64(t), name, withName)
	case int64:
		return e.number(t, name, withName)
	case int:
		return e.number(int64(t), name, withName)
	case int8:
		return e.number(int64(t), name, withName)
	case int16:
		return e.number(int64(t), name, withName)
	case uint8:
		return e.number(int64(t), name, withName)
	case uint16:
		return e.number(int64(t), name, withName)
	case uint32:
		return e.number(int64(t), name, withName)
	case uint:
		return e.unsigned(uint64(t), name, withName)
	case uint64:
		return e.unsigned(t, name, withName)
	case float64:
		return e.number(doubleToInt64(t), name, withName)
	case float32:
		return e.number(doubleToInt64(float64(t)), name, withName)
	case bson.Decimal128:
		return e.number(decimalToInt64(t), name, withName)

	case string:
		if err := e.header(ctString, name, withName); err != nil {
			return err
		}
		return e.str(t)
	case bson.Symbol:
		if err := e.header(ctString, name, withName); err != nil {
			return err
		}
		return e.str(string(t))
	case bson.JavaScript:
		if err := e.header(ctCode, name, withName); err != nil {
			return err
		}
		return e.str(string(t))

	case bool:
		if err := e.header(ctBool, name, withName); err != nil {
			return err
		}
		if t {
			e.buf = append(e.buf, 1)
		} else {
			e.buf = append(e.buf, 0)
		}
		return nil
	case bson.ObjectID:
		if err := e.header(ctObjectID, name, withName); err != nil {
			return err
		}
		e.buf = append(e.buf, t[:]...)
		return nil
	case bson.DateTime:
		if err := e.header(ctDate, name, withName); err != nil {
			return err
		}
		e.i64(int64(t))
		return nil
	case time.Time:
		if err := e.header(ctDate, name, withName); err != nil {
			return err
		}
		e.i64(int64(bson.NewDateTimeFromTime(t)))
		return nil
	case bson.Timestamp:
		if err := e.header(ctTimestamp, name, withName); err != nil {
			return err
		}
		// A BSON timestamp is a little-endian uint64 with the increment
		// in the low half and the seconds in the high half.
		e.buf = binary.LittleEndian.AppendUint32(e.buf, t.I)
		e.buf = binary.LittleEndian.AppendUint32(e.buf, t.T)
		return nil
	case bson.Binary:
		if err := e.header(ctBinData, name, withName); err != nil {
			return err
		}
		return e.binary(t.Subtype, t.Data)
	case []byte:
		if err := e.header(ctBinData, name, withName); err != nil {
			return err
		}
		return e.binary(0, t)
	case bson.Regex:
		if err := e.header(ctRegex, name, withName); err != nil {
			return err
		}
		if err := e.cstring(t.Pattern, "regex pattern"); err != nil {
			return err
		}
		return e.cstring(t.Options, "regex options")
	case bson.DBPointer:
		if err := e.header(ctDBPointer, name, withName); err != nil {
			return err
		}
		if err := e.str(t.DB); err != nil {
			return err
		}
		e.buf = append(e.buf, t.Pointer[:]...)
		return nil
	case bson.CodeWithScope:
		if err := e.header(ctCodeWScope, name, withName); err != nil {
			return err
		}
		// The code string's bytes and NUL, without its length, then the
		// scope's elements as for a document.
		e.buf = append(e.buf, t.Code...)
		e.buf = append(e.buf, 0)
		return e.scope(t.Scope, depth)

	case bson.D:
		if err := e.header(ctObject, name, withName); err != nil {
			return err
		}
		return e.docElems(t, depth)
	case bson.M:
		return e.smallMap(t, name, withName, depth)
	case map[string]any:
		return e.smallMap(t, name, withName, depth)
	case bson.A:
		return e.array(t, name, withName, depth)
	case []any:
		return e.array(t, name, withName, depth)
	case []bson.D:
		if err := e.header(ctArray, name, withName); err != nil {
			return err
		}
		for i, d := range t {
			if err := e.value(d, arrayIndex(i), true, depth+1); err != nil {
				return err
			}
		}
		e.end()
		return nil
	case []string:
		if err := e.header(ctArray, name, withName); err != nil {
			return err
		}
		for i, s := range t {
			if err := e.value(s, arrayIndex(i), true, depth+1); err != nil {
				return err
			}
		}
		e.end()
		return nil

	case bson.Raw:
		return e.raw(bson.TypeEmbeddedDocument, t, name, withName, depth, true)
	case bson.RawArray:
		return e.raw(bson.TypeArray, t, name, withName, depth, true)
	case bson.RawValue:
		return e.raw(t.Type, t.Value, name, withName, depth, true)
	}
	return fmt.Errorf("hashkey: cannot hash a value of Go type %s", goType(v))
}

func (e *encoder) number(n int64, name string, withName bool) error {
	if err := e.header(ctNumber, name, withName); err != nil {
		return err
	}
	e.i64(n)
	return nil
}

// unsigned hashes a Go unsigned integer as the emulator stores it: as an
// int64 when it fits, otherwise as a double.
func (e *encoder) unsigned(u uint64, name string, withName bool) error {
	if u <= math.MaxInt64 {
		return e.number(int64(u), name, withName)
	}
	return e.number(doubleToInt64(float64(u)), name, withName)
}

// binary appends a BSON binData value. Subtype 2 (old binary) carries its
// own inner length, which the driver writes and the server hashes.
func (e *encoder) binary(subtype byte, data []byte) error {
	n := len(data)
	if subtype == 0x02 {
		n += 4
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("hashkey: binary of %d bytes is too long for BSON", len(data))
	}
	e.i32(int32(n))
	e.buf = append(e.buf, subtype)
	if subtype == 0x02 {
		e.i32(int32(len(data)))
	}
	e.buf = append(e.buf, data...)
	return nil
}

func (e *encoder) docElems(d bson.D, depth int) error {
	for _, el := range d {
		if err := e.value(el.Value, el.Key, true, depth+1); err != nil {
			return err
		}
	}
	e.end()
	return nil
}

// smallMap hashes a map as a document. Maps have no order, so only maps of
// at most one key, whose order is unambiguous, are accepted.
func (e *encoder) smallMap(m map[string]any, name string, withName bool, depth int) error {
	if len(m) > 1 {
		return fmt.Errorf("hashkey: cannot hash a map of %d keys: its field order is undefined (use bson.D)", len(m))
	}
	if err := e.header(ctObject, name, withName); err != nil {
		return err
	}
	for k, v := range m {
		if err := e.value(v, k, true, depth+1); err != nil {
			return err
		}
	}
	e.end()
	return nil
}

func (e *encoder) array(a []any, name string, withName bool, depth int) error {
	if err := e.header(ctArray, name, withName); err != nil {
		return err
	}
	for i, v := range a {
		if err := e.value(v, arrayIndex(i), true, depth+1); err != nil {
			return err
		}
	}
	e.end()
	return nil
}

// scope hashes the scope document of a code-with-scope value.
func (e *encoder) scope(s any, depth int) error {
	switch t := s.(type) {
	case nil:
		e.end()
		return nil
	case bson.D:
		return e.docElems(t, depth)
	case bson.M:
		if len(t) > 1 {
			return fmt.Errorf("hashkey: cannot hash a code scope map of %d keys: its field order is undefined (use bson.D)", len(t))
		}
		for k, v := range t {
			if err := e.value(v, k, true, depth+1); err != nil {
				return err
			}
		}
		e.end()
		return nil
	case bson.Raw:
		return e.rawElems(t, depth)
	}
	return fmt.Errorf("hashkey: cannot hash a code scope of Go type %s", goType(s))
}

// goType names v's dynamic type without letting v escape (which %T would),
// so that hashing a value does not force the caller to allocate it.
func goType(v any) string { return reflect.TypeOf(v).String() }

// arrayIndex returns the field name of array element i ("0", "1", …).
func arrayIndex(i int) string {
	if i < len(smallIndexes) {
		return smallIndexes[i]
	}
	return fmt.Sprint(i)
}

var smallIndexes = func() []string {
	s := make([]string, 100)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return s
}()
