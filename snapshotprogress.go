package ferry

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

// Why a snapshot runs (SnapshotProgress.Reason).
const (
	SnapshotForStart       = "start"        // StartWithBackfill: the first load of a new stream's sink
	SnapshotForHistoryLost = "history-lost" // OnHistoryLost(HistoryLostBackfill): the stream's history was lost
	SnapshotForRequest     = "request"      // an operator's request (ferry snapshot)
)

// How a snapshot reads a collection (SnapshotProgress.Mode).
const (
	// SnapshotByHashedIndex reads the partition's range of an {_id:
	// "hashed"} index in chunks (find with hint, min and max): the server
	// examines and returns only the partition's documents.
	SnapshotByHashedIndex = "hashed-index"
	// SnapshotByID reads in _id order through the _id index in chunks, the
	// server evaluating the partition filter: it returns only the
	// partition's documents but examines every document once per
	// partition.
	SnapshotByID = "id-order"
)

// SnapshotProgress is a partition's snapshot: in progress, or the last one
// (Status.Snapshot, SnapshotOf).
type SnapshotProgress struct {
	ID     string
	Reason string // SnapshotForStart, SnapshotForHistoryLost or SnapshotForRequest
	// Request is the operator request's ID (Reason SnapshotForRequest).
	Request string
	// Filter is the request's filter as relaxed extended JSON ("" for all).
	Filter string
	// Namespace is the collection being read; Mode how (SnapshotByID or
	// SnapshotByHashedIndex).
	Namespace string
	Mode      string
	// Done counts the documents delivered (their chunks finished), Chunks
	// the chunks finished, Total the estimated documents of the partition
	// (0: unknown).
	Done, Chunks, Total int64
	// Rate is the documents per second since this member took the
	// snapshot up (0 until a chunk finished here). Read from a checkpoint
	// (SnapshotOf), and once the snapshot finished, it is the rate of the
	// member that finished its last chunk, as of that chunk.
	Rate      float64
	Started   time.Time // when the snapshot began
	Finished  time.Time // zero while it runs
	Cancelled bool
	// Failures counts the failed tries of the chunk the snapshot is at
	// (0 once a chunk finished); Error is the last one's error, redacted.
	// A failing chunk is retried with backoff for as long as it fails:
	// these say so to ferry status, ferry snapshot -wait and /status.
	Failures int
	Error    string
}

// Running reports whether the snapshot is still in progress.
func (p SnapshotProgress) Running() bool { return p.ID != "" && p.Finished.IsZero() }

// Percent is Done out of Total (0 when Total is unknown), at most 100,
// and below 100 while the snapshot runs.
func (p SnapshotProgress) Percent() float64 {
	if !p.Finished.IsZero() && !p.Cancelled {
		return 100
	}
	if p.Total <= 0 {
		return 0
	}
	pc := 100 * float64(p.Done) / float64(p.Total)
	return min(pc, 99.9)
}

// ETA is the estimated time left at Rate (0 when unknown or finished).
func (p SnapshotProgress) ETA() time.Duration {
	if !p.Running() || p.Rate <= 0 || p.Total <= p.Done {
		return 0
	}
	return time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second))
}

// SnapshotOf reads the snapshot progress a checkpoint records (false: none).
func SnapshotOf(cp checkpoint.Checkpoint) (SnapshotProgress, bool, error) {
	if len(cp.Snapshot) == 0 {
		return SnapshotProgress{}, false, nil
	}
	rec, err := decodeSnapshot(cp.Snapshot)
	if err != nil {
		return SnapshotProgress{}, false, err
	}
	return rec.progress(), true, nil
}

// snapshotRecord is a partition's snapshot as its checkpoint records it
// (checkpoint.Checkpoint.Snapshot): saved with the checkpoint's
// compare-and-set under the lease epoch after every finished chunk, so a
// new owner goes on at the first chunk not finished.
type snapshotRecord struct {
	ID      string   `bson:"id"`
	Reason  string   `bson:"reason"`
	Request string   `bson:"request,omitempty"`
	Filter  bson.Raw `bson:"filter,omitempty"`
	// Sweep: after the last chunk, call the consumer's Sweeper with Since.
	Sweep bool `bson:"sweep,omitempty"`
	// Since is the server's time when the snapshot began (the sweeper's
	// bound); Started the same by this process's clock, for display.
	Since   time.Time `bson:"since"`
	Started time.Time `bson:"started"`
	// NS is the namespace being read: those before it (in sorted order)
	// are done. Empty before the first chunk.
	NS   string `bson:"ns,omitempty"`
	Mode string `bson:"mode,omitempty"`
	// From is the hashed mode's next chunk start (inclusive); After the
	// id mode's last _id read, as {v: <_id>} (absent before the first).
	From   int64    `bson:"from,omitempty"`
	After  bson.Raw `bson:"after,omitempty"`
	Done   int64    `bson:"done"`
	Chunks int64    `bson:"chunks"`
	Total  int64    `bson:"total"`
	// Rate is the documents per second of the member that finished the
	// last chunk, since it took the snapshot up: what a reader of the
	// store (ferry status, /status) shows for a partition it does not run.
	Rate float64 `bson:"rate,omitempty"`
	// Finished is set when the last chunk (and the sweep) finished, or
	// when it was cancelled.
	Finished  time.Time `bson:"finished,omitempty"`
	Cancelled bool      `bson:"cancelled,omitempty"`
	// Retries counts the restarts of a history-lost snapshot without a
	// chunk finished (the stream's own history lost meanwhile).
	Retries int `bson:"retries,omitempty"`
	// Failures and Error: the current chunk's failed tries and the last
	// error (SnapshotProgress.Failures), cleared when a chunk finishes.
	Failures int    `bson:"failures,omitempty"`
	Error    string `bson:"error,omitempty"`
}

func (s *snapshotRecord) running() bool { return s != nil && s.ID != "" && s.Finished.IsZero() }

func (s *snapshotRecord) encode() (bson.Raw, error) {
	return bson.Marshal(s)
}

func decodeSnapshot(raw bson.Raw) (*snapshotRecord, error) {
	var s snapshotRecord
	if err := bson.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("ferry: the checkpoint's snapshot record: %w", err)
	}
	return &s, nil
}

// after returns the id mode's last _id read.
func (s *snapshotRecord) after() (bson.RawValue, bool) {
	if len(s.After) == 0 {
		return bson.RawValue{}, false
	}
	v, err := s.After.LookupErr("v")
	return v, err == nil
}

func (s *snapshotRecord) setAfter(v bson.RawValue) {
	doc := bson.Raw(bsoncoreDoc("v", v))
	s.After = doc
}

func (s *snapshotRecord) progress() SnapshotProgress {
	p := SnapshotProgress{ID: s.ID, Reason: s.Reason, Request: s.Request, Namespace: s.NS, Mode: s.Mode,
		Done: s.Done, Chunks: s.Chunks, Total: s.Total, Rate: s.Rate, Started: s.Started, Finished: s.Finished, Cancelled: s.Cancelled,
		Failures: s.Failures, Error: s.Error}
	if len(s.Filter) > 0 {
		p.Filter = s.Filter.String()
	}
	return p
}

// bsoncoreDoc is the document {key: v}.
func bsoncoreDoc(key string, v bson.RawValue) []byte {
	n := 4 + 1 + len(key) + 1 + len(v.Value) + 1
	b := make([]byte, 0, n)
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	b = append(b, byte(v.Type))
	b = append(b, key...)
	b = append(b, 0)
	b = append(b, v.Value...)
	return append(b, 0)
}
