// Package boltstore is a checkpoint.Store in one local file, written with
// bbolt (go.etcd.io/bbolt). It serves single-instance runs where the source
// MongoDB user may not write, and tests.
//
// Layout: bucket "checkpoints"; key = stream + 0x00 + the partition as an
// 8-byte big-endian integer (so a stream's keys are contiguous and sorted by
// partition; stream names cannot contain NUL); value = the BSON record
// described in checkpoint/internal/record (the same fields as mongostore;
// a record written before the snapshot field existed loads with Snapshot
// nil). Snapshot requests (checkpoint.SnapshotRequests) are in bucket
// "snapshots", key = the stream, value = a BSON record with mongostore's
// fields (id, filter, requested, cancelled, note); Open adds the bucket to
// a file that predates it. Each request call is one bbolt transaction,
// Requested comes from the Clock option, and SnapshotRequest is one
// read-only lookup.
//
// Guarantees, beyond those of every checkpoint.Store: each Save and Delete
// is one bbolt read-write transaction, so its compare-and-set is atomic and,
// when it returns nil, synced to disk (bbolt fsyncs every commit). The file
// is locked while open: a second Open of the same file, from this process or
// another, waits at most LockTimeout and then fails with ErrLocked instead of
// hanging. UpdatedAt comes from the Clock option (time.Now by default).
//
// Context cancellation is checked before each operation; a bbolt transaction
// in progress is not interrupted (they take microseconds to milliseconds).
//
// Open takes Options (LockTimeout, Clock, FileMode) in the style of package
// ferry: they only record values, Open validates once, before it touches
// the file, and its error matches checkpoint.ErrInvalid and lists every
// problem, each naming its option.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/bbolt"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/internal/record"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// ErrLocked is wrapped by Open's error when the file stayed locked by
// another process (or another open Store) for the whole LockTimeout.
var ErrLocked = errors.New("boltstore: file is in use by another process")

var (
	bucket         = []byte("checkpoints")
	requestsBucket = []byte("snapshots")
)

// Store is a checkpoint.Store in a bbolt file. It is safe for concurrent use.
type Store struct {
	db     *bbolt.DB
	cfg    config
	closed atomic.Bool
}

var (
	_ checkpoint.Store            = (*Store)(nil)
	_ checkpoint.SnapshotRequests = (*Store)(nil)
)

// Open opens (creating it if needed) the store file at path.
//
// A damaged file (bbolt panics on some corruptions: an invalid freelist
// page, a page of unknown type) is reported as an error matching
// ErrCorrupt that names the file and the way out; it never crashes the
// process.
func Open(path string, opts ...Option) (s *Store, err error) {
	cfg := defaults()
	var p optcheck.Problems
	if path == "" {
		p.Add("path", "empty path: name the store's file, such as ferry.db")
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(checkpoint.ErrInvalid); err != nil {
		return nil, err
	}
	var db *bbolt.DB
	defer func() {
		if p := recover(); p != nil {
			if db != nil {
				func() { defer func() { _ = recover() }(); _ = db.Close() }()
			}
			s, err = nil, corrupt(path, p)
		}
	}()
	db, err = bbolt.Open(path, cfg.mode, &bbolt.Options{Timeout: cfg.lockTimeout})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: open %s: its lock was not released within %v (%v)", ErrLocked, path, cfg.lockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucket, requestsBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return &Store{db: db, cfg: cfg}, nil
}

// ErrCorrupt: the state file is damaged (bbolt could not read its pages).
var ErrCorrupt = errors.New("boltstore: the state file is damaged")

// corrupt is the error of a bbolt panic on path.
func corrupt(path string, p any) error {
	return fmt.Errorf("%w: %s: %v. Nothing was read from it; restore it from a backup, "+
		"or move it away so that every stream starts again from its start_at position", ErrCorrupt, path, p)
}

// guard turns a bbolt panic during a transaction on a damaged file into
// an error.
func (s *Store) guard(err *error) {
	if p := recover(); p != nil {
		*err = corrupt(s.db.Path(), p)
	}
}

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

// Close closes the file (and releases its lock). Later calls return nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstore: close: %w", err)
	}
	return nil
}

func key(stream string, partition int) []byte {
	k := make([]byte, len(stream)+1+8)
	copy(k, stream)
	binary.BigEndian.PutUint64(k[len(stream)+1:], uint64(partition))
	return k
}

// begin checks what every operation checks first.
func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return checkpoint.ErrClosed
	}
	return ctx.Err()
}

// wrap turns bbolt's "closed" error (a Close racing an operation) into
// ErrClosed and names the operation.
func wrap(op string, err error) error {
	if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("boltstore: %s: %w", op, checkpoint.ErrClosed)
	}
	return fmt.Errorf("boltstore: %s: %w", op, err)
}

// decode reads the record of (stream, partition); a corrupt one is a
// *checkpoint.CorruptError naming the file and key.
func (s *Store) decode(v []byte, stream string, partition int) (checkpoint.Checkpoint, error) {
	// bbolt's values live in its memory map only until the transaction ends;
	// record.Decode copies what it keeps.
	cp, err := record.Decode(bson.Raw(v))
	return cp, record.Located(err, stream, partition, s.RecordName(stream, partition))
}

// RecordName is where a partition's checkpoint is kept, as messages name
// it: the file, the bucket and the key's stream and partition. It
// implements checkpoint.Locator.
func (s *Store) RecordName(stream string, partition int) string {
	return fmt.Sprintf("%s bucket %s key (%q, %d)", s.db.Path(), bucket, stream, partition)
}

// Load implements checkpoint.Store.
func (s *Store) Load(ctx context.Context, stream string, partition int) (_ checkpoint.Checkpoint, err error) {
	defer s.guard(&err)
	if err := checkpoint.ValidateKey(stream, partition); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.begin(ctx); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	var cp checkpoint.Checkpoint
	err = s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucket).Get(key(stream, partition))
		if v == nil {
			return fmt.Errorf("%w: stream %q partition %d", checkpoint.ErrNotFound, stream, partition)
		}
		var err error
		cp, err = s.decode(v, stream, partition)
		return err
	})
	if err != nil {
		return checkpoint.Checkpoint{}, wrap("load", err)
	}
	return cp, nil
}

// Save implements checkpoint.Store.
func (s *Store) Save(ctx context.Context, cp checkpoint.Checkpoint) (_ checkpoint.Checkpoint, err error) {
	defer s.guard(&err)
	if err := cp.Validate(); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.begin(ctx); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	var saved checkpoint.Checkpoint
	err = s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		k := key(cp.Stream, cp.Partition)
		var stored checkpoint.Checkpoint
		if v := b.Get(k); v != nil {
			var err error
			if stored, err = s.decode(v, cp.Stream, cp.Partition); err != nil {
				return err
			}
		}
		if err := checkpoint.CheckSave(cp, stored); err != nil {
			return err
		}
		doc := append(record.Fields(cp, cp.Version+1), bson.E{Key: record.FUpdatedAt, Value: bson.NewDateTimeFromTime(s.cfg.now())})
		v, err := bson.Marshal(doc)
		if err != nil {
			return err
		}
		if err := b.Put(k, v); err != nil {
			return err
		}
		// Return exactly what a Load will return.
		saved, err = s.decode(v, cp.Stream, cp.Partition)
		return err
	})
	if err != nil {
		return checkpoint.Checkpoint{}, wrap("save", err)
	}
	return saved, nil
}

// List implements checkpoint.Store.
func (s *Store) List(ctx context.Context, stream string) (_ []checkpoint.Checkpoint, err error) {
	defer s.guard(&err)
	if err := checkpoint.ValidateStream(stream); err != nil {
		return nil, err
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	prefix := append([]byte(stream), 0)
	out := []checkpoint.Checkpoint{}
	err = s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(k) != len(prefix)+8 {
				continue
			}
			cp, err := s.decode(v, stream, int(binary.BigEndian.Uint64(k[len(prefix):])))
			if err != nil {
				return err
			}
			out = append(out, cp)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list", err)
	}
	return out, nil
}

// Delete implements checkpoint.Store.
func (s *Store) Delete(ctx context.Context, stream string, partition int, version int64) (err error) {
	defer s.guard(&err)
	if err := checkpoint.ValidateKey(stream, partition); err != nil {
		return err
	}
	if version < 0 {
		return fmt.Errorf("%w: Version: %d is negative", checkpoint.ErrInvalid, version)
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		k := key(stream, partition)
		v := b.Get(k)
		if v == nil {
			return fmt.Errorf("%w: stream %q partition %d", checkpoint.ErrNotFound, stream, partition)
		}
		stored, err := s.decode(v, stream, partition)
		if err != nil {
			return err
		}
		if stored.Version != version {
			return &checkpoint.FenceError{
				Op: "delete", Stream: stream, Partition: partition, Version: version,
				StoredVersion: stored.Version, StoredEpoch: stored.Epoch,
			}
		}
		return b.Delete(k)
	})
	if err != nil {
		return wrap("delete", err)
	}
	return nil
}
