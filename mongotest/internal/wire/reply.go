package wire

import "encoding/binary"

// OP_REPLY responseFlags bits.
const (
	ReplyCursorNotFound int32 = 1
	ReplyQueryFailure   int32 = 2
	ReplyAwaitCapable   int32 = 8
)

// AppendReply appends a complete OP_REPLY carrying one document (doc, assumed
// valid): cursorID 0, startingFrom 0, numberReturned 1. It answers an
// OP_QUERY handshake; responseTo is the query's requestID.
func AppendReply(dst []byte, requestID, responseTo int32, responseFlags int32, doc []byte) []byte {
	start := len(dst)
	dst = Header{RequestID: requestID, ResponseTo: responseTo, OpCode: OpReply}.Append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseFlags))
	dst = binary.LittleEndian.AppendUint64(dst, 0) // cursorID
	dst = binary.LittleEndian.AppendUint32(dst, 0) // startingFrom
	dst = binary.LittleEndian.AppendUint32(dst, 1) // numberReturned
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
