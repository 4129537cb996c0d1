package sinktest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
)

// changeEvent builds the change event of fields (after its _id, a resume
// token distinct per seq) and decodes it as the reader would.
func changeEvent(seq int, epoch int64, fields bson.D) *ferry.Event {
	token := bson.D{{Key: "_data", Value: fmt.Sprintf("8266B1C0D3%08X2B042C0100296E5A1004%s", seq, "0C3D5E7F9A1B4C2D8E6F0A1B2C3D4E5F46645F6964")}}
	raw, err := bson.Marshal(append(bson.D{{Key: "_id", Value: token}}, fields...))
	if err != nil {
		panic(fmt.Sprintf("sinktest: building an event: %v", err)) // static input
	}
	ev, err := ferry.ParseEvent(raw, 0, epoch)
	if err != nil {
		panic(fmt.Sprintf("sinktest: decoding an event: %v", err)) // static input
	}
	return ev
}

// VariedEvents returns change events that between them hold every BSON
// type and the values whose Extended JSON is easy to get wrong: doubles
// (-0, NaN, infinities, exponents), int64 extremes, dates before 1970 and
// after 9999, Decimal128 specials, every binary subtype, unsorted regex
// options, code with scope, DBPointer, symbol, min/max key, undefined,
// escapes, U+2028 and invalid UTF-8 in keys and strings, nested arrays and
// documents; with documentKeys of several types, and events without a
// fullDocument or without a documentKey. Every one renders as valid JSON.
func VariedEvents(epoch int64) []*ferry.Event {
	oid, _ := bson.ObjectIDFromHex("56e1fc72e0c917e9c4714161")
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			panic(err) // constant input
		}
		return d
	}
	ts := bson.Timestamp{T: 1730000000, I: 7}
	wall := bson.NewDateTimeFromTime(time.Date(2024, 10, 27, 3, 33, 20, 123e6, time.UTC))
	ns := bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}
	uuid := []byte("\x73\xff\xd2\x64\x44\xb3\x4c\x69\x90\xe8\xe7\xd1\xdf\xc0\x35\xd4")
	head := func(op string, key any) bson.D {
		d := bson.D{{Key: "operationType", Value: op}, {Key: "clusterTime", Value: ts}, {Key: "wallTime", Value: wall}, {Key: "ns", Value: ns}}
		if key != nil {
			d = append(d, bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: key}}})
		}
		return d
	}
	with := func(d bson.D, more ...bson.E) bson.D { return append(d, more...) }

	numbers := bson.D{
		{Key: "_id", Value: oid},
		{Key: "d", Value: bson.A{1.0, -1.5, math.Copysign(0, -1), 0.1, 1234567.0, 1e21, 1e-7, math.MaxFloat64, 5e-324,
			math.NaN(), math.Inf(1), math.Inf(-1)}},
		{Key: "i32", Value: bson.A{int32(0), int32(math.MaxInt32), int32(math.MinInt32)}},
		{Key: "i64", Value: bson.A{int64(0), int64(math.MaxInt64), int64(math.MinInt64)}},
		{Key: "dec", Value: bson.A{dec("19.99"), dec("-0"), dec("NaN"), dec("Infinity"), dec("-Infinity"), dec("1.234E+5"), dec("1E-7")}},
	}
	dates := bson.D{
		{Key: "_id", Value: "dates"},
		{Key: "epoch", Value: bson.DateTime(0)},
		{Key: "before1970", Value: bson.DateTime(-1)},
		{Key: "year1", Value: bson.DateTime(-62135596800000)},
		{Key: "last9999", Value: bson.DateTime(253402300799999)},
		{Key: "year10000", Value: bson.DateTime(253402300800000)},
		{Key: "millis", Value: bson.A{bson.DateTime(1356351330500), bson.DateTime(1356351330050), bson.DateTime(1356351330001)}},
		{Key: "max", Value: bson.DateTime(math.MaxInt64)},
		{Key: "ts", Value: bson.Timestamp{T: math.MaxUint32, I: math.MaxUint32}},
	}
	strs := bson.D{
		{Key: "_id", Value: int64(42)},
		{Key: "escapes", Value: "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f<>&"},
		{Key: "unicode", Value: "café ☕ 😀 \u2028\u2029 \uFFFD"},
		{Key: "invalid", Value: "a\xffb\xe2\x82c\xed\xa0\x80"},
		{Key: "nul", Value: "a\x00b"},
		{Key: "key \"quoted\"\n\xff", Value: ""},
		{Key: "", Value: "empty key"},
	}
	binaries := bson.D{{Key: "_id", Value: bson.Binary{Subtype: 4, Data: uuid}}}
	for _, sub := range []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0xff} {
		binaries = append(binaries, bson.E{Key: fmt.Sprintf("sub%02x", sub), Value: bson.Binary{Subtype: sub, Data: uuid[:int(sub)%16+1]}})
	}
	binaries = append(binaries, bson.E{Key: "empty", Value: bson.Binary{}})
	oddities := bson.D{
		{Key: "_id", Value: bson.D{{Key: "tenant", Value: "t1"}, {Key: "n", Value: int32(5)}}},
		{Key: "re", Value: bson.Regex{Pattern: `^a"b\/c$`, Options: "xsmi"}},
		{Key: "code", Value: bson.JavaScript(`function() { return "x"; }`)},
		{Key: "cws", Value: bson.CodeWithScope{Code: "f(x)", Scope: bson.D{{Key: "x", Value: int32(1)}, {Key: "y", Value: bson.A{}}}}},
		{Key: "ptr", Value: bson.DBPointer{DB: "shop.orders", Pointer: oid}},
		{Key: "sym", Value: bson.Symbol("sym")},
		{Key: "min", Value: bson.MinKey{}},
		{Key: "max", Value: bson.MaxKey{}},
		{Key: "undef", Value: bson.Undefined{}},
		{Key: "null", Value: nil},
		{Key: "bools", Value: bson.A{true, false}},
		{Key: "nested", Value: bson.D{{Key: "a", Value: bson.A{bson.A{}, bson.D{}, bson.A{bson.D{{Key: "b", Value: bson.A{int32(1), "two", 3.0}}}}}}}},
	}
	update := bson.D{
		{Key: "updatedFields", Value: bson.D{{Key: "items.3.qty", Value: int32(2)}, {Key: "when", Value: bson.DateTime(-5)}}},
		{Key: "removedFields", Value: bson.A{"old", "a.b"}},
		{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "items"}, {Key: "newSize", Value: int32(3)}}}},
	}
	return []*ferry.Event{
		changeEvent(1, epoch, with(head("insert", oid), bson.E{Key: "fullDocument", Value: numbers})),
		changeEvent(2, epoch, with(head("replace", "dates"), bson.E{Key: "fullDocument", Value: dates})),
		changeEvent(3, epoch, with(head("insert", int64(42)), bson.E{Key: "fullDocument", Value: strs})),
		changeEvent(4, epoch, with(head("insert", bson.Binary{Subtype: 4, Data: uuid}), bson.E{Key: "fullDocument", Value: binaries})),
		changeEvent(5, epoch, with(head("update", oddities[0].Value), bson.E{Key: "updateDescription", Value: update},
			bson.E{Key: "fullDocument", Value: oddities}, bson.E{Key: "fullDocumentBeforeChange", Value: oddities})),
		changeEvent(6, epoch, head("delete", 3.5)),
		changeEvent(7, epoch, head("drop", nil)),
		changeEvent(8, epoch, with(head("rename", nil), bson.E{Key: "to", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders2"}}})),
	}
}

// LargeEvent returns an update change event of about 1.4 KB, shaped like
// an order in an online shop (strings, numbers, dates, a nested address,
// an array of line items, tags), for benchmarks. Events with different seq
// have different ids.
func LargeEvent(seq int, epoch int64) *ferry.Event {
	oid, _ := bson.ObjectIDFromHex("6720ad2c5f1e4b3a9c8d7e6f")
	price := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			panic(err) // constant input
		}
		return d
	}
	when := bson.NewDateTimeFromTime(time.Date(2024, 10, 28, 9, 41, 7, 512e6, time.UTC))
	items := bson.A{}
	for i, sku := range []string{"SKU-10442-BLK-M", "SKU-20931-WHT-L", "SKU-33310-RED-S", "SKU-40017-GRN-XL"} {
		items = append(items, bson.D{
			{Key: "sku", Value: sku}, {Key: "name", Value: fmt.Sprintf("Merino crew-neck jumper, colour %d", i)},
			{Key: "qty", Value: int32(i + 1)}, {Key: "unitPrice", Value: price("49.90")}, {Key: "discount", Value: 0.15},
			{Key: "backordered", Value: i == 2},
		})
	}
	doc := bson.D{
		{Key: "_id", Value: oid},
		{Key: "orderNo", Value: int64(100000 + seq)},
		{Key: "status", Value: "paid"},
		{Key: "customer", Value: bson.D{
			{Key: "id", Value: "cus_8f3k2j1h"}, {Key: "name", Value: "Zoë Müller-Lüdenscheidt"}, {Key: "email", Value: "zoe.mueller@example.com"},
			{Key: "address", Value: bson.D{{Key: "line1", Value: "Hauptstraße 12"}, {Key: "city", Value: "Köln"}, {Key: "zip", Value: "50667"}, {Key: "country", Value: "DE"}}},
		}},
		{Key: "items", Value: items},
		{Key: "total", Value: price("169.66")},
		{Key: "currency", Value: "EUR"},
		{Key: "tags", Value: bson.A{"gift", "express", "newsletter-2024-10"}},
		{Key: "createdAt", Value: when},
		{Key: "updatedAt", Value: when},
		{Key: "notes", Value: "Leave at the door.\nRing twice."},
		{Key: "rev", Value: int32(seq)},
	}
	return changeEvent(seq, epoch, bson.D{
		{Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1730108467, I: uint32(seq)}},
		{Key: "wallTime", Value: when},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: oid}}},
		{Key: "updateDescription", Value: bson.D{
			{Key: "updatedFields", Value: bson.D{{Key: "status", Value: "paid"}, {Key: "updatedAt", Value: when}, {Key: "rev", Value: int32(seq)}}},
			{Key: "removedFields", Value: bson.A{}},
			{Key: "truncatedArrays", Value: bson.A{}},
		}},
		{Key: "fullDocument", Value: doc},
	})
}

// CheckRendering writes VariedEvents through s, connected here and closed
// after, and checks that r received each exactly once with the body
// bson.MarshalExtJSON(ev.Raw, canonical, false) returns: the bytes the
// sinks delivered before they rendered with internal/extjson.
func CheckRendering(t *testing.T, s sink.Sink, r Receiver, canonical bool) {
	t.Helper()
	evs := VariedEvents(9)
	connect(t, s)
	if err := s.Write(context.Background(), evs); err != nil {
		t.Fatalf("Write: %v", err)
	}
	closeSink(t, s)
	got := map[string][][]byte{}
	for _, d := range r.Received() {
		got[d.EventID] = append(got[d.EventID], d.Body)
	}
	for i, ev := range evs {
		want, err := bson.MarshalExtJSON(ev.Raw, canonical, false)
		if err != nil {
			t.Fatalf("event %d: the driver cannot render it: %v", i, err)
		}
		bodies := got[ev.ID()]
		if len(bodies) != 1 {
			t.Errorf("event %d (%s): delivered %d times, want once", i, ev.OperationType, len(bodies))
			continue
		}
		if !bytes.Equal(bodies[0], want) {
			t.Errorf("event %d (%s), canonical=%v: body differs from the driver's rendering\n got %s\nwant %s", i, ev.OperationType, canonical, bodies[0], want)
		}
	}
}

// DriverKey is the ordering key the broker sinks gave ev before they
// rendered with internal/extjson: its documentKey as the driver's relaxed
// Extended JSON, or its namespace for an event without one. Tests compare
// a sink's keys with it, so existing topics keep their partitioning.
func DriverKey(t *testing.T, ev *ferry.Event) string {
	t.Helper()
	if len(ev.DocumentKey) == 0 {
		return ev.Namespace.String()
	}
	b, err := bson.MarshalExtJSON(ev.DocumentKey, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
