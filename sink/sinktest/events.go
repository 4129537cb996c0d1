package sinktest

import (
	"fmt"
	"time"

	"github.com/ferry-io/ferry"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// NewEvent builds a change event the way the server would send it (an
// update of document key in shop.orders, carrying seq in its fullDocument)
// and decodes it into a ferry.Event applied under epoch. Events with
// different seq have different resume tokens, hence different ids.
func NewEvent(seq int, key string, epoch int64) *ferry.Event {
	token := bson.D{{Key: "_data", Value: fmt.Sprintf("8266A0F3C2%08X2B042C0100296E5A1004%s", seq, "7F3A9C1E2B4D46A1B0C5D9E8F7A6B5C446645F6964")}}
	total, err := bson.ParseDecimal128("19.99")
	if err != nil {
		panic(err) // constant input
	}
	ts := bson.Timestamp{T: 1730000000 + uint32(seq), I: 1}
	wall := time.Unix(int64(ts.T), 0).UTC()
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: token},
		{Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: ts},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(wall)},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: key}}},
		{Key: "updateDescription", Value: bson.D{
			{Key: "updatedFields", Value: bson.D{{Key: "seq", Value: int32(seq)}}},
			{Key: "removedFields", Value: bson.A{}},
		}},
		{Key: "fullDocument", Value: bson.D{
			{Key: "_id", Value: key},
			{Key: "seq", Value: int32(seq)},
			{Key: "note", Value: "caf\u00e9 \"quoted\" <b>&</b>\n"},
			{Key: "total", Value: total},
		}},
	})
	if err != nil {
		panic(fmt.Sprintf("sinktest: building an event: %v", err)) // static input: cannot fail
	}
	r := bson.Raw(raw)

	ev := &ferry.Event{
		Raw:           r,
		Token:         r.Lookup("_id").Document(),
		OperationType: "update",
		Namespace:     ferry.Namespace{DB: "shop", Coll: "orders"},
		DocumentKey:   r.Lookup("documentKey").Document(),
		FullDocument:  r.Lookup("fullDocument").Document(),
		ClusterTime:   ts,
		WallTime:      wall,
		Epoch:         epoch,
		Attempt:       1,
	}
	ev.UpdateDescription = r.Lookup("updateDescription").Document()
	return ev
}

// bodyFacts is what the suite reads back from a delivered body.
type bodyFacts struct {
	ID struct {
		Data string `bson:"_data"`
	} `bson:"_id"`
	OperationType string `bson:"operationType"`
	FullDocument  struct {
		ID  string `bson:"_id"`
		Seq int    `bson:"seq"`
	} `bson:"fullDocument"`
}

func parseBody(body []byte) (bodyFacts, error) {
	var f bodyFacts
	if err := bson.UnmarshalExtJSON(body, false, &f); err != nil {
		return f, fmt.Errorf("body is not the change event as Extended JSON: %w", err)
	}
	return f, nil
}

func tokenData(ev *ferry.Event) string {
	s, _ := ev.Token.Lookup("_data").StringValueOK()
	return s
}
