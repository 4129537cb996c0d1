// Package wire frames and parses the MongoDB wire protocol messages that the
// mongotest emulator exchanges with the official Go driver.
//
// Guarantees:
//
//   - Every parser validates its input completely and returns an error
//     (wrapping ErrMalformed or ErrTooLarge, see Error) instead of panicking,
//     whatever the bytes.
//   - ReadMessage never allocates more than the declared message length, and
//     rejects a declared length above its maxSize before reading the body.
//   - Parsed values (Msg.Body, Section1.Documents, Query.Query, ...) alias the
//     body slice given to the parser: they stay valid as long as that slice is
//     not modified. Nothing is copied on the hot path.
//   - Encoders (AppendMsg, AppendReply, Msg.Append, Query.Append,
//     AppendCompressed) append complete messages, header included, and produce
//     bytes the corresponding parser accepts.
//
// Supported: OP_MSG (2013) with kind-0 and kind-1 sections and the optional
// CRC-32C checksum; OP_QUERY (2004) as sent for the legacy handshake; OP_REPLY
// (1) as the reply to it; OP_COMPRESSED (2012) with the noop compressor (id 0).
// Not supported: snappy, zlib and zstd compression (ErrUnsupported), the
// security-token section kind (2, multitenancy only), the legacy OP_GET_MORE,
// OP_KILL_CURSORS, OP_INSERT/UPDATE/DELETE opcodes (the caller sees the opcode
// in the Header and decides).
//
// Where the real server has a specific error code for a malformation
// (src/mongo/rpc/op_msg.cpp), Error.Code carries it, so the emulator can answer
// with the same code a real mongod would.
package wire
