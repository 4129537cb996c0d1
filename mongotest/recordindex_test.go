package mongotest

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIndexEntriesFollowRecords: the ordered indexes hold one entry per
// record of c.records, live or deleted and kept; the compaction that drops
// deleted records drops their entries.
func TestIndexEntriesFollowRecords(t *testing.T) {
	c := &collection{db: "d", name: "c", byID: map[string]*record{}}
	hashed, err := parseIndexSpec(bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}})
	if err != nil {
		t.Fatal(err)
	}
	c.indexes = []*index{{name: "_id_", key: bson.D{{Key: "_id", Value: int32(1)}}}, hashed}
	check := func(what string) {
		t.Helper()
		in := map[*record]bool{}
		for _, r := range c.records {
			in[r] = true
		}
		for name, n := range map[string]int{"_id": c.idOrder.Len(), "hashed": hashed.hashed.Len()} {
			if n != len(c.records) {
				t.Errorf("%s: the %s index has %d entries for %d records", what, name, n, len(c.records))
			}
		}
		c.idOrder.ascend(position{}, func(x idEntry) bool {
			if !in[x.rec] {
				t.Errorf("%s: an _id entry for a record no longer stored", what)
			}
			return true
		})
		hashed.hashed.ascend(position{}, func(x hashEntry) bool {
			if !in[x.rec] || x.h != hashedID(x.rec.doc) {
				t.Errorf("%s: a hashed entry for a record no longer stored, or with another key", what)
			}
			return true
		})
	}
	for i := range 200 {
		if err := c.insert(bson.D{{Key: "_id", Value: int32(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	check("after inserts")
	for i := range 150 {
		c.remove(c.byIDValue(int32(i)), true) // kept for a snapshot
	}
	if len(c.records) != 200 {
		t.Fatalf("%d records after deletes kept for snapshots, want 200", len(c.records))
	}
	check("after kept deletes")
	c.remove(c.byIDValue(int32(150)), false) // compacts
	if len(c.records) != 49 {
		t.Fatalf("%d records after the compaction, want 49", len(c.records))
	}
	check("after the compaction")
}
