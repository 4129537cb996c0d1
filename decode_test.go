package ferry_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
)

// driverDecode is what ParseEvent must make of a valid raw change event,
// read with the driver's own element accessors: every top-level field of
// the expected type (the last one when a key repeats), the others left
// zero; no _id document is an error.
func driverDecode(raw bson.Raw) (*ferry.Event, error) {
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	ev := &ferry.Event{Raw: raw, Partition: 3, Epoch: 9}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "_id":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("_id is not a document")
			}
			ev.Token = d
		case "operationType":
			ev.OperationType, _ = v.StringValueOK()
		case "ns":
			if d, ok := v.DocumentOK(); ok {
				ns := ferry.Namespace{}
				dels, _ := d.Elements()
				for _, de := range dels {
					s, ok := de.Value().StringValueOK()
					switch {
					case !ok:
					case de.Key() == "db":
						ns.DB = s
					case de.Key() == "coll":
						ns.Coll = s
					}
				}
				ev.Namespace = ns
			}
		case "documentKey":
			if d, ok := v.DocumentOK(); ok {
				ev.DocumentKey = d
			}
		case "fullDocument":
			if d, ok := v.DocumentOK(); ok {
				ev.FullDocument = d
			}
		case "fullDocumentBeforeChange":
			if d, ok := v.DocumentOK(); ok {
				ev.FullDocumentBeforeChange = d
			}
		case "updateDescription":
			if d, ok := v.DocumentOK(); ok {
				ev.UpdateDescription = d
			}
		case "clusterTime":
			if t, i, ok := v.TimestampOK(); ok {
				ev.ClusterTime = bson.Timestamp{T: t, I: i}
			}
		case "wallTime":
			if dt, ok := v.DateTimeOK(); ok {
				ev.WallTime = time.UnixMilli(dt).UTC()
			}
		}
	}
	if ev.Token == nil {
		return nil, fmt.Errorf("no _id")
	}
	return ev, nil
}

// decodedDiff reports how got differs from want, "" when it does not.
func decodedDiff(got, want *ferry.Event) string {
	var diffs []string
	raw := func(name string, g, w bson.Raw) {
		if !bytes.Equal(g, w) || (g == nil) != (w == nil) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	raw("Token", got.Token, want.Token)
	raw("DocumentKey", got.DocumentKey, want.DocumentKey)
	raw("FullDocument", got.FullDocument, want.FullDocument)
	raw("FullDocumentBeforeChange", got.FullDocumentBeforeChange, want.FullDocumentBeforeChange)
	raw("UpdateDescription", got.UpdateDescription, want.UpdateDescription)
	raw("Raw", got.Raw, want.Raw)
	if got.OperationType != want.OperationType {
		diffs = append(diffs, fmt.Sprintf("OperationType = %q, want %q", got.OperationType, want.OperationType))
	}
	if got.Namespace != want.Namespace {
		diffs = append(diffs, fmt.Sprintf("Namespace = %+v, want %+v", got.Namespace, want.Namespace))
	}
	if got.ClusterTime != want.ClusterTime {
		diffs = append(diffs, fmt.Sprintf("ClusterTime = %v, want %v", got.ClusterTime, want.ClusterTime))
	}
	if !got.WallTime.Equal(want.WallTime) {
		diffs = append(diffs, fmt.Sprintf("WallTime = %v, want %v", got.WallTime, want.WallTime))
	}
	if got.Partition != want.Partition || got.Epoch != want.Epoch {
		diffs = append(diffs, fmt.Sprintf("Partition/Epoch = %d/%d, want %d/%d", got.Partition, got.Epoch, want.Partition, want.Epoch))
	}
	return strings.Join(diffs, "; ")
}

func decodeCases() []bson.D {
	token := bson.D{{Key: "_data", Value: "8264A1B2C3000000012B022C0100296E5A1004"}}
	full := bson.D{
		{Key: "_id", Value: token},
		{Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1700000000, I: 7}},
		{Key: "wallTime", Value: bson.DateTime(1700000000123)},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "payload", Value: strings.Repeat("p", 300)}}},
		{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "region", Value: "eu"}, {Key: "_id", Value: 1}}},
		{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "v", Value: 1}}}, {Key: "removedFields", Value: bson.A{}}}},
		{Key: "txnNumber", Value: int64(4)},
		{Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
	}
	// Fields of every other type before and between the known ones, which
	// the walk must step over.
	others := bson.D{
		{Key: "_id", Value: token},
		{Key: "d", Value: 1.5}, {Key: "s", Value: "x"}, {Key: "a", Value: bson.A{1, "two"}},
		{Key: "b", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}}}, {Key: "u", Value: bson.Undefined{}},
		{Key: "oid", Value: bson.NewObjectID()}, {Key: "t", Value: true}, {Key: "dt", Value: bson.DateTime(5)},
		{Key: "n", Value: nil}, {Key: "re", Value: bson.Regex{Pattern: "a.*b", Options: "i"}},
		{Key: "dbp", Value: bson.DBPointer{DB: "x.y", Pointer: bson.NewObjectID()}},
		{Key: "js", Value: bson.JavaScript("f()")}, {Key: "sym", Value: bson.Symbol("s")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "g()", Scope: bson.D{{Key: "x", Value: 1}}}},
		{Key: "i32", Value: int32(3)}, {Key: "ts", Value: bson.Timestamp{T: 2, I: 3}}, {Key: "i64", Value: int64(9)},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
		{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "x", Value: 1}, {Key: "db", Value: "d"}, {Key: "coll", Value: 5}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: bson.NewObjectID()}}},
	}
	// The known fields with types they never have: ignored.
	wrongTypes := bson.D{
		{Key: "_id", Value: token},
		{Key: "operationType", Value: 5},
		{Key: "clusterTime", Value: int64(1)},
		{Key: "wallTime", Value: "yesterday"},
		{Key: "ns", Value: "shop.orders"},
		{Key: "documentKey", Value: bson.A{1}},
		{Key: "fullDocument", Value: nil},
		{Key: "fullDocumentBeforeChange", Value: "none"},
		{Key: "updateDescription", Value: 1},
	}
	repeated := append(append(bson.D{}, full...), bson.E{Key: "operationType", Value: "delete"},
		bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: "other"}}})
	split := append(append(bson.D{}, full[:3]...), bson.E{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: 1}, {Key: "of", Value: 2}}})
	return []bson.D{full, others, wrongTypes, repeated, split,
		{{Key: "_id", Value: token}},
		{{Key: "operationType", Value: "insert"}}, // no _id
		{{Key: "_id", Value: "not a document"}},   // _id of another type
		{{Key: "operationType", Value: "invalidate"}, {Key: "_id", Value: token}, {Key: "ns", Value: bson.D{}}},
	}
}

// TestParseEventMatchesDriver: ParseEvent's one-pass walk decodes every
// field as the driver's element accessors read it, steps over fields of
// every BSON type, ignores known fields of unexpected types, takes a
// repeated key's last value, and refuses an event without an _id
// document.
func TestParseEventMatchesDriver(t *testing.T) {
	for i, d := range decodeCases() {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := driverDecode(raw)
		got, err := ferry.ParseEvent(raw, 3, 9)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Errorf("case %d: ParseEvent error %v, driver %v", i, err, wantErr)
		case err == nil:
			if diff := decodedDiff(got, want); diff != "" {
				t.Errorf("case %d: %s", i, diff)
			}
		}
	}
}

// TestParseEventRefusesMalformed: truncated or inconsistent bytes are an
// error naming the problem, never a panic or a partial event.
func TestParseEventRefusesMalformed(t *testing.T) {
	raw, _ := bson.Marshal(decodeCases()[0])
	bad := map[string][]byte{
		"empty":          nil,
		"short":          raw[:3],
		"truncated":      raw[:len(raw)-10],
		"length too big": append([]byte{0xff, 0xff, 0, 0}, raw[4:]...),
		"no final NUL":   append(append([]byte{}, raw[:len(raw)-1]...), 1),
	}
	// An element whose length runs past the document.
	over := append([]byte{}, raw...)
	idx := bytes.Index(over, []byte("fullDocument\x00")) + len("fullDocument\x00")
	over[idx], over[idx+1] = 0xff, 0x7f
	bad["element past the end"] = over
	for name, b := range bad {
		ev, err := ferry.ParseEvent(b, 0, 0)
		if err == nil || ev != nil {
			t.Errorf("%s: ParseEvent = %v, %v; want an error", name, ev, err)
		} else if !strings.Contains(err.Error(), "malformed change event") {
			t.Errorf("%s: error %q does not say the event is malformed", name, err)
		}
	}
}

// FuzzParseEvent: on any bytes ParseEvent returns an event or an error,
// never panics; on a valid document it agrees with the driver.
func FuzzParseEvent(f *testing.F) {
	for _, d := range decodeCases() {
		raw, _ := bson.Marshal(d)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ferry.ParseEvent(b, 3, 9)
		if bson.Raw(b).Validate() != nil || len(b) < 4 || int(binary.LittleEndian.Uint32(b)) != len(b) {
			return // the driver's Validate allows bytes after the document; ParseEvent does not
		}
		want, wantErr := driverDecode(b)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("ParseEvent error %v, driver %v", err, wantErr)
		}
		if err == nil {
			if diff := decodedDiff(got, want); diff != "" {
				t.Fatal(diff)
			}
		}
	})
}
