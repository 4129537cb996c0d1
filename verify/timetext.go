package verify

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FormatTime is a cluster time as verify prints it, in its reports and
// errors: RFC 3339 in UTC, then the increment when there is one, as
// `ferry position show` prints positions:
//
//	2026-12-01T15:09:31Z (#388)
//
// The increment orders the changes of one second: a window that starts at
// the oplog's start starts at its oldest entry, increment included.
func FormatTime(ts bson.Timestamp) string {
	s := time.Unix(int64(ts.T), 0).UTC().Format(time.RFC3339)
	if ts.I > 0 {
		s += fmt.Sprintf(" (#%d)", ts.I)
	}
	return s
}

// wall is the second of a cluster time as a time of day.
func wall(ts bson.Timestamp) time.Time { return time.Unix(int64(ts.T), 0).UTC() }

// after is the cluster time just after ts.
func after(ts bson.Timestamp) bson.Timestamp {
	if ts.I == ^uint32(0) {
		return bson.Timestamp{T: ts.T + 1}
	}
	return bson.Timestamp{T: ts.T, I: ts.I + 1}
}
