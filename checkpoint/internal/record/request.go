package record

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

// The BSON layout of a stored snapshot request, shared by both stores
// (the stream is the record's key: mongostore's _id, boltstore's key):
//
//	id         string
//	filter     binary subtype 0 holding the raw filter document, or null
//	requested  date (milliseconds, set by the store)
//	cancelled  bool
//	note       string
//
// The filter is binary, like a token, so that it comes back byte for byte
// and no server rejects its $-prefixed operators as field names.
const (
	RID        = "id"
	RFilter    = "filter"
	RRequested = "requested"
	RCancelled = "cancelled"
	RNote      = "note"
)

// RequestFields returns the stored fields of req, without requested (each
// store sets that from its own clock).
func RequestFields(req checkpoint.SnapshotRequest) bson.D {
	return bson.D{
		{Key: RID, Value: req.ID},
		{Key: RFilter, Value: binaryOrNil(req.Filter)},
		{Key: RCancelled, Value: req.Cancelled},
		{Key: RNote, Value: req.Note},
	}
}

// NewRequestID returns a new request ID: an ObjectID's 24 hex digits, so
// that IDs sort by the second they were made in.
func NewRequestID() string { return bson.NewObjectID().Hex() }

// DecodeRequest reads the stored request of stream. Its Filter is a copy:
// it does not alias raw. Unknown fields are ignored. A record that cannot
// be read is a *checkpoint.CorruptError with Stream and Problem set; the
// store sets Record.
func DecodeRequest(stream string, raw bson.Raw) (checkpoint.SnapshotRequest, error) {
	req := checkpoint.SnapshotRequest{Stream: stream}
	corrupt := func(format string, args ...any) error {
		return &checkpoint.CorruptError{Stream: stream, Problem: fmt.Sprintf(format, args...)}
	}
	elems, err := raw.Elements()
	if err != nil {
		return req, corrupt("not a BSON document: %v", err)
	}
	seen := map[string]bool{}
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		seen[key] = true
		var ok bool
		switch key {
		case RID:
			req.ID, ok = v.StringValueOK()
		case RFilter:
			req.Filter, ok = rawBinary(v)
			if ok && req.Filter != nil {
				if err := req.Filter.Validate(); err != nil {
					return req, corrupt("field %s does not hold a BSON document (a query filter): %v", key, err)
				}
			}
		case RRequested:
			var ms int64
			ms, ok = v.DateTimeOK()
			req.Requested = time.UnixMilli(ms).UTC()
		case RCancelled:
			req.Cancelled, ok = v.BooleanOK()
		case RNote:
			req.Note, ok = v.StringValueOK()
		default:
			ok = true
		}
		if !ok {
			return req, corrupt("field %s has BSON type %v", key, v.Type)
		}
	}
	for _, f := range []string{RID, RRequested, RCancelled} {
		if !seen[f] {
			return req, corrupt("field %s is missing", f)
		}
	}
	if req.ID == "" {
		return req, corrupt("field %s is empty", RID)
	}
	return req, nil
}
