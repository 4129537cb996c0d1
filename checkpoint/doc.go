// Package checkpoint defines where Ferry remembers how far each partition of a
// stream has got, and the rules every store of that position must follow.
//
// A [Checkpoint] holds, for one (stream, partition), the resume token of the
// last event that is applied or dead-lettered, plus what is needed to decide
// whether the writer may still write it: a Version for compare-and-set and the
// lease Epoch of the writer. A [Store] keeps checkpoints durably. Two stores
// ship with Ferry: mongostore (a MongoDB collection, usable inside the
// consumer's transactions) and boltstore (one local bbolt file, for single
// instance runs where the source user may not write). Both pass the same
// contract suite, checkpointtest.
//
// # Guarantees of every Store
//
// Compare-and-set. Save(cp) stores cp only if the stored checkpoint's Version
// equals cp.Version (0 when nothing is stored) and the stored Epoch is at most
// cp.Epoch. The check and the write are one atomic step: of several Saves from
// the same Version, exactly one succeeds. The others, and every Save that
// loses the check, return an error matching [ErrFenced] (a *[FenceError] that
// says what is stored) and change nothing. A successful Save returns the
// checkpoint as stored: Version is cp.Version+1 and UpdatedAt is set by the
// store. Feed that returned value to the next Save.
//
// Version. 0 means "never saved". Every successful Save adds one, and a Save
// from any other Version than the stored one is fenced, so a writer notices
// every write it did not make since its last Load or Save. After a Delete
// (an explicit reset) versions start again at 1.
//
// Epoch (fencing). The lease epoch grows each time a partition changes owner.
// A Save carries the writer's epoch; a store holding a higher epoch rejects it,
// so a zombie (an instance that was paused past its lease and resumes) cannot
// move a checkpoint its successor has written, even if it guesses the right
// Version. A new owner passes a higher epoch with the Version it loaded; from
// then on the old owner's Saves are fenced ([FenceError.EpochLost] reports it).
//
// Byte-exact tokens. Token is the resume token's raw BSON (the change event's
// _id), stored whole and returned byte for byte: stores never parse, reorder,
// re-encode or normalise it, so a token with _typeBits or an unusual field
// order resumes exactly where it was taken. The same holds for Definition
// and Snapshot. A nil or empty Token means "no position yet" and is returned
// as nil; a nil or empty Definition or Snapshot is returned as nil too. What
// Save, Load and List return are copies: the caller may change them, and
// its own buffers after Save, without changing what is stored.
//
// Snapshot progress. Checkpoint.Snapshot is the progress record of the
// partition's snapshot in progress, or of its last one: a document the
// ferry package defines, which stores keep byte for byte and never parse.
// It is written by Save with the rest of the checkpoint, so recording a
// finished chunk is subject to the same compare-and-set and epoch fencing:
// a zombie cannot record a chunk, and a new owner resumes from the progress
// it loaded. Records written before the field existed load with Snapshot
// nil.
//
// Durability. A Save that returned nil is durable in the store's sense
// (written to the file and synced for boltstore; acknowledged with the
// client's write concern, or with the enclosing transaction's commit, for
// mongostore).
//
// Corrupt records. A stored record that cannot be decoded (a field of the
// wrong type or missing, edited by hand or damaged) is a *[CorruptError]
// (matching [ErrCorrupt]) naming the record where its store keeps it (for
// mongostore the collection and _id) and what is wrong, never its values.
// It is never resumed from; mongostore's Records, Overwrite and Remove
// let tools list, replace and delete such a record without decoding it.
//
// Inputs are validated ([Checkpoint.Validate], [ValidateKey]); a bad input
// returns an error matching [ErrInvalid] that names the field, and nothing is
// written. A cancelled context returns its error. After Close every method
// returns an error matching [ErrClosed]. Stores never log tokens.
//
// # Snapshot requests
//
// An operator asks for a snapshot of a stream (ferry snapshot) through
// [SnapshotRequests], which both shipped stores implement beside [Store]
// (checkpointtest.RunSnapshotRequests checks it). A stream has at most one
// current [SnapshotRequest]: RequestSnapshot replaces any earlier one,
// assigns an ID when the caller gave none (time-ordered: an ObjectID's hex
// digits) and sets Requested from the store's clock; CancelSnapshot marks
// the current request cancelled, and is ErrNotFound for any other ID, so an
// operator cannot cancel a request that was replaced meanwhile. Filter is
// kept byte for byte like a token. SnapshotRequest is one point read,
// cheap enough for every partition's owner to poll it every few seconds.
// Bad inputs ([SnapshotRequest.Validate], [ValidateCancel]) match
// [ErrInvalid] and name the field; a damaged stored request is a
// *[CorruptError] naming where it is kept, and a new request replaces it.
//
// UpdatedAt has millisecond precision (a BSON date), is in UTC, and is for
// display only: it comes from the store's clock (the MongoDB server's, for
// mongostore), never from the writer's.
package checkpoint
