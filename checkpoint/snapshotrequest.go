package checkpoint

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// SnapshotRequest is an operator's request for a snapshot of a stream
// (ferry snapshot).
type SnapshotRequest struct {
	Stream string
	// ID is unique per request. RequestSnapshot assigns one when it is
	// empty: time-ordered (an ObjectID's 24 hex digits).
	ID string
	// Filter is a query filter on the source documents (nil: every
	// document). Stores keep it byte for byte and never parse it.
	Filter    bson.Raw
	Requested time.Time // set by the store (the MongoDB server's clock for mongostore); milliseconds, UTC
	Cancelled bool      // set by CancelSnapshot
	Note      string    // who/why, free text, optional
}

// SnapshotRequests stores at most one current request per stream. It is
// implemented by the stores that ship with Ferry (mongostore, boltstore)
// beside Store; checkpointtest.RunSnapshotRequests checks the contract.
//
// Reads are one point lookup by stream: each partition's owner polls
// SnapshotRequest every few seconds.
type SnapshotRequests interface {
	// RequestSnapshot records req as the stream's current request,
	// replacing any earlier one, and returns it as stored: ID assigned
	// when empty, Requested set by the store, Cancelled false. req.Requested
	// is ignored; req.Cancelled must be false.
	RequestSnapshot(ctx context.Context, req SnapshotRequest) (SnapshotRequest, error)
	// SnapshotRequest returns the stream's current request, or an error
	// matching ErrNotFound.
	SnapshotRequest(ctx context.Context, stream string) (SnapshotRequest, error)
	// CancelSnapshot marks the request id of the stream cancelled (again
	// is no error); an error matching ErrNotFound when the stream's current
	// request is not id.
	CancelSnapshot(ctx context.Context, stream, id string) error
}

// maxRequestID bounds SnapshotRequest.ID.
const maxRequestID = 128

// Validate checks what RequestSnapshot needs from r: a valid Stream
// (ValidateStream), an ID of at most 128 bytes of valid UTF-8 without NUL
// (or empty), Filter empty or a valid BSON document, Note valid UTF-8, and
// Cancelled false (a request is cancelled by CancelSnapshot). Requested is
// ignored (the store sets it).
func (r SnapshotRequest) Validate() error {
	if err := ValidateStream(r.Stream); err != nil {
		return err
	}
	if r.ID != "" {
		if err := validateRequestID(r.ID); err != nil {
			return err
		}
	}
	if len(r.Filter) > 0 {
		if err := validDocument(r.Filter, 0); err != nil {
			return invalid("Filter", "not a valid BSON document: %v", err)
		}
	}
	if !utf8.ValidString(r.Note) {
		return invalid("Note", "not valid UTF-8")
	}
	if r.Cancelled {
		return invalid("Cancelled", "a new request cannot be cancelled; record it, then call CancelSnapshot")
	}
	return nil
}

// ValidateCancel checks the arguments of CancelSnapshot: a valid stream
// and a non-empty request ID.
func ValidateCancel(stream, id string) error {
	if err := ValidateStream(stream); err != nil {
		return err
	}
	if id == "" {
		return invalid("ID", "empty: name the request to cancel")
	}
	return validateRequestID(id)
}

func validateRequestID(id string) error {
	switch {
	case len(id) > maxRequestID:
		return invalid("ID", "%d bytes, at most %d", len(id), maxRequestID)
	case !utf8.ValidString(id):
		return invalid("ID", "not valid UTF-8")
	case strings.IndexByte(id, 0) >= 0:
		return invalid("ID", "contains a NUL byte")
	}
	return nil
}
