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

func TestRequestRoundTrip(t *testing.T) {
	filter, _ := bson.Marshal(bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}})
	req := checkpoint.SnapshotRequest{Stream: "orders", ID: "r1", Filter: filter, Note: "ops: backfill"}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6789000, time.UTC)
	raw, err := bson.Marshal(append(RequestFields(req), bson.E{Key: RRequested, Value: bson.NewDateTimeFromTime(now)}, bson.E{Key: "future", Value: 1}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest("orders", raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stream != "orders" || got.ID != "r1" || !bytes.Equal(got.Filter, filter) || got.Note != req.Note ||
		got.Cancelled || !got.Requested.Equal(UpdatedAt(now)) {
		t.Fatalf("DecodeRequest = %+v, want %+v requested at %v", got, req, UpdatedAt(now))
	}
	clear(raw)
	if !bytes.Equal(got.Filter, filter) {
		t.Fatal("the decoded filter aliases the record")
	}
	raw, _ = bson.Marshal(append(RequestFields(checkpoint.SnapshotRequest{ID: "r2"}), bson.E{Key: RRequested, Value: bson.DateTime(1)}))
	if got, err := DecodeRequest("s", raw); err != nil || got.Filter != nil {
		t.Fatalf("DecodeRequest without a filter = %+v, %v; want Filter nil", got, err)
	}
}

func TestDecodeRequestCorrupt(t *testing.T) {
	full := append(RequestFields(checkpoint.SnapshotRequest{ID: "r"}), bson.E{Key: RRequested, Value: bson.DateTime(1)})
	without := func(field string) bson.D {
		var d bson.D
		for _, e := range full {
			if e.Key != field {
				d = append(d, e)
			}
		}
		return d
	}
	with := func(field string, v any) bson.D {
		d := without(field)
		return append(d, bson.E{Key: field, Value: v})
	}
	for name, d := range map[string]bson.D{
		"no id":               without(RID),
		"empty id":            with(RID, ""),
		"no requested":        without(RRequested),
		"no cancelled":        without(RCancelled),
		"id as int":           with(RID, int32(1)),
		"filter as document":  with(RFilter, bson.D{{Key: "a", Value: 1}}),
		"filter not BSON":     with(RFilter, bson.Binary{Data: []byte("nope")}),
		"requested as string": with(RRequested, "now"),
		"cancelled as int":    with(RCancelled, int32(1)),
		"note as bool":        with(RNote, true),
	} {
		raw, _ := bson.Marshal(d)
		_, err := DecodeRequest("orders", raw)
		var ce *checkpoint.CorruptError
		if !errors.Is(err, checkpoint.ErrCorrupt) || !errors.As(err, &ce) || ce.Problem == "" || ce.Stream != "orders" {
			t.Errorf("%s: err = %v, want a *checkpoint.CorruptError saying what is wrong", name, err)
		}
	}
	if _, err := DecodeRequest("s", bson.Raw{1, 2, 3}); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("DecodeRequest of garbage: %v", err)
	}
}

func TestNewRequestID(t *testing.T) {
	a, b := NewRequestID(), NewRequestID()
	if len(a) != 24 || strings.Trim(a, "0123456789abcdef") != "" || a == b {
		t.Fatalf("NewRequestID = %q, %q; want two different 24-hex-digit IDs", a, b)
	}
}
