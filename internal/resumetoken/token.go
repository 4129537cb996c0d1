package resumetoken

import (
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Token types.
const (
	TypeHighWaterMark = 0
	TypeEvent         = 128
)

// DefaultVersion is the token version a current server writes.
const DefaultVersion = 2

// maxSmallInt bounds txnOpIndex and fragmentNum: the server writes them with
// BSONObjBuilder::appendNumber, which switches to int64 at 2**30, and its
// parser then rejects the token. Valid tokens stay below.
const maxSmallInt = 1<<30 - 1

// Token is the decoded content of a change-stream resume token.
type Token struct {
	ClusterTime    bson.Timestamp
	Version        int // 2 for new tokens; 0 and 1 are accepted too
	TokenType      int // TypeHighWaterMark or TypeEvent (always TypeEvent for version 0)
	TxnOpIndex     int
	FromInvalidate bool
	UUID           []byte // 16 bytes, or nil (version 2 writes an explicit null)
	// EventIdentifier: version 2 event tokens hold {operationType,
	// documentKey} for CRUD events and {operationType, operationDescription}
	// for DDL events; version 0/1 hold the documentKey. nil for high-water
	// marks. Decoded documents use bson.D / bson.A and the exact BSON types
	// of the encoded values (int32, int64, float64, string, ...).
	EventIdentifier bson.D
	FragmentNum     *int // version 2 only; $changeStreamSplitLargeEvent fragments
}

// Validate reports whether t can be encoded and would be accepted by a real
// server, with the code the server uses when building such a token.
func (t Token) Validate() error {
	_, _, err := t.encode()
	return err
}

// Encode returns the token's _data string (upper-case hex of its KeyString
// V1 encoding, like a real server) and its type bits (nil when all zero).
// A token that fails Validate encodes as ("", nil).
func (t Token) Encode() (data string, typeBits []byte) {
	ks, tb, err := t.encode()
	if err != nil {
		return "", nil
	}
	return upperHex(ks), tb
}

// upperHex is strings.ToUpper(hex.EncodeToString(b)) in one allocation.
func upperHex(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0x0f]
	}
	return string(out)
}

// Document returns the resume token as a real server sends it in an event's
// _id or a postBatchResumeToken: {_data: "<HEX>"}, plus _typeBits
// (BinData subtype 0) when the type bits are not all zero.
func (t Token) Document() bson.D {
	data, tb := t.Encode()
	d := bson.D{{Key: "_data", Value: data}}
	if tb != nil {
		d = append(d, bson.E{Key: "_typeBits", Value: bson.Binary{Subtype: 0, Data: tb}})
	}
	return d
}

// Compare orders tokens as a real server does: by their _data hex strings
// (KeyString order). For tokens of one version this is the order of
// (ClusterTime, TokenType, TxnOpIndex, FromInvalidate, UUID, EventIdentifier,
// FragmentNum), with high-water marks before events at the same time. Invalid
// tokens encode as "" and sort first.
func Compare(a, b Token) int {
	da, _ := a.Encode()
	db, _ := b.Encode()
	return strings.Compare(da, db)
}

func (t Token) encode() ([]byte, []byte, error) {
	if err := t.check(); err != nil {
		return nil, nil, err
	}
	var e encoder
	e.buf = append(e.buf, ctTimestamp)
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(t.ClusterTime.T)<<32|uint64(t.ClusterTime.I))
	e.int32(int32(t.Version))
	if t.Version >= 1 {
		e.int32(int32(t.TokenType))
	}
	e.int32(int32(t.TxnOpIndex))
	if t.Version >= 1 {
		if t.FromInvalidate {
			e.buf = append(e.buf, ctBoolTrue)
		} else {
			e.buf = append(e.buf, ctBoolFalse)
		}
	}
	switch {
	case t.UUID != nil:
		e.buf = append(e.buf, ctBinData, 16, 4)
		e.buf = append(e.buf, t.UUID...)
	case t.Version >= 2:
		e.buf = append(e.buf, ctNullish)
	}
	if t.EventIdentifier != nil {
		raw, err := bson.Marshal(t.EventIdentifier)
		if err != nil {
			return nil, nil, newErr(mongoerr.CodeFailedToParse, "eventIdentifier: %v", err)
		}
		if err := e.value(bsonDocument, raw, 1); err != nil {
			return nil, nil, err
		}
	}
	if t.FragmentNum != nil {
		e.int32(int32(*t.FragmentNum))
	}
	e.buf = append(e.buf, ksEnd)
	return e.buf, e.tb.encoded(), nil
}

func (e *encoder) int32(n int32) {
	e.tb.bits(tbInt, 2)
	e.buf = appendInteger(e.buf, int64(n))
}

// check applies the server's rules for building a token (resume_token.cpp).
func (t Token) check() error {
	switch {
	case t.Version < 0 || t.Version > 2:
		return newErr(50795, "Invalid Resume Token: only supports version 0, 1 and 2")
	case t.TokenType != TypeEvent && t.TokenType != TypeHighWaterMark:
		return newErr(51057, "Token type %d not recognized", t.TokenType)
	case t.Version == 0 && (t.TokenType != TypeEvent || t.FromInvalidate):
		return newErr(mongoerr.CodeFailedToParse, "version 0 tokens have no tokenType or fromInvalidate")
	case t.TxnOpIndex < 0:
		return newErr(50794, "Invalid Resume Token: txnOpIndex should be non-negative")
	case t.TxnOpIndex > maxSmallInt:
		return newErr(50855, "Resume Token txnOpIndex is not an integer")
	case t.UUID != nil && len(t.UUID) != 16:
		return newErr(mongoerr.CodeInvalidUUID, "uuid must be 16 bytes, got %d", len(t.UUID))
	case t.TokenType == TypeHighWaterMark && (t.TxnOpIndex > 0 || t.FromInvalidate || t.UUID != nil || t.EventIdentifier != nil || t.FragmentNum != nil):
		return newErr(6189505, "Invalid high water mark token")
	case t.UUID == nil && t.EventIdentifier != nil && t.Version < 2:
		return newErr(50788, "Unexpected resume token with a eventIdentifier but no UUID")
	case t.TokenType == TypeEvent && t.EventIdentifier == nil && t.Version >= 2:
		return newErr(6189502, "Expected an eventIdentifier for an event resume token")
	case t.FragmentNum != nil && t.Version < 2:
		return newErr(7182504, "Tokens of version %d cannot have a fragmentNum", t.Version)
	case t.FragmentNum != nil && (*t.FragmentNum < 0 || *t.FragmentNum > maxSmallInt):
		return newErr(7182501, "Resume token 'fragmentNum' must be a non-negative integer.")
	}
	return nil
}
