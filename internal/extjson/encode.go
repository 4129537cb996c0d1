package extjson

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"
)

// Append appends the Extended JSON of the BSON document doc to dst and
// returns the extended buffer: canonical Extended JSON when canonical is
// true, relaxed otherwise. The bytes appended are those
// bson.MarshalExtJSON(bson.Raw(doc), canonical, false) returns (see the
// package documentation). If doc is malformed, Append returns dst
// unchanged (its original length) and an error matching ErrMalformed.
func Append(dst, doc []byte, canonical bool) ([]byte, error) {
	n := len(dst)
	w := walker{src: doc, dst: dst, canonical: canonical}
	if err := w.run(); err != nil {
		return dst[:n], err
	}
	return w.dst, nil
}

// maxPooled is the largest scratch buffer Marshal keeps for reuse.
const maxPooled = 1 << 20

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Marshal returns the Extended JSON of the BSON document doc in a new
// slice of its own (exactly what bson.MarshalExtJSON(bson.Raw(doc),
// canonical, false) returns), or nil and an error matching ErrMalformed.
// It renders into a reused buffer and copies the result out, so the
// returned slice is not much larger than the JSON.
func Marshal(doc []byte, canonical bool) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	b, err := Append((*bp)[:0], doc, canonical)
	var out []byte
	if err == nil {
		out = bytes.Clone(b)
	}
	if cap(b) <= maxPooled {
		*bp = b[:0]
		scratch.Put(bp)
	}
	return out, err
}

// Frame kinds.
const (
	kindDoc   = iota // a document: '{' … '}'
	kindArray        // an array: '[' … ']', keys not written
	kindScope        // the scope of a code-with-scope: '{' … '}}'
)

// A frame is a document, array or scope being walked.
type frame struct {
	end  int // offset one past the frame's terminating NUL
	kind uint8
	// key is the offset of the name of the element being read, -1
	// between elements; index counts the elements of an array from 0.
	// Both are only for error messages.
	key   int
	index int
}

func newFrame(end int, kind uint8) frame { return frame{end: end, kind: kind, key: -1, index: -1} }

// walker renders src into dst. It walks the document with a stack of its
// own (local to run, so that it stays off the heap up to 16 levels), so no
// input can exhaust the goroutine stack.
type walker struct {
	src       []byte
	dst       []byte
	canonical bool
	p         int // read offset in src
	// opened is set by value when the value starts a document, array or
	// scope: run pushes it.
	opened    bool
	openFrame frame
}

// open asks run to push a frame ending at end.
func (w *walker) open(end int, kind uint8) {
	w.opened = true
	w.openFrame = newFrame(end, kind)
}

func (w *walker) run() error {
	src := w.src
	if len(src) < 4 {
		return w.fail(0, fmt.Sprintf("%d bytes are too few for a document (at least 5)", len(src)))
	}
	length := int32(binary.LittleEndian.Uint32(src))
	switch {
	case length < 5:
		return w.fail(0, fmt.Sprintf("document length %d is below the minimum of 5", length))
	case int(length) > len(src):
		return w.fail(0, fmt.Sprintf("document length %d exceeds the %d bytes given", length, len(src)))
	}
	var frames [16]frame
	stack := append(frames[:0], newFrame(int(length), kindDoc))
	w.dst = append(w.dst, '{')
	w.p = 4
	for {
		f := &stack[len(stack)-1]
		f.key = -1 // between elements
		if w.p >= f.end {
			return w.failIn(stack, w.p, "the document's terminating NUL is missing: its elements reach its end")
		}
		t := src[w.p]
		w.p++
		if t == 0 {
			if w.p != f.end {
				return w.failIn(stack, w.p-1, fmt.Sprintf("terminating NUL found %d bytes before the end its length says", f.end-w.p))
			}
			w.close(f.kind, len(stack) == 1)
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				return nil
			}
			continue
		}
		// The element's name.
		f.key = w.p
		if f.kind == kindArray {
			f.index++
		}
		k, plain := cstring(src[w.p:f.end])
		if k < 0 {
			return w.failIn(stack, w.p, "field name has no terminating NUL before the end of its document")
		}
		if f.kind != kindArray {
			if plain {
				w.dst = append(w.dst, '"')
				w.dst = append(w.dst, src[w.p:w.p+k]...)
				w.dst = append(w.dst, '"', ':')
			} else {
				w.dst = appendString(w.dst, src[w.p:w.p+k])
				w.dst = append(w.dst, ':')
			}
		}
		w.p += k + 1
		if err := w.value(t, f.end, len(stack) == 1); err != nil {
			err.Field = w.path(stack)
			return err
		}
		if w.opened {
			w.opened = false
			stack = append(stack, w.openFrame)
		}
	}
}

// close writes the end of the innermost frame, of kind, whose terminating
// NUL was just read; outer says it is the outer document.
func (w *walker) close(kind uint8, outer bool) {
	c := byte('}')
	if kind == kindArray {
		c = ']'
	}
	// Every value is followed by a comma; the last one becomes the closer.
	if last := len(w.dst) - 1; w.dst[last] == ',' {
		w.dst[last] = c
	} else {
		w.dst = append(w.dst, c)
	}
	if kind == kindScope {
		w.dst = append(w.dst, '}')
	}
	if !outer {
		w.dst = append(w.dst, ',')
	}
}

// value renders the value of type t at w.p, which must lie before end.
// top says whether it is an element of the outer document, where the
// driver sizes old-style binaries by their outer length.
func (w *walker) value(t byte, end int, top bool) *MalformedError {
	src := w.src
	p := w.p
	left := end - p
	switch t {
	case 0x01: // double
		if left < 8 {
			return w.short(p, "double", 8, left)
		}
		w.double(math.Float64frombits(binary.LittleEndian.Uint64(src[p:])))
		w.p += 8

	case 0x02, 0x0D, 0x0E: // string, JavaScript code, symbol
		s, n, err := w.str(p, end, typeName(t))
		if err != nil {
			return err
		}
		switch t {
		case 0x02:
			w.dst = appendString(w.dst, s)
		case 0x0D:
			w.dst = append(w.dst, `{"$code":`...)
			w.dst = appendString(w.dst, s)
			w.dst = append(w.dst, '}')
		default:
			w.dst = append(w.dst, `{"$symbol":`...)
			w.dst = appendString(w.dst, s)
			w.dst = append(w.dst, '}')
		}
		w.p += n

	case 0x03, 0x04: // document, array
		if left < 4 {
			return w.short(p, typeName(t), 4, left)
		}
		n := int32(binary.LittleEndian.Uint32(src[p:]))
		if n < 5 {
			return w.fail(p, fmt.Sprintf("%s length %d is below the minimum of 5", typeName(t), n))
		}
		if int(n) > left {
			return w.fail(p, fmt.Sprintf("%s length %d runs past the end of its parent (%d bytes left)", typeName(t), n, left))
		}
		if t == 0x03 {
			w.open(p+int(n), kindDoc)
			w.dst = append(w.dst, '{')
		} else {
			w.open(p+int(n), kindArray)
			w.dst = append(w.dst, '[')
		}
		w.p += 4
		return nil // the frame's closer writes the comma

	case 0x05: // binary
		data, n, err := w.binary(p, end, top)
		if err != nil {
			return err
		}
		sub := src[p+4]
		w.dst = append(w.dst, `{"$binary":{"base64":"`...)
		w.dst = base64.StdEncoding.AppendEncode(w.dst, data)
		w.dst = append(w.dst, `","subType":"`...)
		w.dst = append(w.dst, hexDigits[sub>>4], hexDigits[sub&0xF])
		w.dst = append(w.dst, `"}}`...)
		w.p += n

	case 0x06: // undefined
		w.dst = append(w.dst, `{"$undefined":true}`...)

	case 0x07: // ObjectId
		if left < 12 {
			return w.short(p, "ObjectId", 12, left)
		}
		w.dst = append(w.dst, `{"$oid":"`...)
		w.dst = hex.AppendEncode(w.dst, src[p:p+12])
		w.dst = append(w.dst, `"}`...)
		w.p += 12

	case 0x08: // boolean
		if left < 1 {
			return w.short(p, "boolean", 1, left)
		}
		switch src[p] {
		case 0:
			w.dst = append(w.dst, "false"...)
		case 1:
			w.dst = append(w.dst, "true"...)
		default:
			return w.fail(p, fmt.Sprintf("boolean byte is %#x, not 0 or 1", src[p]))
		}
		w.p++

	case 0x09: // UTC datetime
		if left < 8 {
			return w.short(p, "datetime", 8, left)
		}
		w.date(int64(binary.LittleEndian.Uint64(src[p:])))
		w.p += 8

	case 0x0A: // null
		w.dst = append(w.dst, "null"...)

	case 0x0B: // regular expression
		i := bytes.IndexByte(src[p:end], 0)
		if i < 0 {
			return w.fail(p, "regular expression pattern has no terminating NUL before the end of its document")
		}
		j := bytes.IndexByte(src[p+i+1:end], 0)
		if j < 0 {
			return w.fail(p+i+1, "regular expression options have no terminating NUL before the end of its document")
		}
		w.dst = append(w.dst, `{"$regularExpression":{"pattern":`...)
		w.dst = appendString(w.dst, src[p:p+i])
		w.dst = append(w.dst, `,"options":`...)
		w.dst = appendOptions(w.dst, src[p+i+1:p+i+1+j])
		w.dst = append(w.dst, `}}`...)
		w.p += i + 1 + j + 1

	case 0x0C: // DBPointer
		ns, n, err := w.str(p, end, "DBPointer namespace")
		if err != nil {
			return err
		}
		if left-n < 12 {
			return w.short(p+n, "DBPointer ObjectId", 12, left-n)
		}
		w.dst = append(w.dst, `{"$dbPointer":{"$ref":"`...)
		w.dst = append(w.dst, ns...) // verbatim, as the driver writes it
		w.dst = append(w.dst, `","$id":{"$oid":"`...)
		w.dst = hex.AppendEncode(w.dst, src[p+n:p+n+12])
		w.dst = append(w.dst, `"}}}`...)
		w.p += n + 12

	case 0x0F: // code with scope
		return w.codeWithScope(p, end)

	case 0x10: // int32
		if left < 4 {
			return w.short(p, "int32", 4, left)
		}
		i := int64(int32(binary.LittleEndian.Uint32(src[p:])))
		if w.canonical {
			w.dst = append(w.dst, `{"$numberInt":"`...)
			w.dst = strconv.AppendInt(w.dst, i, 10)
			w.dst = append(w.dst, `"}`...)
		} else {
			w.dst = strconv.AppendInt(w.dst, i, 10)
		}
		w.p += 4

	case 0x11: // timestamp: increment, then seconds
		if left < 8 {
			return w.short(p, "timestamp", 8, left)
		}
		w.dst = append(w.dst, `{"$timestamp":{"t":`...)
		w.dst = strconv.AppendUint(w.dst, uint64(binary.LittleEndian.Uint32(src[p+4:])), 10)
		w.dst = append(w.dst, `,"i":`...)
		w.dst = strconv.AppendUint(w.dst, uint64(binary.LittleEndian.Uint32(src[p:])), 10)
		w.dst = append(w.dst, `}}`...)
		w.p += 8

	case 0x12: // int64
		if left < 8 {
			return w.short(p, "int64", 8, left)
		}
		i := int64(binary.LittleEndian.Uint64(src[p:]))
		if w.canonical {
			w.dst = append(w.dst, `{"$numberLong":"`...)
			w.dst = strconv.AppendInt(w.dst, i, 10)
			w.dst = append(w.dst, `"}`...)
		} else {
			w.dst = strconv.AppendInt(w.dst, i, 10)
		}
		w.p += 8

	case 0x13: // decimal128: low 64 bits, then high
		if left < 16 {
			return w.short(p, "decimal128", 16, left)
		}
		lo := binary.LittleEndian.Uint64(src[p:])
		hi := binary.LittleEndian.Uint64(src[p+8:])
		w.dst = append(w.dst, `{"$numberDecimal":"`...)
		w.dst = appendDecimal(w.dst, hi, lo)
		w.dst = append(w.dst, `"}`...)
		w.p += 16

	case 0x7F: // max key
		w.dst = append(w.dst, `{"$maxKey":1}`...)

	case 0xFF: // min key
		w.dst = append(w.dst, `{"$minKey":1}`...)

	default:
		return w.fail(p, fmt.Sprintf("unknown BSON type %#02x", t))
	}
	w.dst = append(w.dst, ',')
	return nil
}

// str reads a length-prefixed, NUL-terminated string at p (before end),
// returning its bytes without the NUL and the bytes it occupies. The
// driver does not reject NUL bytes inside it, nor invalid UTF-8.
func (w *walker) str(p, end int, what string) ([]byte, int, *MalformedError) {
	left := end - p
	if left < 4 {
		return nil, 0, w.short(p, what+" length", 4, left)
	}
	n := int32(binary.LittleEndian.Uint32(w.src[p:]))
	if n <= 0 {
		return nil, 0, w.fail(p, fmt.Sprintf("%s length %d is not positive (it counts the terminating NUL)", what, n))
	}
	if int(n) > left-4 {
		return nil, 0, w.fail(p, fmt.Sprintf("%s length %d runs past the end of its document (%d bytes left)", what, n, left-4))
	}
	s := w.src[p+4 : p+4+int(n)]
	if s[n-1] != 0 {
		return nil, 0, w.fail(p+4+int(n)-1, fmt.Sprintf("%s does not end in NUL but in %#02x", what, s[n-1]))
	}
	return s[:n-1], 4 + int(n), nil
}

// binary reads the binary value at p (before end), returning its data and
// the bytes it occupies. For an old-style binary (subtype 2, outer length
// over 4) the data is sized by the inner length; as an element of the outer
// document it occupies its outer length (the driver slices top-level values
// by their declared size), anywhere else just its inner data.
func (w *walker) binary(p, end int, top bool) ([]byte, int, *MalformedError) {
	src := w.src
	left := end - p
	if left < 5 {
		return nil, 0, w.short(p, "binary", 5, left)
	}
	n := int32(binary.LittleEndian.Uint32(src[p:]))
	sub := src[p+4]
	if top {
		if n < 0 || n > math.MaxInt32-5 {
			return nil, 0, w.fail(p, fmt.Sprintf("binary length %d is out of range", n))
		}
		if int(n) > left-5 {
			return nil, 0, w.fail(p, fmt.Sprintf("binary length %d runs past the end of its document (%d bytes left)", n, left-5))
		}
		data := src[p+5 : p+5+int(n)]
		if sub == 2 && n > 4 {
			inner := int32(binary.LittleEndian.Uint32(data))
			if inner < 0 || int(inner) > len(data)-4 {
				return nil, 0, w.fail(p+5, fmt.Sprintf("old binary inner length %d does not fit its outer length %d", inner, n))
			}
			data = data[4 : 4+int(inner)]
		}
		return data, 5 + int(n), nil
	}
	if sub == 2 && n > 4 {
		if left-5 < 4 {
			return nil, 0, w.short(p+5, "old binary inner length", 4, left-5)
		}
		inner := int32(binary.LittleEndian.Uint32(src[p+5:]))
		if inner < 0 {
			return nil, 0, w.fail(p+5, fmt.Sprintf("old binary inner length %d is negative", inner))
		}
		if int(inner) > left-9 {
			return nil, 0, w.fail(p+5, fmt.Sprintf("old binary inner length %d runs past the end of its document (%d bytes left)", inner, left-9))
		}
		return src[p+9 : p+9+int(inner)], 9 + int(inner), nil
	}
	if n < 0 {
		return nil, 0, w.fail(p, fmt.Sprintf("binary length %d is negative", n))
	}
	if int(n) > left-5 {
		return nil, 0, w.fail(p, fmt.Sprintf("binary length %d runs past the end of its document (%d bytes left)", n, left-5))
	}
	return src[p+5 : p+5+int(n)], 5 + int(n), nil
}

// codeWithScope starts the code-with-scope value at p (before end): it
// writes the code and opens the scope's frame.
func (w *walker) codeWithScope(p, end int) *MalformedError {
	src := w.src
	left := end - p
	if left < 8 {
		return w.short(p, "code with scope", 8, left)
	}
	total := int32(binary.LittleEndian.Uint32(src[p:]))
	n := int32(binary.LittleEndian.Uint32(src[p+4:]))
	if n <= 0 {
		return w.fail(p+4, fmt.Sprintf("code length %d is not positive (it counts the terminating NUL)", n))
	}
	if int(n) > left-8 {
		return w.fail(p+4, fmt.Sprintf("code length %d runs past the end of its document (%d bytes left)", n, left-8))
	}
	// The driver drops the code's last byte without checking it is NUL.
	code := src[p+8 : p+8+int(n)-1]
	sp := p + 8 + int(n) // the scope
	if end-sp < 4 {
		return w.short(sp, "scope length", 4, end-sp)
	}
	size := int32(binary.LittleEndian.Uint32(src[sp:]))
	// int32 sum, as the driver computes it.
	if int64(total) != int64(4+n+4)+int64(size) {
		return w.fail(p, fmt.Sprintf("code with scope length %d is not the sum of its parts (%d)", total, int64(4+n+4)+int64(size)))
	}
	if size < 5 {
		return w.fail(sp, fmt.Sprintf("scope length %d is below the minimum of 5", size))
	}
	if int(size) > end-sp {
		return w.fail(sp, fmt.Sprintf("scope length %d runs past the end of its document (%d bytes left)", size, end-sp))
	}
	w.dst = append(w.dst, `{"$code":`...)
	w.dst = appendString(w.dst, code)
	w.dst = append(w.dst, `,"$scope":{`...)
	w.open(sp+int(size), kindScope)
	w.p = sp + 4
	return nil
}

// short reports a value cut off by the end of its document.
func (w *walker) short(p int, what string, need, left int) *MalformedError {
	if left < 0 {
		left = 0
	}
	return w.fail(p, fmt.Sprintf("%s needs %d bytes, %d are left in its document", what, need, left))
}

// fail builds the error for a problem at offset p; run adds the field.
func (w *walker) fail(p int, reason string) *MalformedError {
	return &MalformedError{Offset: p, Reason: reason}
}

// failIn builds the error for a problem at offset p in the innermost frame
// of stack.
func (w *walker) failIn(stack []frame, p int, reason string) error {
	return &MalformedError{Offset: p, Field: w.path(stack), Reason: reason}
}

// maxKeyInPath bounds each name in an error's field path.
const maxKeyInPath = 64

// path is the dotted path of the element being read.
func (w *walker) path(stack []frame) string {
	var b []byte
	for _, f := range stack {
		var seg []byte
		switch {
		case f.key < 0:
			continue
		case f.kind == kindArray:
			seg = strconv.AppendInt(nil, int64(f.index), 10)
		default:
			seg = w.src[f.key:f.end]
			if k := bytes.IndexByte(seg, 0); k >= 0 {
				seg = seg[:k]
			}
			if len(seg) > maxKeyInPath {
				seg = append(seg[:maxKeyInPath:maxKeyInPath], "…"...)
			}
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		if f.kind == kindScope {
			b = append(b, "$scope."...)
		}
		b = append(b, seg...)
	}
	return string(b)
}

// typeName names the container and string types in messages.
func typeName(t byte) string {
	switch t {
	case 0x02:
		return "string"
	case 0x03:
		return "document"
	case 0x04:
		return "array"
	case 0x0D:
		return "JavaScript code"
	case 0x0E:
		return "symbol"
	}
	return fmt.Sprintf("type %#02x", t)
}
