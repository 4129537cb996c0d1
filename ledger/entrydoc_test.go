package ledger

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestEntryDocIsTheDriversEncoding: RecordMany's directly encoded entry is
// byte for byte what the driver makes of the same fields as a bson.D.
func TestEntryDocIsTheDriversEncoding(t *testing.T) {
	for _, c := range []struct {
		stream, event    string
		partition, epoch int64
		at               bson.DateTime
	}{
		{"orders", "3f" + string(bytes.Repeat([]byte("a"), 62)), 0, 1, 1764633600000},
		{"s", "e", 31, 0, -5},
		{"é/ü", "x", 1 << 40, 1<<62 + 3, 0},
	} {
		id := ID(c.stream, c.event)
		want, err := bson.Marshal(bson.D{
			{Key: "_id", Value: id}, {Key: fStream, Value: c.stream}, {Key: fEvent, Value: c.event},
			{Key: fPartition, Value: c.partition}, {Key: fEpoch, Value: c.epoch}, {Key: fAppliedAt, Value: c.at},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := entryDoc(id, c.stream, c.event, c.partition, c.epoch, c.at); !bytes.Equal(got, want) {
			t.Errorf("entryDoc(%q, %q) = %v, want %v", c.stream, c.event, got, bson.Raw(want))
		}
	}
}
