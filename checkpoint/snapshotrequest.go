package checkpoint

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// SnapshotRequest is an operator's request for a snapshot of a stream (ferry snapshot).
type SnapshotRequest struct {
	Stream    string
	ID        string
	Filter    bson.Raw
	Requested time.Time
	Cancelled bool
	Note      string
}

// SnapshotRequests stores at most one current request per stream.
type SnapshotRequests interface {
	RequestSnapshot(ctx context.Context, req SnapshotRequest) (SnapshotRequest, error)
	SnapshotRequest(ctx context.Context, stream string) (SnapshotRequest, error)
	CancelSnapshot(ctx context.Context, stream, id string) error
}
