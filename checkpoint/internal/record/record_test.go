package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

func TestRoundTrip(t *testing.T) {
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "82"}})
	snap, _ := bson.Marshal(bson.D{{Key: "chunk", Value: int32(4)}, {Key: "after", Value: bson.D{{Key: "_id", Value: 9}}}})
	cp := checkpoint.Checkpoint{
		Stream: "s", Partition: 3, Token: tok, Epoch: 4, Identity: "id",
		ClusterTime: bson.Timestamp{T: 5, I: 6}, Snapshot: snap, State: checkpoint.StateStalled, Note: "n",
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6789000, time.UTC)
	raw, err := bson.Marshal(append(Fields(cp, 9), bson.E{Key: FUpdatedAt, Value: bson.NewDateTimeFromTime(now)}, bson.E{Key: "future", Value: 1}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := cp
	want.Version = 9
	want.UpdatedAt = UpdatedAt(now)
	if got.Stream != want.Stream || got.Partition != want.Partition || string(got.Token) != string(want.Token) ||
		got.Version != 9 || got.Epoch != 4 || got.Identity != "id" || got.ClusterTime != want.ClusterTime ||
		got.State != want.State || got.Note != "n" || !got.UpdatedAt.Equal(want.UpdatedAt) || got.Definition != nil ||
		!bytes.Equal(got.Snapshot, snap) {
		t.Fatalf("Decode = %+v, want %+v", got, want)
	}
	// The snapshot is a copy: it does not alias the record.
	clear(raw)
	if !bytes.Equal(got.Snapshot, snap) {
		t.Fatal("the decoded snapshot aliases the record")
	}
}

// TestDecodeRecordWithoutSnapshot: a record written before the snapshot
// field existed (its fields, as Save wrote them then) decodes with
// Snapshot nil.
func TestDecodeRecordWithoutSnapshot(t *testing.T) {
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "82"}})
	old := bson.D{
		{Key: "_id", Value: "s/0"}, {Key: FStream, Value: "s"}, {Key: FPartition, Value: int64(0)},
		{Key: FVersion, Value: int64(3)}, {Key: FEpoch, Value: int64(2)}, {Key: FToken, Value: bson.Binary{Data: tok}},
		{Key: FIdentity, Value: "id"}, {Key: FDefinition, Value: nil}, {Key: FClusterTime, Value: bson.Timestamp{T: 1, I: 1}},
		{Key: FPending, Value: nil}, {Key: FState, Value: ""}, {Key: FNote, Value: ""},
		{Key: FUpdatedAt, Value: bson.DateTime(1700000000000)},
	}
	raw, _ := bson.Marshal(old)
	got, err := Decode(raw)
	if err != nil || got.Snapshot != nil || got.Version != 3 || !bytes.Equal(got.Token, tok) {
		t.Fatalf("Decode of a record without snapshot = %+v, %v; want Snapshot nil and the rest read", got, err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	full := Fields(checkpoint.Checkpoint{Stream: "s", Partition: 1}, 3)
	without := func(field string) bson.D {
		var d bson.D
		for _, e := range full {
			if e.Key != field {
				d = append(d, e)
			}
		}
		return d
	}
	for name, d := range map[string]bson.D{
		// Fields deleted by hand (the fault campaign deleted token, version
		// and epoch: the consumer then met "fenced" in a loop).
		"no version":         without(FVersion),
		"no epoch":           without(FEpoch),
		"no token":           without(FToken),
		"token as string":    {{Key: FToken, Value: "x"}},
		"version as string":  {{Key: FVersion, Value: "1"}},
		"clusterTime as int": {{Key: FClusterTime, Value: int32(1)}},
		"updatedAt as int":   {{Key: FUpdatedAt, Value: int64(1)}},
		// A token whose bytes are not a BSON document: the driver could not
		// send it, and resuming from it must not be tried again and again.
		"token not BSON":      {{Key: FToken, Value: bson.Binary{Data: []byte("not a BSON document at all")}}},
		"pendingSince as int": {{Key: FPending, Value: int32(1)}},
		"snapshot as string":  {{Key: FSnapshot, Value: "x"}},
		"snapshot not BSON":   {{Key: FSnapshot, Value: bson.Binary{Data: []byte("not a document")}}},
	} {
		raw, _ := bson.Marshal(d)
		_, err := Decode(raw)
		var ce *checkpoint.CorruptError
		if err == nil || !strings.Contains(err.Error(), "corrupt") || !errors.Is(err, checkpoint.ErrCorrupt) ||
			!errors.As(err, &ce) || ce.Problem == "" {
			t.Errorf("%s: err = %v, want a *checkpoint.CorruptError saying what is wrong", name, err)
		}
		if err := Located(err, "s", 1, `db.checkpoints _id "s/1"`); !strings.Contains(err.Error(), `db.checkpoints _id "s/1": `+ce.Problem) {
			t.Errorf("%s: located: %v, want the record named", name, err)
		}
	}
	if _, err := Decode(bson.Raw{1, 2, 3}); err == nil {
		t.Error("Decode of garbage succeeded")
	}
}
