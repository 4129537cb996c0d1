package boltstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/internal/record"
)

// RequestName is where a stream's snapshot request is kept, as messages
// name it: the file, the bucket and the key.
func (s *Store) RequestName(stream string) string {
	return fmt.Sprintf("%s bucket %s key %q", s.db.Path(), requestsBucket, stream)
}

// decodeRequest reads the stored request of stream; a corrupt one is a
// *checkpoint.CorruptError naming the file and key.
func (s *Store) decodeRequest(stream string, v []byte) (checkpoint.SnapshotRequest, error) {
	// record.DecodeRequest copies what it keeps out of bbolt's memory map.
	req, err := record.DecodeRequest(stream, bson.Raw(v))
	var ce *checkpoint.CorruptError
	if errors.As(err, &ce) {
		ce.Record = s.RequestName(stream)
	}
	return req, err
}

// putRequest stores req, requested at its Requested, and returns it as a
// later read will.
func (s *Store) putRequest(b *bbolt.Bucket, req checkpoint.SnapshotRequest) (checkpoint.SnapshotRequest, error) {
	doc := append(record.RequestFields(req), bson.E{Key: record.RRequested, Value: bson.NewDateTimeFromTime(req.Requested)})
	v, err := bson.Marshal(doc)
	if err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if err := b.Put([]byte(req.Stream), v); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	return s.decodeRequest(req.Stream, v)
}

// RequestSnapshot implements checkpoint.SnapshotRequests: one read-write
// transaction; Requested comes from the Clock option.
func (s *Store) RequestSnapshot(ctx context.Context, req checkpoint.SnapshotRequest) (_ checkpoint.SnapshotRequest, err error) {
	defer s.guard(&err)
	if err := req.Validate(); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if err := s.begin(ctx); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if req.ID == "" {
		req.ID = record.NewRequestID()
	}
	req.Requested = s.cfg.now()
	var stored checkpoint.SnapshotRequest
	err = s.db.Update(func(tx *bbolt.Tx) error {
		var err error
		stored, err = s.putRequest(tx.Bucket(requestsBucket), req)
		return err
	})
	if err != nil {
		return checkpoint.SnapshotRequest{}, wrap("request snapshot", err)
	}
	return stored, nil
}

// SnapshotRequest implements checkpoint.SnapshotRequests: one read-only
// transaction.
func (s *Store) SnapshotRequest(ctx context.Context, stream string) (_ checkpoint.SnapshotRequest, err error) {
	defer s.guard(&err)
	if err := checkpoint.ValidateStream(stream); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	if err := s.begin(ctx); err != nil {
		return checkpoint.SnapshotRequest{}, err
	}
	var req checkpoint.SnapshotRequest
	err = s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(requestsBucket).Get([]byte(stream))
		if v == nil {
			return fmt.Errorf("%w: no snapshot request for stream %q", checkpoint.ErrNotFound, stream)
		}
		var err error
		req, err = s.decodeRequest(stream, v)
		return err
	})
	if err != nil {
		return checkpoint.SnapshotRequest{}, wrap("snapshot request", err)
	}
	return req, nil
}

// CancelSnapshot implements checkpoint.SnapshotRequests: one read-write
// transaction.
func (s *Store) CancelSnapshot(ctx context.Context, stream, id string) (err error) {
	defer s.guard(&err)
	if err := checkpoint.ValidateCancel(stream, id); err != nil {
		return err
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(requestsBucket)
		notCurrent := fmt.Errorf("%w: snapshot request %q is not the current request of stream %q", checkpoint.ErrNotFound, id, stream)
		v := b.Get([]byte(stream))
		if v == nil {
			return notCurrent
		}
		req, err := s.decodeRequest(stream, v)
		if err != nil {
			return err
		}
		if req.ID != id {
			return notCurrent
		}
		if req.Cancelled {
			return nil
		}
		req.Cancelled = true
		_, err = s.putRequest(b, req)
		return err
	})
	if err != nil {
		return wrap(fmt.Sprintf("cancel snapshot %q of %q", id, stream), err)
	}
	return nil
}
