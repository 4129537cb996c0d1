// Package resumetoken encodes and decodes MongoDB change-stream resume
// tokens exactly as a real server does, so that tokens produced by the
// mongotest emulator look, compare and parse like real ones.
//
// A resume token is the document {_data: <hex>, _typeBits?: BinData(0)}.
// _data is the upper-case hex of a KeyString V1 encoding (all fields
// ascending) of this sequence of values (src/mongo/db/pipeline/resume_token.cpp):
//
//	#  value            BSON type   present                     KeyString bytes (examples)
//	1  clusterTime      Timestamp   always                      82 <t: 4 bytes BE> <i: 4 bytes BE>
//	2  version          int32       always                      2B02 (1), 2B04 (2)
//	3  tokenType        int32       version >= 1                29 (0, high-water mark), 2C0100 (128, event)
//	4  txnOpIndex       int32       always                      29 (0), 2B02 (1), ...
//	5  fromInvalidate   bool        version >= 1                6E (false), 6F (true)
//	6  uuid             BinData(4)  events; null in v2 if none  5A 10 04 <16 bytes>, or 14 (null)
//	7  eventIdentifier  object      events                      46 (<generic type> <name> 00 <value>)* 00
//	8  fragmentNum      int32       v2 split-event fragments    2B..
//	   end of key                                               04
//
// In the event identifier, version 2 tokens hold {operationType,
// documentKey} (CRUD) or {operationType, operationDescription} (DDL);
// versions 0 and 1 hold the documentKey itself.
//
// KeyString drops the BSON type of numbers so that equal values compare
// equal: int32 2, int64 2 and double 2.0 all encode as 2B04, and only the
// type bits (_typeBits) tell them apart. _typeBits is omitted when all its
// bits are zero, which is the case whenever every number in the token is an
// int32 (strings add zero bits too). Numbers encode in a sign/magnitude
// order-preserving form: 29 zero, 2B..32 positive integers of 1..8 bytes
// (value<<1, a low 1 bit announcing a binary fraction), 27..20 negative ones
// (bytes inverted), 2A/28 magnitudes below one, 33/1F magnitudes of 2**63
// and above, 1E NaN.
//
// Guarantees:
//
//   - Encode reproduces a real server's bytes for every BSON type, including
//     doubles with fractions, NaN, infinities and -0.0; decimal128 only for
//     zeros, NaN, infinities and values exactly equal to a double (other
//     decimals need the server's decimal continuation: Validate reports them
//     and Encode returns "").
//   - Decode(Encode(t)) == t for every valid t, with numbers decoded to their
//     original BSON types (int32, int64, double, decimal128) through the type
//     bits.
//   - Compare is the order of the _data strings, which is the server's
//     order: by clusterTime, then high-water marks before events, then
//     txnOpIndex, and so on field by field.
//   - Decode and Parse never panic and reject malformed input with an *Error
//     carrying the code a real server returns.
package resumetoken
