package ferry

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestBackfillKeyAndIDUnchanged: the in-place documentKey equals the
// driver's encoding of {_id: <id>}, and the id computed on first use is
// the hex sha256 of marker, namespace + NUL and key, as ids recorded by
// earlier releases (ledgers, dead letters) were.
func TestBackfillKeyAndIDUnchanged(t *testing.T) {
	marker := []byte("snap-1\x00\x01\x02\x03\x04\x05\x06\x07\x08")
	for _, id := range []any{int32(7), int64(1) << 40, "order-1", bson.NewObjectID(), bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "x"}}, 2.5, nil} {
		doc, err := bson.Marshal(bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: id}, {Key: "pad", Value: "p"}})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}})
		for _, ns := range []Namespace{{DB: "shop", Coll: "orders"}, {DB: "shop"}} {
			ev, err := newBackfillEvent(ns, doc, marker, 0, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ev.DocumentKey, want) {
				t.Fatalf("_id %v: documentKey %x, want %x", id, []byte(ev.DocumentKey), want)
			}
			old := EventID(append(append(append([]byte(nil), marker...), ns.String()+"\x00"...), want...))
			if got := ev.ID(); got != old {
				t.Fatalf("_id %v in %s: id %s, want %s", id, ns, got, old)
			}
		}
	}
}
