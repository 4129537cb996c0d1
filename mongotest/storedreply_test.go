package mongotest

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// TestStoredBatchReplyBytes: a reply whose batch is a storedBatch (the
// stored encodings copied, the documents without one encoded) is, byte for
// byte, the reply the driver's encoder writes for the same documents as a
// bson.A, including the fields the engine adds around the cursor; a value
// without a BSON form still gets the encoder's error reply.
func TestStoredBatchReplyBytes(t *testing.T) {
	docs := []bson.D{
		{{Key: "_id", Value: int64(1)}, {Key: "s", Value: "x"}, {Key: "payload", Value: strings.Repeat("p", 300)}},
		{{Key: "_id", Value: "two"}, {Key: "nested", Value: bson.D{{Key: "a", Value: bson.A{int32(1), nil, 2.5, bson.D{}}}}}, {Key: "nil", Value: nil}},
		{{Key: "_id", Value: bson.ObjectID{1, 2, 3}}, {Key: "t", Value: bson.Timestamp{T: 5, I: 6}}, {Key: "dec", Value: bson.NewDecimal128(1, 2)},
			{Key: "bin", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "nan", Value: math.NaN()}, {Key: "min", Value: bson.MinKey{}}},
		{{Key: "_id", Value: int32(4)}}, // no stored encoding: encoded for the reply
	}
	raws := make([]bson.Raw, len(docs))
	for i, d := range docs[:3] {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = raw
	}
	at := bson.Timestamp{T: 100, I: 7}
	shape := func(batch any) bson.D {
		reply := withAtClusterTime(cursorReply(true, 42, "d.c", batch), at)
		return append(reply, bson.E{Key: "ok", Value: 1.0},
			bson.E{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: at},
				{Key: "signature", Value: bson.D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}}},
			bson.E{Key: "operationTime", Value: at})
	}
	plain := make(bson.A, len(docs))
	for i, d := range docs {
		plain[i] = d
	}
	want, err := bson.Marshal(shape(plain))
	if err != nil {
		t.Fatal(err)
	}
	enc := newReplyEncoder()
	msg := enc.appendMsg([]byte("prefix"), 3, 9, shape(storedBatch{docs: docs, raws: raws}))
	if string(msg[:6]) != "prefix" {
		t.Fatal("the reply overwrote what dst held")
	}
	h, err := wire.ParseHeader(msg[6:])
	if err != nil || int(h.Length) != len(msg)-6 || h.RequestID != 3 || h.ResponseTo != 9 {
		t.Fatalf("header %+v (%v) for a %d-byte message", h, err, len(msg)-6)
	}
	if got := msg[6+wire.HeaderSize+5:]; !bytes.Equal(got, want) {
		t.Fatalf("the stored batch's reply is\n%v\nthe encoder's is\n%v", bson.Raw(got), bson.Raw(want))
	}
	// The storedBatch's own encoding (any other encoder) is the same.
	if alone, err := bson.Marshal(shape(storedBatch{docs: docs, raws: raws})); err != nil || !bytes.Equal(alone, want) {
		t.Fatalf("bson.Marshal of the stored batch's reply: %v, %v", bson.Raw(alone), err)
	}
	// A value with no BSON form: the encoder's error reply, as before.
	bad := append(shape(storedBatch{docs: docs, raws: raws}), bson.E{Key: "odd", Value: make(chan int)})
	out := enc.appendMsg(nil, 1, 1, bad)
	body := bson.Raw(out[wire.HeaderSize+5:])
	if ok, _ := body.Lookup("ok").DoubleOK(); ok != 0 || !strings.Contains(body.Lookup("errmsg").StringValue(), "cannot encode reply") {
		t.Fatalf("a reply with a channel: %v", body)
	}
}
