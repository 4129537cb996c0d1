package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
)

// TestBatchRecordsKeepTheirBytes writes one batch whose Extended JSON is
// many times its BSON (control characters escape to six bytes each), so
// the buffer the batch's records share outgrows its first backing array
// several times over, and checks every record the broker holds has its own
// value, key and headers as the driver renders them.
func TestBatchRecordsKeepTheirBytes(t *testing.T) {
	c := startCluster(t, 4)
	r := newReceiver(t, c, 4)
	ctx := context.Background()
	s := r.newSink(t)
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var evs []*ferry.Event
	for i := range 40 {
		pad := strings.Repeat(string(rune(1+i%30)), 200+50*i) // each byte renders as \u00XX
		token := bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X", i)}}
		raw, err := bson.Marshal(bson.D{
			{Key: "_id", Value: token},
			{Key: "operationType", Value: "insert"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1730000000, I: uint32(i + 1)}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: fmt.Sprintf("doc-%d-%s", i, pad[:i])}}},
			{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ferry.ParseEvent(raw, 0, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if err := s.Write(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	byID := map[string]record{}
	for _, rec := range r.records() {
		byID[rec.d.EventID] = rec
	}
	for i, ev := range evs {
		rec, ok := byID[ev.ID()]
		if !ok {
			t.Fatalf("event %d: no record with its id", i)
		}
		want, err := bson.MarshalExtJSON(ev.Raw, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec.d.Body, want) {
			t.Errorf("event %d: value differs from the driver's rendering\n got %.200s\nwant %.200s", i, rec.d.Body, want)
		}
		wantKey, err := bson.MarshalExtJSON(ev.DocumentKey, true, false)
		if err != nil {
			t.Fatal(err)
		}
		if rec.key != string(wantKey) {
			t.Errorf("event %d: key %.100q, want %.100q", i, rec.key, wantKey)
		}
		if rec.d.Epoch != int64(i) {
			t.Errorf("event %d: epoch header %d, want %d", i, rec.d.Epoch, i)
		}
	}
}
