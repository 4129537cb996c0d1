package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestOptionTruthiness: a boolean command option (update's upsert) and an
// aggregation condition ($cond) read a value the same way, as a server's
// trueValue does: null, missing, false and a zero of any numeric type,
// Decimal128 included, are false.
func TestOptionTruthiness(t *testing.T) {
	_, db, _ := connect(t)
	if _, err := db.Collection("one").InsertOne(ctx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		v    any
		want bool
	}{
		{false, false}, {true, true}, {int32(0), false}, {int32(1), true}, {int64(0), false}, {int64(-3), true},
		{0.0, false}, {2.5, true}, {dec("0"), false}, {dec("-0"), false}, {dec("0.00"), false}, {dec("1"), true},
		{dec("0.001"), true},
	}
	// cond evaluates {$cond: [v, true, false]} in an aggregation.
	cond := func(v any) bool {
		t.Helper()
		cur, err := db.Collection("one").Aggregate(ctx(t), bson.A{bson.D{{Key: "$project", Value: bson.D{
			{Key: "_id", Value: 0},
			{Key: "t", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$literal", Value: v}}, true, false}}}},
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []struct{ T bool }
		if err := cur.All(ctx(t), &out); err != nil || len(out) != 1 {
			t.Fatalf("$cond on %#v: %v %v", v, out, err)
		}
		return out[0].T
	}
	// upserts runs an update of a missing document with upsert: v (no
	// upsert field when omit) and reports whether it inserted one.
	upserts := func(i int, v any, omit bool) bool {
		t.Helper()
		stmt := bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: i}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}
		if !omit {
			stmt = append(stmt, bson.E{Key: "upsert", Value: v})
		}
		var res struct{ N int32 }
		if err := db.RunCommand(ctx(t), bson.D{{Key: "update", Value: "u"}, {Key: "updates", Value: bson.A{stmt}}}).Decode(&res); err != nil {
			t.Fatalf("update with upsert %#v: %v", v, err)
		}
		return res.N == 1
	}
	for i, c := range cases {
		if got := cond(c.v); got != c.want {
			t.Errorf("$cond: %#v is %v, want %v", c.v, got, c.want)
		}
		if got := upserts(i+1, c.v, false); got != c.want {
			t.Errorf("upsert: %#v upserted %v, want %v", c.v, got, c.want)
		}
	}
	if cond(nil) {
		t.Error("$cond: null is true, want false")
	}
	if upserts(100, nil, true) {
		t.Error("an update without upsert upserted")
	}
}
