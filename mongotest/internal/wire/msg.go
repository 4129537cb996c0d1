package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// OP_MSG flag bits. The low 16 bits are required: a set bit this package does
// not know makes the message invalid. The high 16 bits are optional and
// unknown ones are ignored.
const (
	FlagChecksumPresent uint32 = 1
	FlagMoreToCome      uint32 = 2
	FlagExhaustAllowed  uint32 = 1 << 16
)

const knownRequiredFlags = FlagChecksumPresent | FlagMoreToCome

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Section1 is a kind-1 (document sequence) section of an OP_MSG.
type Section1 struct {
	Identifier string
	Documents  []bson.Raw
}

// Msg is a parsed OP_MSG. Flags are the flag bits as received (including
// FlagChecksumPresent when the message carried a checksum; the checksum itself
// has been verified and dropped). Body is the kind-0 document; Sequences are
// the kind-1 sections in message order.
type Msg struct {
	Flags     uint32
	Body      bson.Raw
	Sequences []Section1
}

// ParseMsg parses and validates the body of an OP_MSG (the bytes after the
// header, as returned by ReadMessage). The header is needed because the
// optional CRC-32C checksum covers the whole message: ParseMsg re-encodes h to
// compute it, so h must be the header exactly as read (h.Length must equal
// 16+len(body)).
//
// Rejected, with an error wrapping ErrMalformed (Error.Code as a real server):
// an opcode other than OpMsg; unknown required flag bits (223); a checksum
// that does not match; no kind-0 section (40587) or more than one (40430);
// unknown section kinds (40432); kind-1 sizes inconsistent with the bytes; an
// empty or duplicate identifier (40431); an identifier that is also a
// top-level field of the body (40433); any document whose length prefix is out
// of bounds or whose contents are not valid BSON.
func ParseMsg(h Header, body []byte) (*Msg, error) {
	if h.OpCode != OpMsg {
		return nil, malformed(0, "opcode %d is not OP_MSG", h.OpCode)
	}
	if int64(h.Length) != int64(HeaderSize)+int64(len(body)) {
		return nil, malformed(0, "header length %d does not match the %d-byte body", h.Length, len(body))
	}
	if len(body) < 4 {
		return nil, malformed(0, "OP_MSG needs 4 bytes of flags, have %d", len(body))
	}
	m := &Msg{Flags: binary.LittleEndian.Uint32(body)}
	if unknown := m.Flags & 0xFFFF &^ knownRequiredFlags; unknown != 0 {
		return nil, malformed(CodeIllegalOpMsgFlag, "message contains illegal flags value 0b%032b", m.Flags)
	}
	sections := body[4:]
	if m.Flags&FlagChecksumPresent != 0 {
		if len(sections) <= 4 {
			return nil, malformed(CodeChecksumMessageTooSmall, "invalid message size for an OP_MSG containing a checksum")
		}
		n := len(sections) - 4
		want := binary.LittleEndian.Uint32(sections[n:])
		crc := crc32.Update(0, castagnoli, h.Append(make([]byte, 0, HeaderSize)))
		crc = crc32.Update(crc, castagnoli, body[:4+n])
		if crc != want {
			return nil, malformed(0, "OP_MSG checksum 0x%08x does not match contents (0x%08x)", want, crc)
		}
		sections = sections[:n]
	}
	r := reader{b: sections}
	haveBody := false
	for r.remaining() > 0 {
		kind, _ := r.u8()
		switch kind {
		case 0:
			if haveBody {
				return nil, malformed(CodeMultipleBodySections, "multiple body sections in message")
			}
			doc, err := r.document("body section")
			if err != nil {
				return nil, err
			}
			m.Body = doc
			haveBody = true
		case 1:
			seq, err := parseSequence(&r)
			if err != nil {
				return nil, err
			}
			for _, s := range m.Sequences {
				if s.Identifier == seq.Identifier {
					return nil, malformed(CodeDuplicateDocumentSequence, "duplicate document sequence: %s", seq.Identifier)
				}
			}
			m.Sequences = append(m.Sequences, seq)
		default:
			return nil, malformed(CodeUnknownSectionKind, "unknown section kind %d", kind)
		}
	}
	if !haveBody {
		return nil, malformed(CodeMissingBody, "OP_MSG messages must have a body")
	}
	for _, s := range m.Sequences {
		if _, err := m.Body.LookupErr(s.Identifier); err == nil {
			return nil, malformed(CodeDuplicateBodyField, "duplicate field between body and document sequence %s", s.Identifier)
		}
	}
	return m, nil
}

// parseSequence parses a kind-1 section after its kind byte.
func parseSequence(r *reader) (Section1, error) {
	size, ok := r.i32()
	if !ok {
		return Section1{}, malformed(0, "truncated document sequence size")
	}
	// size includes itself; the identifier needs at least its NUL.
	if size < 5 || int64(size)-4 > int64(r.remaining()) {
		return Section1{}, malformed(0, "document sequence size %d out of bounds (remaining %d)", size, r.remaining()+4)
	}
	end := r.off + int(size) - 4
	sr := reader{b: r.b[:end], off: r.off}
	r.off = end
	id, ok := sr.cstring()
	if !ok {
		return Section1{}, malformed(0, "document sequence identifier is not NUL-terminated within the section")
	}
	if id == "" {
		return Section1{}, malformed(0, "document sequence identifier is empty")
	}
	seq := Section1{Identifier: id}
	for sr.remaining() > 0 {
		doc, err := sr.document(fmt.Sprintf("document sequence %q, document %d", id, len(seq.Documents)))
		if err != nil {
			return Section1{}, err
		}
		seq.Documents = append(seq.Documents, doc)
	}
	return seq, nil
}

// Command returns the command document: the body decoded as bson.D (nested
// documents as bson.D, arrays as bson.A) with each document sequence appended
// as an array field named after its identifier, in message order. The first
// key is the command name.
//
// Each sequence document is copied into bytes of its own, which replace it
// in m.Sequences and which its decoded keys and strings share (they are
// never changed): the emulator stores an inserted document with those
// bytes as its encoding, and the document's strings cost nothing more.
// The body's values are copies.
func (m *Msg) Command() (bson.D, error) {
	cmd, err := decodeD(m.Body, "body")
	if err != nil {
		return nil, err
	}
	if len(cmd) == 0 {
		return nil, malformed(0, "empty command document")
	}
	for si := range m.Sequences {
		s := &m.Sequences[si]
		arr := make(bson.A, 0, len(s.Documents))
		for i, d := range s.Documents {
			// Each document gets bytes of its own, which its strings
			// share and which become the sequence's document: an insert
			// stores the document with these bytes as its encoding
			// (one copy of the document, not two), and what it keeps
			// does not keep the whole message.
			own := make([]byte, len(d))
			copy(own, d)
			s.Documents[i] = own
			v, ok := decodeDocShared(own)
			if !ok {
				var err error
				if v, err = unmarshalD(own, fmt.Sprintf("document sequence %q, document %d", s.Identifier, i)); err != nil {
					return nil, err
				}
			}
			arr = append(arr, v)
		}
		cmd = append(cmd, bson.E{Key: s.Identifier, Value: arr})
	}
	return cmd, nil
}

// decodeD decodes a document of the message, with decodeDoc when it can.
func decodeD(raw bson.Raw, what string) (bson.D, error) {
	if d, ok := decodeDoc(raw); ok {
		return d, nil
	}
	return unmarshalD(raw, what)
}

// unmarshalD decodes a document with bson.Unmarshal.
func unmarshalD(raw bson.Raw, what string) (bson.D, error) {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, malformed(0, "%s: decoding: %v", what, err)
	}
	if d == nil {
		d = bson.D{}
	}
	return d, nil
}

// Append encodes m as a complete OP_MSG (kind-0 section first, then the
// sequences) and appends it to dst. If m.Flags has FlagChecksumPresent, a
// CRC-32C checksum is appended. The documents are assumed valid.
func (m *Msg) Append(dst []byte, requestID, responseTo int32) []byte {
	start := len(dst)
	dst = Header{RequestID: requestID, ResponseTo: responseTo, OpCode: OpMsg}.Append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, m.Flags)
	dst = append(dst, 0)
	dst = append(dst, m.Body...)
	for _, s := range m.Sequences {
		dst = append(dst, 1)
		sizeAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = append(dst, s.Identifier...)
		dst = append(dst, 0)
		for _, d := range s.Documents {
			dst = append(dst, d...)
		}
		binary.LittleEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-sizeAt))
	}
	return finishMsg(dst, start, m.Flags&FlagChecksumPresent != 0)
}

// AppendMsg appends a complete OP_MSG with the given flags and one kind-0
// section holding doc (a BSON document, assumed valid). Replies use flags 0;
// never set FlagChecksumPresent on replies to the Go driver, which cannot
// parse it.
func AppendMsg(dst []byte, requestID, responseTo int32, flags uint32, doc []byte) []byte {
	start := len(dst)
	dst = Header{RequestID: requestID, ResponseTo: responseTo, OpCode: OpMsg}.Append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = append(dst, 0)
	dst = append(dst, doc...)
	return finishMsg(dst, start, flags&FlagChecksumPresent != 0)
}

// finishMsg patches the length of the message starting at dst[start] and, if
// asked, appends the checksum over the whole message.
func finishMsg(dst []byte, start int, checksum bool) []byte {
	n := len(dst) - start
	if checksum {
		n += 4
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(n))
	if checksum {
		dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	}
	return dst
}
