package wire

import "encoding/binary"

// Compressor ids of OP_COMPRESSED.
const (
	CompressorNoop   byte = 0
	CompressorSnappy byte = 1
	CompressorZlib   byte = 2
	CompressorZstd   byte = 3
)

// ParseCompressed parses the body of an OP_COMPRESSED (the bytes after the
// header) and returns the original opcode and the uncompressed message body
// (the bytes that followed the original header). Only the noop compressor
// (id 0) is supported; other ids return an error wrapping ErrUnsupported.
// A nested OP_COMPRESSED, a negative size or a size that differs from the
// payload are rejected with ErrMalformed.
//
// To parse the inner message, build its header as
// Header{Length: 16 + len(inner), RequestID: h.RequestID, ResponseTo:
// h.ResponseTo, OpCode: origOpCode}.
func ParseCompressed(body []byte) (origOpCode int32, inner []byte, err error) {
	r := reader{b: body}
	op, ok := r.i32()
	if !ok {
		return 0, nil, malformed(0, "OP_COMPRESSED: truncated originalOpcode")
	}
	size, ok := r.i32()
	if !ok {
		return 0, nil, malformed(0, "OP_COMPRESSED: truncated uncompressedSize")
	}
	id, ok := r.u8()
	if !ok {
		return 0, nil, malformed(0, "OP_COMPRESSED: truncated compressorId")
	}
	if op == OpCompressed {
		return 0, nil, malformed(0, "OP_COMPRESSED: nested compression")
	}
	if size < 0 {
		return 0, nil, malformed(0, "OP_COMPRESSED: negative uncompressedSize %d", size)
	}
	if id != CompressorNoop {
		return 0, nil, unsupported("OP_COMPRESSED: compressor id %d (only noop, id 0, is supported)", id)
	}
	payload := r.b[r.off:]
	if int64(size) != int64(len(payload)) {
		return 0, nil, malformed(0, "OP_COMPRESSED: uncompressedSize %d does not match the %d-byte noop payload", size, len(payload))
	}
	return op, payload, nil
}

// AppendCompressed wraps a message body (the bytes after its header) in a
// complete noop-compressed OP_COMPRESSED message and appends it to dst.
func AppendCompressed(dst []byte, requestID, responseTo, origOpCode int32, inner []byte) []byte {
	start := len(dst)
	dst = Header{RequestID: requestID, ResponseTo: responseTo, OpCode: OpCompressed}.Append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(origOpCode))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(inner)))
	dst = append(dst, CompressorNoop)
	dst = append(dst, inner...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
