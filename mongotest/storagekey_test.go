package mongotest

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestKeyOfIsFaithful: keyOf gives values MongoDB's equality finds equal
// the same key and every other pair different keys, including the values
// whose parts a key made by plain concatenation would confuse.
func TestKeyOfIsFaithful(t *testing.T) {
	distinct := []any{
		nil, "", "a", "ab", "a,", ",b", "a,sb", "1:a", "s1:a", "\"", "|", "a|b", "é", "\xff", "n",
		int32(1), int64(2), 1.5, -0.5, true, false,
		bson.DateTime(1), bson.Timestamp{T: 1, I: 2}, bson.Timestamp{T: 12}, bson.Binary{Data: []byte{1}}, bson.Binary{Subtype: 1, Data: []byte{1}},
		bson.ObjectID{1},
		bson.A{}, bson.A{"a,sb"}, bson.A{"a", "b"}, bson.A{"a,", "b"}, bson.A{"a", ",b"}, bson.A{bson.A{"a"}}, bson.A{"a", nil},
		bson.D{}, bson.D{{Key: "a", Value: "b"}}, bson.D{{Key: "ab", Value: ""}}, bson.D{{Key: "a", Value: "bs0:"}},
		bson.D{{Key: "a", Value: "b"}, {Key: "c", Value: "d"}}, bson.D{{Key: "c", Value: "d"}, {Key: "a", Value: "b"}},
		bson.D{{Key: "a\":\"b", Value: int32(1)}}, bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}},
	}
	seen := map[string]int{}
	for i, v := range distinct {
		k := keyOf(v)
		if j, dup := seen[k]; dup {
			t.Errorf("keyOf(%#v) = keyOf(%#v) = %q: different values, one key", v, distinct[j], k)
		}
		seen[k] = i
	}
	for _, same := range [][]any{
		{int32(7), int64(7), 7.0},
		{bson.D{{Key: "x", Value: int32(1)}}, bson.D{{Key: "x", Value: 1.0}}},
		{bson.A{int64(3), "s"}, bson.A{3.0, "s"}},
	} {
		for _, v := range same[1:] {
			if keyOf(v) != keyOf(same[0]) {
				t.Errorf("keyOf(%#v) = %q, keyOf(%#v) = %q: equal values, different keys", same[0], keyOf(same[0]), v, keyOf(v))
			}
		}
	}
}

func BenchmarkKeyOfLedgerID(b *testing.B) {
	id := fmt.Sprintf("orders/%064x", 12345) // a ledger _id: stream "/" 64-character event id
	b.ReportAllocs()
	for b.Loop() {
		_ = keyOf(id)
	}
}
