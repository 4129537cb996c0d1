package mongotest_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// Tests of the _id index path: a filter pinning _id to values is answered
// from the _id map, with exactly the results of a collection scan.
// mongotest.ScanOnly turns the path off, so every case runs both ways and
// compares the replies byte for byte; the cases that say what MongoDB
// returns check that too.

// idOID is the one ObjectId among idDocs' _ids; any other is one the
// server generated (an upsert's).
var idOID = bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// idDocs are documents with _ids of every kind the path must tell apart.
func idDocs() []bson.D {
	ids := []any{
		int32(1), int64(2), 3.5, "a", "ab", "b", "A", idOID, bson.DateTime(1000), true,
		bson.D{{Key: "x", Value: int32(1)}}, bson.D{{Key: "x", Value: int32(1)}, {Key: "y", Value: "z"}},
		bson.Binary{Subtype: 0, Data: []byte("bin")}, bson.Timestamp{T: 5, I: 1}, nil,
		int64(math.MinInt64), int64(1<<53 + 1), float64(1 << 53), int32(-7), 0.25,
	}
	docs := make([]bson.D, len(ids))
	for i, id := range ids {
		docs[i] = bson.D{{Key: "_id", Value: id}, {Key: "k", Value: int32(i % 3)}, {Key: "i", Value: int32(i)}}
	}
	return docs
}

// idFilters are filters that pin _id, and some that only look as if they do.
func idFilters() []bson.D {
	// append to a non-nil bson.A: bson.A(nil) encodes as null, which
	// would make in() a malformed $in instead of an empty one.
	in := func(vs ...any) bson.D {
		return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: append(bson.A{}, vs...)}}}}
	}
	id := func(v any) bson.D { return bson.D{{Key: "_id", Value: v}} }
	return []bson.D{
		id(int32(1)), id(1.0), id(int64(1)), id(int64(2)), id(2.0), id(3.5), id("a"), id("zz"),
		id(bson.D{{Key: "x", Value: 1.0}}), id(bson.D{{Key: "y", Value: "z"}, {Key: "x", Value: int32(1)}}),
		id(bson.Binary{Subtype: 0, Data: []byte("bin")}), id(bson.Binary{Subtype: 5, Data: []byte("bin")}),
		id(bson.Timestamp{T: 5, I: 1}), id(bson.DateTime(1000)), id(true), id(false),
		id(float64(math.MinInt64)), id(int64(1 << 53)), id(float64(1<<53 + 2)), id(int64(1<<53 + 1)),
		id(nil), id(bson.A{int32(1)}), id(bson.Regex{Pattern: "^a"}),
		id(bson.D{{Key: "$eq", Value: int64(1)}}), id(bson.D{{Key: "$eq", Value: nil}}),
		id(bson.D{{Key: "$eq", Value: bson.A{int32(1), int32(2)}}}),
		in(), in(int64(1), 3.5, "a", "zz"), in(1.0, int32(1), int64(1)), in(bson.Regex{Pattern: "^a"}, int32(2)),
		in(nil), in(nil, int32(1)), in(bson.A{int32(1)}), in(bson.D{{Key: "x", Value: int64(1)}}, "b"),
		in(0.25, int32(-7), -7.0), in(bson.Timestamp{T: 5, I: 1}, bson.DateTime(1000)),
		// The _ids the transaction tests change after the snapshot
		// (seedIDs, changeOutside, changeInside).
		id("new"), id("b"), in("new", true, "ab", "zz", "b", 2.0, 3.5), in(int64(2), "a"),
		{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int32(1), int64(2), "a", "b"}}, {Key: "$gt", Value: int32(1)}}}},
		{{Key: "_id", Value: bson.D{{Key: "$gte", Value: int32(0)}, {Key: "$in", Value: bson.A{int32(1), int64(2), 3.5}}}}},
		{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int32(1), int64(2), 3.5, "a"}}}}, {Key: "k", Value: int32(1)}},
		{{Key: "k", Value: int32(1)}, {Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int32(1), 3.5, "a", "ab"}}}}},
		{{Key: "_id", Value: bson.D{{Key: "$nin", Value: bson.A{int32(1)}}}}},
		{{Key: "_id", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$in", Value: bson.A{int32(1)}}}}}}},
		{{Key: "$or", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: "a"}}}}},
	}
}

// both runs fn with the _id path off, then on, and fails when the two
// replies differ.
func both(t *testing.T, srv *mongotest.Server, what string, fn func() ([]bson.Raw, error)) []bson.Raw {
	t.Helper()
	mongotest.ScanOnly(srv, true)
	scan, scanErr := fn()
	mongotest.ScanOnly(srv, false)
	got, err := fn()
	scan, got = generated(scan), generated(got)
	if fmt.Sprint(scanErr) != fmt.Sprint(err) {
		t.Fatalf("%s: the scan fails with %v, the _id path with %v", what, scanErr, err)
	}
	if len(scan) != len(got) {
		t.Fatalf("%s: the scan returns %d documents, the _id path %d:\nscan: %v\n_id:  %v", what, len(scan), len(got), scan, got)
	}
	for i := range scan {
		if !bytes.Equal(scan[i], got[i]) {
			t.Fatalf("%s: document %d: the scan returns %v, the _id path %v", what, i, scan[i], got[i])
		}
	}
	return got
}

// generated replaces each _id the server generated (an upsert's ObjectId,
// new on every run) with the string "generated", so that two runs compare.
// Replies that are not documents (counts) pass as they are.
func generated(docs []bson.Raw) []bson.Raw {
	out := make([]bson.Raw, len(docs))
	for i, d := range docs {
		out[i] = d
		if v, err := d.LookupErr("_id"); err != nil || v.Type != bson.TypeObjectID || v.ObjectID() == idOID {
			continue
		}
		var m bson.D
		if err := bson.Unmarshal(d, &m); err != nil {
			continue
		}
		for j := range m {
			if m[j].Key == "_id" {
				m[j].Value = "generated"
			}
		}
		if b, err := bson.Marshal(m); err == nil {
			out[i] = b
		}
	}
	return out
}

func findRaw(ctx context.Context, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) ([]bson.Raw, error) {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	var out []bson.Raw
	err = cur.All(ctx, &out)
	return out, err
}

func aggRaw(ctx context.Context, c *mongo.Collection, pipeline any, opts ...options.Lister[options.AggregateOptions]) ([]bson.Raw, error) {
	cur, err := c.Aggregate(ctx, pipeline, opts...)
	if err != nil {
		return nil, err
	}
	var out []bson.Raw
	err = cur.All(ctx, &out)
	return out, err
}

func TestIDLookupReadsMatchScan(t *testing.T) {
	_, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	ctx := ctx(t)
	c := db.Collection("ids")
	insertDocs(t, c, idDocs()...)
	// Delete and re-insert one document, so natural order is not _id
	// order and a deleted record sits in the collection.
	if _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	insertDocs(t, c, bson.D{{Key: "_id", Value: "a"}, {Key: "k", Value: int32(1)}, {Key: "i", Value: int32(99)}})
	ci := options.Collation{Locale: "en", Strength: 2}
	for _, f := range idFilters() {
		name := fmt.Sprint(f)
		both(t, srv, "find "+name, func() ([]bson.Raw, error) { return findRaw(ctx, c, f) })
		both(t, srv, "find limit 2 "+name, func() ([]bson.Raw, error) { return findRaw(ctx, c, f, options.Find().SetLimit(2)) })
		both(t, srv, "find sorted "+name, func() ([]bson.Raw, error) {
			return findRaw(ctx, c, f, options.Find().SetSort(bson.D{{Key: "k", Value: -1}}).SetProjection(bson.D{{Key: "i", Value: 0}}))
		})
		both(t, srv, "find collation "+name, func() ([]bson.Raw, error) { return findRaw(ctx, c, f, options.Find().SetCollation(&ci)) })
		both(t, srv, "count "+name, func() ([]bson.Raw, error) {
			n, err := c.CountDocuments(ctx, f)
			return []bson.Raw{bson.Raw(fmt.Appendf(nil, "%d", n))}, err
		})
		both(t, srv, "aggregate "+name, func() ([]bson.Raw, error) {
			return aggRaw(ctx, c, mongo.Pipeline{{{Key: "$match", Value: f}}, {{Key: "$project", Value: bson.D{{Key: "k", Value: 1}}}}})
		})
		both(t, srv, "aggregate collation "+name, func() ([]bson.Raw, error) {
			return aggRaw(ctx, c, mongo.Pipeline{{{Key: "$match", Value: f}}}, options.Aggregate().SetCollation(&ci))
		})
	}

	// What MongoDB returns, in natural order.
	ids := func(docs []bson.Raw) string {
		var s []string
		for _, d := range docs {
			s = append(s, d.Lookup("_id").String())
		}
		return fmt.Sprint(s)
	}
	for _, tc := range []struct {
		filter bson.D
		want   string
	}{
		{bson.D{{Key: "_id", Value: 1.0}}, `[{"$numberInt":"1"}]`},
		{bson.D{{Key: "_id", Value: int64(1)}}, `[{"$numberInt":"1"}]`},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", 3.5, int64(1), "zz", 1.0}}}}}, `[{"$numberInt":"1"} {"$numberDouble":"3.5"} "a"]`},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{bson.Regex{Pattern: "^a"}}}}}}, `["ab" "a"]`},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}, `[]`},
		{bson.D{{Key: "_id", Value: nil}}, `[null]`},
		{bson.D{{Key: "_id", Value: float64(math.MinInt64)}}, `[{"$numberLong":"-9223372036854775808"}]`},
		{bson.D{{Key: "_id", Value: float64(1 << 53)}}, `[{"$numberDouble":"9.007199254740992E+15"}]`},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "x", Value: 1.0}}}}, `[{"x": {"$numberInt":"1"}}]`},
	} {
		got, err := findRaw(ctx, c, tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != tc.want {
			t.Errorf("find %v: _ids %s, want %s", tc.filter, ids(got), tc.want)
		}
	}
	got, err := findRaw(ctx, c, bson.D{{Key: "_id", Value: "A"}}, options.Find().SetCollation(&ci))
	if err != nil {
		t.Fatal(err)
	}
	if ids(got) != `["a" "A"]` && ids(got) != `["A" "a"]` {
		t.Errorf("find {_id: 'A'} under a case-insensitive collation: _ids %s, want A and a", ids(got))
	}
}

// A collection holding a Decimal128 _id is scanned: NumberDecimal("7")
// equals 7 and 7.0, which the _id map's keys cannot tell.
func TestIDLookupDecimalIDs(t *testing.T) {
	_, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	ctx := ctx(t)
	c := db.Collection("dec")
	d7, _ := bson.ParseDecimal128("7")
	insertDocs(t, c, bson.D{{Key: "_id", Value: d7}}, bson.D{{Key: "_id", Value: int32(8)}})
	for _, f := range []bson.D{
		{{Key: "_id", Value: int32(7)}},
		{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{7.0, int32(8)}}}}},
	} {
		got := both(t, srv, fmt.Sprint(f), func() ([]bson.Raw, error) { return findRaw(ctx, c, f) })
		if len(got) == 0 || got[0].Lookup("_id").Type != bson.TypeDecimal128 {
			t.Errorf("find %v: %v, want the NumberDecimal(\"7\") document first", f, got)
		}
	}
}

// In a transaction the _id path reads the snapshot: a document deleted
// since is still there, one inserted since is not, and the transaction's
// own writes show.
func TestIDLookupInTransaction(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	ctx := ctx(t)
	c := db.Collection("txn")
	var docs []bson.D
	for i := int32(1); i <= 5; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}})
	}
	insertDocs(t, c, docs...)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if _, err := findRaw(sctx, c, bson.D{{Key: "_id", Value: int32(1)}}); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	// Outside the transaction: delete 2, replace 3, delete and insert 4
	// again, insert 6.
	mustDo(t, func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(2)}}); return err })
	mustDo(t, func() error {
		_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int32(3)}}, bson.D{{Key: "v", Value: int32(30)}})
		return err
	})
	mustDo(t, func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(4)}}); return err })
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(4)}, {Key: "v", Value: int32(40)}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(6)}, {Key: "v", Value: int32(6)}})
		return err
	})
	// Inside: insert 7, update 5.
	mustDo(t, func() error {
		_, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: int32(7)}, {Key: "v", Value: int32(7)}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: 5.0}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(50)}}}})
		return err
	})
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{int32(7), int64(6), 5.0, int32(4), int32(3), int32(2), int32(1)}}}}}
	got := both(t, srv, "find in the transaction", func() ([]bson.Raw, error) { return findRaw(sctx, c, filter) })
	var vs []int32
	for _, d := range got {
		vs = append(vs, d.Lookup("v").Int32())
	}
	if fmt.Sprint(vs) != "[1 2 3 4 50 7]" {
		t.Errorf("the transaction reads v %v, want [1 2 3 4 50 7] (its snapshot, then its own insert)", vs)
	}
	both(t, srv, "count in the transaction", func() ([]bson.Raw, error) {
		n, err := c.CountDocuments(sctx, bson.D{{Key: "_id", Value: int32(2)}})
		return []bson.Raw{bson.Raw(fmt.Appendf(nil, "%d", n))}, err
	})
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got = both(t, srv, "find after the transaction", func() ([]bson.Raw, error) { return findRaw(ctx, c, filter) })
	vs = vs[:0]
	for _, d := range got {
		vs = append(vs, d.Lookup("v").Int32())
	}
	if fmt.Sprint(vs) != "[1 30 5 40 6]" {
		t.Errorf("after the abort v %v, want [1 30 5 40 6]", vs)
	}

	// A snapshot session reads, by _id, what was there at its first read.
	snap, err := client.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.EndSession(ctx)
	snapCtx := mongo.NewSessionContext(ctx, snap)
	if _, err := findRaw(snapCtx, c, bson.D{{Key: "_id", Value: int32(1)}}); err != nil { // fixes atClusterTime
		t.Fatal(err)
	}
	mustDo(t, func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}); return err })
	got = both(t, srv, "find in a snapshot session", func() ([]bson.Raw, error) { return findRaw(snapCtx, c, filter) })
	vs = vs[:0]
	for _, d := range got {
		vs = append(vs, d.Lookup("v").Int32())
	}
	if fmt.Sprint(vs) != "[1 30 5 40 6]" {
		t.Errorf("the snapshot session reads v %v, want [1 30 5 40 6] (1 deleted after its snapshot)", vs)
	}
}
