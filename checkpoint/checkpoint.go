package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ErrNotFound is returned (wrapped) when no checkpoint is stored for a
// (stream, partition).
var ErrNotFound = errors.New("checkpoint: not found")

// ErrFenced: a Save lost the compare-and-set (a newer version or a higher
// epoch is stored), or a Delete named a version that is not the stored one.
// Nothing was changed. The error is a *FenceError.
var ErrFenced = errors.New("checkpoint: fenced")

// ErrInvalid is wrapped by every error about a bad argument; the message
// names the field.
var ErrInvalid = errors.New("checkpoint: invalid argument")

// ErrCorrupt is returned (wrapped) by Load and List when a stored record
// cannot be decoded; the message names the field. A corrupt record is
// never resumed from: the operator repairs or resets it.
var ErrCorrupt = errors.New("checkpoint: corrupt checkpoint record")

// ErrClosed is returned (wrapped) by a Store's methods after Close.
var ErrClosed = errors.New("checkpoint: store closed")

// State says whether a partition may run.
type State string

const (
	StateRunning       State = ""               // normal
	StateNeedsBackfill State = "needs-backfill" // the resume token fell off the oplog; a backfill or reset is required
	StateInvalidated   State = "invalidated"    // the stream was invalidated (drop/rename); Token is the invalidate event's token
	StateStalled       State = "stalled"        // a poison event stopped the partition (on_poison: stall)
)

// Valid reports whether s is one of the States above.
func (s State) Valid() bool {
	switch s {
	case StateRunning, StateNeedsBackfill, StateInvalidated, StateStalled:
		return true
	}
	return false
}

// Checkpoint is the stored position of one partition of one stream.
type Checkpoint struct {
	Stream      string
	Partition   int
	Token       bson.Raw       // the resume token's raw BSON, stored and returned byte for byte, never parsed (nil: no position yet)
	Version     int64          // incremented by every successful Save; 0 means "never saved"
	Epoch       int64          // lease epoch of the writer (fencing token)
	Identity    string         // stream identity digest (hex sha256)
	Definition  bson.Raw       // canonical description of the stream definition the digest was computed from (optional; used to explain what changed)
	ClusterTime bson.Timestamp // clusterTime of the last applied event (display only)
	// Pending is the clusterTime of the oldest event read but not yet
	// applied or dead-lettered when the checkpoint was written (zero: none
	// was pending). Lag is now minus Pending, or 0 when it is zero.
	Pending bson.Timestamp
	// ReadDelay is how long the first event of the newest server batch
	// the partition read before this write had waited, from its write on
	// the source (its wallTime) to its arrival at the reader (0: not
	// measured). On a sharded cluster it includes the time mongos held the
	// event until every shard had reported progress past it: up to the
	// shards' periodicNoopIntervalSecs when one is idle. Display only.
	ReadDelay time.Duration
	// Snapshot is the progress record of the partition's snapshot in
	// progress, or of its last one (a document the ferry package defines;
	// nil: none). Stores keep it byte for byte and never parse it. It is
	// saved by Save under the same compare-and-set and epoch fencing as
	// the rest, so a finished chunk is recorded only by the lease's owner.
	Snapshot  bson.Raw
	State     State
	Note      string    // human-readable reason for State
	UpdatedAt time.Time // set by the store on Save (the store's own clock; for MongoDB the server's)
}

// Store keeps checkpoints durably. See the package documentation for the
// guarantees every implementation gives; checkpointtest.Run checks them.
type Store interface {
	// Load returns the stored checkpoint, or an error matching ErrNotFound.
	Load(ctx context.Context, stream string, partition int) (Checkpoint, error)
	// Save stores cp if and only if the stored checkpoint's Version equals
	// cp.Version (cp.Version 0: nothing stored yet) and the stored Epoch is
	// <= cp.Epoch. It returns the checkpoint as stored, with Version =
	// cp.Version+1 and UpdatedAt set. Otherwise it returns an error matching
	// ErrFenced (a *FenceError saying which of version/epoch lost, and the
	// stored values) and changes nothing.
	Save(ctx context.Context, cp Checkpoint) (Checkpoint, error)
	// List returns the checkpoints of one stream ordered by partition (empty,
	// no error, when there are none).
	List(ctx context.Context, stream string) ([]Checkpoint, error)
	// Delete removes one partition's checkpoint if its Version equals version
	// (explicit reset); ErrFenced otherwise, ErrNotFound when absent.
	Delete(ctx context.Context, stream string, partition int, version int64) error
	// Close releases the store's resources (not a MongoDB client it was
	// given). It is safe to call more than once.
	Close() error
}

// FenceError is the error a Store returns when a compare-and-set loses. It
// matches ErrFenced with errors.Is and never contains a token.
type FenceError struct {
	Op        string // "save" or "delete"
	Stream    string
	Partition int
	Version   int64 // the Version the caller expected to be stored
	Epoch     int64 // the caller's Epoch (save only)
	// StoredVersion and StoredEpoch describe what is stored: 0 and 0 when
	// nothing is; -1 and -1 when the store could not read them (a failed
	// write inside a MongoDB transaction aborts that transaction, so the
	// stored values cannot be read in it).
	StoredVersion int64
	StoredEpoch   int64
}

// EpochLost reports whether a higher epoch than the caller's is stored: the
// partition has a newer owner and the caller must stop writing for it.
func (e *FenceError) EpochLost() bool { return e.StoredEpoch > e.Epoch }

// Unwrap makes errors.Is(err, ErrFenced) true.
func (e *FenceError) Unwrap() error { return ErrFenced }

func (e *FenceError) Error() string {
	where := fmt.Sprintf("%s %q partition %d", e.Op, e.Stream, e.Partition)
	switch {
	case e.StoredVersion < 0:
		return fmt.Sprintf("%v: %s: a checkpoint is already stored (its version and epoch could not be read); expected version %d", ErrFenced, where, e.Version)
	case e.Op == "delete":
		if e.StoredVersion == 0 {
			return fmt.Sprintf("%v: %s: version lost: nothing is stored, expected version %d", ErrFenced, where, e.Version)
		}
		return fmt.Sprintf("%v: %s: version lost: stored version %d, expected %d", ErrFenced, where, e.StoredVersion, e.Version)
	case e.EpochLost():
		return fmt.Sprintf("%v: %s: epoch lost: stored epoch %d > writer epoch %d (stored version %d, expected %d)", ErrFenced, where, e.StoredEpoch, e.Epoch, e.StoredVersion, e.Version)
	case e.StoredVersion == 0:
		return fmt.Sprintf("%v: %s: version lost: nothing is stored, expected version %d", ErrFenced, where, e.Version)
	default:
		return fmt.Sprintf("%v: %s: version lost: stored version %d, expected %d (stored epoch %d, writer epoch %d)", ErrFenced, where, e.StoredVersion, e.Version, e.StoredEpoch, e.Epoch)
	}
}

// CheckSave decides the compare-and-set of Save for store implementations:
// it returns nil when cp may replace stored (stored.Version 0: nothing is
// stored), and a *FenceError otherwise.
func CheckSave(cp, stored Checkpoint) error {
	if stored.Version == cp.Version && stored.Epoch <= cp.Epoch {
		return nil
	}
	return &FenceError{
		Op: "save", Stream: cp.Stream, Partition: cp.Partition,
		Version: cp.Version, Epoch: cp.Epoch,
		StoredVersion: stored.Version, StoredEpoch: stored.Epoch,
	}
}
