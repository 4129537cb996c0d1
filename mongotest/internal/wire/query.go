package wire

import (
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Query is a parsed OP_QUERY. The Go driver sends it only for the legacy
// handshake (isMaster/hello on "admin.$cmd" with NumberToReturn -1).
// ReturnFieldsSelector is nil when absent.
type Query struct {
	Flags                int32
	FullCollectionName   string
	NumberToSkip         int32
	NumberToReturn       int32
	Query                bson.Raw
	ReturnFieldsSelector bson.Raw
}

// ParseQuery parses and validates the body of an OP_QUERY (the bytes after
// the header). Trailing bytes after the optional selector are rejected.
func ParseQuery(body []byte) (*Query, error) {
	r := reader{b: body}
	var q Query
	var ok bool
	if q.Flags, ok = r.i32(); !ok {
		return nil, malformed(0, "OP_QUERY: truncated flags")
	}
	if q.FullCollectionName, ok = r.cstring(); !ok {
		return nil, malformed(0, "OP_QUERY: fullCollectionName is not NUL-terminated")
	}
	if q.NumberToSkip, ok = r.i32(); !ok {
		return nil, malformed(0, "OP_QUERY: truncated numberToSkip")
	}
	if q.NumberToReturn, ok = r.i32(); !ok {
		return nil, malformed(0, "OP_QUERY: truncated numberToReturn")
	}
	doc, err := r.document("OP_QUERY query")
	if err != nil {
		return nil, err
	}
	q.Query = doc
	if r.remaining() > 0 {
		if q.ReturnFieldsSelector, err = r.document("OP_QUERY returnFieldsSelector"); err != nil {
			return nil, err
		}
	}
	if r.remaining() > 0 {
		return nil, malformed(0, "OP_QUERY: %d trailing bytes", r.remaining())
	}
	return &q, nil
}

// UnwrapQuery returns the command inside a legacy OP_QUERY query document. If
// the first key is "$query" (or "query"), the command is its value and
// readPreference is the "$readPreference" field if present (nil otherwise);
// otherwise doc itself is the command. A wrapper whose "$query" is not a
// document is rejected.
func UnwrapQuery(doc bson.Raw) (cmd, readPreference bson.Raw, err error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, nil, malformed(0, "OP_QUERY query: %v", err)
	}
	if len(elems) == 0 {
		return doc, nil, nil
	}
	if k := elems[0].Key(); k != "$query" && k != "query" {
		return doc, nil, nil
	}
	inner, ok := elems[0].Value().DocumentOK()
	if !ok {
		return nil, nil, malformed(0, "OP_QUERY query: %q is not a document", elems[0].Key())
	}
	for _, e := range elems[1:] {
		if e.Key() == "$readPreference" {
			if rp, ok := e.Value().DocumentOK(); ok {
				readPreference = rp
			}
		}
	}
	return inner, readPreference, nil
}

// Command returns the command carried by the query (unwrapped with
// UnwrapQuery) decoded as bson.D; the first key is the command name.
func (q *Query) Command() (bson.D, error) {
	inner, _, err := UnwrapQuery(q.Query)
	if err != nil {
		return nil, err
	}
	cmd, err := decodeD(inner, "OP_QUERY command")
	if err != nil {
		return nil, err
	}
	if len(cmd) == 0 {
		return nil, malformed(0, "empty command document")
	}
	return cmd, nil
}

// Append encodes q as a complete OP_QUERY message and appends it to dst.
func (q *Query) Append(dst []byte, requestID, responseTo int32) []byte {
	start := len(dst)
	dst = Header{RequestID: requestID, ResponseTo: responseTo, OpCode: OpQuery}.Append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.Flags))
	dst = append(dst, q.FullCollectionName...)
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.NumberToSkip))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.NumberToReturn))
	dst = append(dst, q.Query...)
	dst = append(dst, q.ReturnFieldsSelector...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
