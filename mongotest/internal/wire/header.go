package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Op codes of the messages this package knows.
const (
	OpReply      int32 = 1
	OpQuery      int32 = 2004
	OpCompressed int32 = 2012
	OpMsg        int32 = 2013
)

// HeaderSize is the size of the standard message header.
const HeaderSize = 16

// DefaultMaxMessageSize is maxMessageSizeBytes of a real server (48 000 000);
// ReadMessage uses it when given maxSize <= 0.
const DefaultMaxMessageSize = 48_000_000

// Header is the standard 16-byte message header (little-endian int32s).
// Length includes the header itself.
type Header struct {
	Length, RequestID, ResponseTo, OpCode int32
}

// Append appends the 16 header bytes to dst.
func (h Header) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.Length))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.RequestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.ResponseTo))
	return binary.LittleEndian.AppendUint32(dst, uint32(h.OpCode))
}

// ParseHeader decodes the first 16 bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, malformed(0, "header needs %d bytes, have %d", HeaderSize, len(b))
	}
	return Header{
		Length:     int32(binary.LittleEndian.Uint32(b[0:])),
		RequestID:  int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo: int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:     int32(binary.LittleEndian.Uint32(b[12:])),
	}, nil
}

// ReadMessage reads exactly one message from r and returns its header and the
// body that follows the header (h.Length-16 bytes).
//
// A declared length below 16 is rejected with ErrMalformed; one above maxSize
// (DefaultMaxMessageSize if maxSize <= 0) with ErrTooLarge, before any of the
// body is read, so the connection must then be closed. A clean end of stream
// before the first header byte returns io.EOF unwrapped; a stream ending inside
// a message returns an error wrapping io.ErrUnexpectedEOF.
func ReadMessage(r io.Reader, maxSize int) (Header, []byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return Header{}, nil, io.EOF
		}
		return Header{}, nil, fmt.Errorf("wire: reading header: %w", err)
	}
	h, _ := ParseHeader(hb[:])
	if h.Length < HeaderSize {
		return h, nil, malformed(0, "message length %d is shorter than the %d-byte header", h.Length, HeaderSize)
	}
	if int64(h.Length) > int64(maxSize) {
		return h, nil, &Error{Msg: fmt.Sprintf("message length %d exceeds the maximum %d", h.Length, maxSize), kind: ErrTooLarge}
	}
	body := make([]byte, int(h.Length)-HeaderSize)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, fmt.Errorf("wire: reading %d-byte message body: %w", len(body), err)
	}
	return h, body, nil
}

// reader is a bounds-checked cursor over a byte slice.
type reader struct {
	b   []byte
	off int
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8() (byte, bool) {
	if r.remaining() < 1 {
		return 0, false
	}
	v := r.b[r.off]
	r.off++
	return v, true
}

func (r *reader) i32() (int32, bool) {
	if r.remaining() < 4 {
		return 0, false
	}
	v := int32(binary.LittleEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v, true
}

func (r *reader) i64() (int64, bool) {
	if r.remaining() < 8 {
		return 0, false
	}
	v := int64(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v, true
}

// cstring reads a NUL-terminated string (without the NUL).
func (r *reader) cstring() (string, bool) {
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s, true
		}
	}
	return "", false
}

// document reads one BSON document, checking its length prefix against the
// remaining bytes and validating its contents. what names it in errors.
func (r *reader) document(what string) ([]byte, error) {
	if r.remaining() < 5 {
		return nil, malformed(0, "%s: need at least 5 bytes for a BSON document, have %d", what, r.remaining())
	}
	n := int32(binary.LittleEndian.Uint32(r.b[r.off:]))
	if n < 5 || int64(n) > int64(r.remaining()) {
		return nil, malformed(0, "%s: BSON document length %d out of bounds (remaining %d)", what, n, r.remaining())
	}
	doc := r.b[r.off : r.off+int(n) : r.off+int(n)]
	if err := validateDoc(doc); err != nil {
		return nil, malformed(0, "%s: invalid BSON document: %v", what, err)
	}
	r.off += int(n)
	return doc, nil
}
