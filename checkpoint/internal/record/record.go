// Package record is the BSON layout of a stored checkpoint, shared by the
// MongoDB and bbolt stores so that both keep the same fields with the same
// types:
//
//	stream       string
//	partition    int64
//	version      int64
//	epoch        int64
//	token        binary subtype 0 holding the raw token bytes, or null
//	identity     string
//	definition   binary subtype 0 holding the raw definition bytes, or null
//	clusterTime  timestamp, or null when zero (MongoDB would replace a zero
//	             top-level timestamp with the current time on insert)
//	pendingSince timestamp of the oldest pending event, or null when none
//	snapshot     binary subtype 0 holding the raw snapshot progress
//	             document, or null; absent in records written before it
//	             existed (read as null)
//	state        string
//	note         string
//	updatedAt    date (milliseconds, set by the store)
//
// Token, Definition and Snapshot are binary rather than embedded documents so that no
// server or codec can reorder, re-encode or reject them (a definition holds
// $-prefixed pipeline keys): they come back byte for byte.
package record

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

// Field names.
const (
	FStream      = "stream"
	FPartition   = "partition"
	FVersion     = "version"
	FEpoch       = "epoch"
	FToken       = "token"
	FIdentity    = "identity"
	FDefinition  = "definition"
	FClusterTime = "clusterTime"
	FPending     = "pendingSince"
	FReadDelay   = "readDelayMs"
	FSnapshot    = "snapshot"
	FState       = "state"
	FNote        = "note"
	FUpdatedAt   = "updatedAt"
)

// Fields returns the stored fields of cp, with version set to version and
// without updatedAt (each store sets that from its own clock).
func Fields(cp checkpoint.Checkpoint, version int64) bson.D {
	return bson.D{
		{Key: FStream, Value: cp.Stream},
		{Key: FPartition, Value: int64(cp.Partition)},
		{Key: FVersion, Value: version},
		{Key: FEpoch, Value: cp.Epoch},
		{Key: FToken, Value: binaryOrNil(cp.Token)},
		{Key: FIdentity, Value: cp.Identity},
		{Key: FDefinition, Value: binaryOrNil(cp.Definition)},
		{Key: FClusterTime, Value: timestampOrNil(cp.ClusterTime)},
		{Key: FPending, Value: timestampOrNil(cp.Pending)},
		{Key: FReadDelay, Value: cp.ReadDelay.Milliseconds()},
		{Key: FSnapshot, Value: binaryOrNil(cp.Snapshot)},
		{Key: FState, Value: string(cp.State)},
		{Key: FNote, Value: cp.Note},
	}
}

// UpdatedAt converts t to the stored precision (milliseconds, UTC).
func UpdatedAt(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func binaryOrNil(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return bson.Binary{Subtype: 0, Data: b}
}

func timestampOrNil(ts bson.Timestamp) any {
	if ts.IsZero() {
		return nil
	}
	return ts
}

// Decode reads a stored record. The returned Token, Definition and Snapshot
// are copies: they do not alias raw. Unknown fields (an _id, fields of a
// newer version) are ignored; a missing snapshot (a record written before
// the field existed) is read as nil. A record that cannot be read is a *checkpoint.CorruptError
// with Problem set; the store fills in the rest (Located).
func Decode(raw bson.Raw) (checkpoint.Checkpoint, error) {
	var cp checkpoint.Checkpoint
	elems, err := raw.Elements()
	if err != nil {
		return cp, &checkpoint.CorruptError{Problem: fmt.Sprintf("not a BSON document: %v", err)}
	}
	seen := map[string]bool{}
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		seen[key] = true
		var ok bool
		switch key {
		case FStream:
			cp.Stream, ok = v.StringValueOK()
		case FPartition:
			var p int64
			p, ok = v.AsInt64OK()
			cp.Partition = int(p)
		case FVersion:
			cp.Version, ok = v.AsInt64OK()
		case FEpoch:
			cp.Epoch, ok = v.AsInt64OK()
		case FToken:
			cp.Token, ok = rawBinary(v)
			if ok && cp.Token != nil {
				if err := cp.Token.Validate(); err != nil {
					return cp, &checkpoint.CorruptError{Problem: fmt.Sprintf("field %s does not hold a BSON document (a resume token): %v", key, err)}
				}
			}
		case FDefinition:
			cp.Definition, ok = rawBinary(v)
		case FSnapshot:
			cp.Snapshot, ok = rawBinary(v)
			if ok && cp.Snapshot != nil {
				if err := cp.Snapshot.Validate(); err != nil {
					return cp, &checkpoint.CorruptError{Problem: fmt.Sprintf("field %s does not hold a BSON document (a snapshot's progress): %v", key, err)}
				}
			}
		case FIdentity:
			cp.Identity, ok = v.StringValueOK()
		case FClusterTime:
			if v.Type == bson.TypeNull {
				ok = true
				break
			}
			cp.ClusterTime.T, cp.ClusterTime.I, ok = v.TimestampOK()
		case FPending:
			if v.Type == bson.TypeNull {
				ok = true
				break
			}
			cp.Pending.T, cp.Pending.I, ok = v.TimestampOK()
		case FReadDelay:
			var ms int64
			ms, ok = v.AsInt64OK()
			cp.ReadDelay = time.Duration(ms) * time.Millisecond
		case FState:
			var s string
			s, ok = v.StringValueOK()
			cp.State = checkpoint.State(s)
		case FNote:
			cp.Note, ok = v.StringValueOK()
		case FUpdatedAt:
			var ms int64
			ms, ok = v.DateTimeOK()
			cp.UpdatedAt = time.UnixMilli(ms).UTC()
		default:
			ok = true
		}
		if !ok {
			return cp, &checkpoint.CorruptError{Problem: fmt.Sprintf("field %s has BSON type %v", key, v.Type)}
		}
	}
	// Every Save writes these: a record without them was edited by hand or
	// damaged, and its compare-and-set state (version, epoch) is unknown.
	for _, f := range []string{FStream, FPartition, FVersion, FEpoch, FToken} {
		if !seen[f] {
			return cp, &checkpoint.CorruptError{Problem: fmt.Sprintf("field %s is missing", f)}
		}
	}
	return cp, nil
}

// Located completes the *checkpoint.CorruptError of Decode with the key of
// the record and where its store keeps it; other errors are returned as
// they are.
func Located(err error, stream string, partition int, where string) error {
	var ce *checkpoint.CorruptError
	if errors.As(err, &ce) {
		ce.Stream, ce.Partition, ce.Record = stream, partition, where
	}
	return err
}

// Peek reads what it can of a record's compare-and-set state, however
// damaged the rest of it is: its version and epoch when they are integers
// (0 otherwise).
func Peek(raw bson.Raw) (version, epoch int64) {
	version, _ = raw.Lookup(FVersion).AsInt64OK()
	epoch, _ = raw.Lookup(FEpoch).AsInt64OK()
	return version, epoch
}

func rawBinary(v bson.RawValue) (bson.Raw, bool) {
	if v.Type == bson.TypeNull {
		return nil, true
	}
	_, data, ok := v.BinaryOK()
	if !ok {
		return nil, false
	}
	if len(data) == 0 {
		return nil, true
	}
	return bytes.Clone(data), true
}
