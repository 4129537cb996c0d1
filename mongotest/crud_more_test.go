package mongotest_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Tests of the CRUD features beyond the basics: the bulkWrite command,
// $out and $merge, collations, let, arrayFilters, validators, views and
// hints. MongoDB's own crud suite (TestConformance) covers them too; these
// pin the behaviour that suite does not reach (refusals, change events,
// failure atomicity).

func insertDocs(t *testing.T, c *mongo.Collection, docs ...bson.D) {
	t.Helper()
	in := make([]any, len(docs))
	for i, d := range docs {
		in[i] = d
	}
	if _, err := c.InsertMany(ctx(t), in); err != nil {
		t.Fatal(err)
	}
}

func allDocs(t *testing.T, c *mongo.Collection) []bson.M {
	t.Helper()
	cur, err := c.Find(ctx(t), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.M
	if err := cur.All(ctx(t), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClientBulkWriteAcrossNamespaces(t *testing.T) {
	client, db, _ := connect(t)
	a, b := db.Collection("a"), db.Collection("b")
	insertDocs(t, a, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}})
	cs := watch(t, ctx(t), db, mongo.Pipeline{})
	defer cs.Close(ctx(t))

	writes := []mongo.ClientBulkWrite{
		{Database: db.Name(), Collection: "a", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}})},
		{Database: db.Name(), Collection: "b", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 7}})},
		{Database: db.Name(), Collection: "b", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 8}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 2}}}}).SetUpsert(true)},
		{Database: db.Name(), Collection: "a", Model: mongo.NewClientDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}})},
	}
	res, err := client.BulkWrite(ctx(t), writes, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.InsertedCount != 1 || res.MatchedCount != 1 || res.ModifiedCount != 1 || res.UpsertedCount != 1 || res.DeletedCount != 1 {
		t.Fatalf("counts: %+v", res)
	}
	if res.UpdateResults[2].UpsertedID != int32(8) {
		t.Fatalf("upserted id of op 2: %v", res.UpdateResults[2].UpsertedID)
	}
	if got := allDocs(t, b); len(got) != 2 {
		t.Fatalf("b holds %v", got)
	}
	// Every operation is its own write, seen by change streams in order.
	for _, want := range []string{"update", "insert", "insert", "delete"} {
		if ev := next(t, cs); ev["operationType"] != want {
			t.Fatalf("event %v, want %s", ev["operationType"], want)
		}
	}
}

func TestClientBulkWriteErrors(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("c")
	insertDocs(t, c, bson.D{{Key: "_id", Value: 1}})
	dup := func(id int) mongo.ClientBulkWrite {
		return mongo.ClientBulkWrite{Database: db.Name(), Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: id}})}
	}
	// Ordered: the first error stops the batch.
	_, err := client.BulkWrite(ctx(t), []mongo.ClientBulkWrite{dup(2), dup(1), dup(3)})
	var cbe mongo.ClientBulkWriteException
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 1 || cbe.WriteErrors[1].Code != 11000 {
		t.Fatalf("ordered: %v", err)
	}
	if cbe.PartialResult == nil || cbe.PartialResult.InsertedCount != 1 {
		t.Fatalf("ordered partial result: %+v", cbe.PartialResult)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 2 {
		t.Fatalf("ordered: %d documents, want 2 (op 2 must not run)", n)
	}
	// Unordered: every operation runs; each failure is reported.
	_, err = client.BulkWrite(ctx(t), []mongo.ClientBulkWrite{dup(1), dup(4), dup(2)}, options.ClientBulkWrite().SetOrdered(false))
	if !errors.As(err, &cbe) || len(cbe.WriteErrors) != 2 || cbe.PartialResult.InsertedCount != 1 {
		t.Fatalf("unordered: %v (%+v)", err, cbe.PartialResult)
	}
}

func TestBulkWriteCommandCursor(t *testing.T) {
	client, db, _ := connect(t)
	ns := db.Name() + ".c"
	cmd := bson.D{
		{Key: "bulkWrite", Value: 1},
		{Key: "ops", Value: bson.A{
			bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 1}}}},
			bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 2}}}},
			bson.D{{Key: "delete", Value: 0}, {Key: "filter", Value: bson.D{}}, {Key: "multi", Value: true}},
		}},
		{Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: ns}}}},
		{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}},
	}
	var reply struct {
		Cursor struct {
			ID         int64    `bson:"id"`
			NS         string   `bson:"ns"`
			FirstBatch []bson.M `bson:"firstBatch"`
		} `bson:"cursor"`
		NInserted, NDeleted, NErrors int32
	}
	if err := client.Database("admin").RunCommand(ctx(t), cmd).Decode(&reply); err != nil {
		t.Fatal(err)
	}
	if reply.NInserted != 2 || reply.NDeleted != 2 || reply.NErrors != 0 {
		t.Fatalf("summary: %+v", reply)
	}
	if len(reply.Cursor.FirstBatch) != 1 || reply.Cursor.ID == 0 || reply.Cursor.NS != "admin.$cmd.bulkWrite" {
		t.Fatalf("cursor: %+v", reply.Cursor)
	}
	var more struct {
		Cursor struct {
			NextBatch []bson.M `bson:"nextBatch"`
		} `bson:"cursor"`
	}
	gm := bson.D{{Key: "getMore", Value: reply.Cursor.ID}, {Key: "collection", Value: "$cmd.bulkWrite"}, {Key: "batchSize", Value: 10}}
	if err := client.Database("admin").RunCommand(ctx(t), gm).Decode(&more); err != nil {
		t.Fatal(err)
	}
	if len(more.Cursor.NextBatch) != 2 || more.Cursor.NextBatch[1]["n"] != int32(2) {
		t.Fatalf("getMore: %v", more.Cursor.NextBatch)
	}
	// bulkWrite runs on admin only.
	err := db.RunCommand(ctx(t), cmd).Err()
	if !serverCode(err, 13) {
		t.Fatalf("bulkWrite on %s: %v, want Unauthorized (13)", db.Name(), err)
	}
}

func TestOutReplacesTargetAtomically(t *testing.T) {
	_, db, _ := connect(t)
	src, dst := db.Collection("src"), db.Collection("dst")
	insertDocs(t, src, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "b"}})
	insertDocs(t, dst, bson.D{{Key: "_id", Value: 9}, {Key: "k", Value: "old"}})
	if _, err := dst.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	out := mongo.Pipeline{{{Key: "$out", Value: "dst"}}}
	if _, err := src.Aggregate(ctx(t), out); err != nil {
		t.Fatal(err)
	}
	if got := allDocs(t, dst); len(got) != 2 || got[0]["k"] != "a" {
		t.Fatalf("after $out: %v", got)
	}
	specs, err := dst.Indexes().ListSpecifications(ctx(t))
	if err != nil || len(specs) != 2 {
		t.Fatalf("the target's indexes must survive $out: %v %v", specs, err)
	}
	// A result that violates the target's unique index leaves it as it was.
	insertDocs(t, src, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "a"}})
	_, err = src.Aggregate(ctx(t), out)
	if !serverCode(err, 11000) {
		t.Fatalf("$out with a duplicate key: %v", err)
	}
	if got := allDocs(t, dst); len(got) != 2 {
		t.Fatalf("after a failed $out: %v", got)
	}
	names, _ := db.ListCollectionNames(ctx(t), bson.D{})
	if len(names) != 2 {
		t.Fatalf("the temporary collection must go: %v", names)
	}
}

func TestMergeModes(t *testing.T) {
	_, db, _ := connect(t)
	src, dst := db.Collection("src"), db.Collection("dst")
	insertDocs(t, src, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}})
	insertDocs(t, dst, bson.D{{Key: "_id", Value: 1}, {Key: "b", Value: 1}})
	merge := func(spec bson.D) error {
		_, err := src.Aggregate(ctx(t), mongo.Pipeline{{{Key: "$merge", Value: spec}}})
		return err
	}
	if err := merge(bson.D{{Key: "into", Value: "dst"}}); err != nil {
		t.Fatal(err)
	}
	got := allDocs(t, dst)
	if len(got) != 2 || got[0]["a"] != int32(1) || got[0]["b"] != int32(1) {
		t.Fatalf("merge/insert: %v", got)
	}
	if err := merge(bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: "replace"}}); err != nil {
		t.Fatal(err)
	}
	if got := allDocs(t, dst); got[0]["b"] != nil {
		t.Fatalf("replace kept a field: %v", got)
	}
	pipeline := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "sum", Value: bson.D{{Key: "$add", Value: bson.A{"$a", "$$new.a"}}}}}}}}
	if err := merge(bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: pipeline}}); err != nil {
		t.Fatal(err)
	}
	if got := allDocs(t, dst); got[1]["sum"] != int32(4) {
		t.Fatalf("pipeline with $$new: %v", got)
	}
	if err := merge(bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: "fail"}}); !serverCode(err, 11000) {
		t.Fatalf("whenMatched fail: %v", err)
	}
	if err := merge(bson.D{{Key: "into", Value: "empty"}, {Key: "whenNotMatched", Value: "fail"}}); !serverCode(err, 13113) {
		t.Fatalf("whenNotMatched fail: %v", err)
	}
	if err := merge(bson.D{{Key: "into", Value: "dst"}, {Key: "on", Value: "a"}}); !serverCode(err, 51183) {
		t.Fatalf("on without a unique index: %v", err)
	}
}

func TestCollation(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("c")
	insertDocs(t, c,
		bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: "ping"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "s", Value: "PING"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "s", Value: "píng"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "s", Value: "b"}},
	)
	count := func(coll *options.Collation) int64 {
		n, err := c.CountDocuments(ctx(t), bson.D{{Key: "s", Value: "ping"}}, options.Count().SetCollation(coll))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(nil); n != 1 {
		t.Fatalf("simple: %d", n)
	}
	if n := count(&options.Collation{Locale: "en", Strength: 2}); n != 2 {
		t.Fatalf("strength 2 (case-insensitive): %d", n)
	}
	if n := count(&options.Collation{Locale: "en_US", Strength: 1}); n != 3 {
		t.Fatalf("strength 1 (accent-insensitive): %d", n)
	}
	// Sorting: "b" sorts after every "ping" under en, before them bytewise
	// only against the upper-case one.
	cur, err := c.Find(ctx(t), bson.D{}, options.Find().SetSort(bson.D{{Key: "s", Value: 1}, {Key: "_id", Value: 1}}).SetCollation(&options.Collation{Locale: "en"}))
	if err != nil {
		t.Fatal(err)
	}
	var sorted []bson.M
	if err := cur.All(ctx(t), &sorted); err != nil {
		t.Fatal(err)
	}
	if sorted[0]["s"] != "b" || sorted[1]["s"] != "ping" || sorted[2]["s"] != "PING" {
		t.Fatalf("en sort: %v", sorted)
	}
	vals, err := c.Distinct(ctx(t), "s", bson.D{}, options.Distinct().SetCollation(&options.Collation{Locale: "en", Strength: 1})).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := vals.Values(); len(n) != 2 {
		t.Fatalf("distinct under strength 1: %v", vals)
	}
	// What mongotest does not implement is refused, never approximated.
	for name, coll := range map[string]*options.Collation{
		"caseFirst": {Locale: "en", CaseFirst: "upper"},
		"shifted":   {Locale: "en", Alternate: "shifted"},
		"strength4": {Locale: "en", Strength: 4},
		"backwards": {Locale: "fr", Backwards: true},
	} {
		if _, err := c.CountDocuments(ctx(t), bson.D{}, options.Count().SetCollation(coll)); !serverCode(err, 238) {
			t.Errorf("%s: %v, want NotImplemented (238)", name, err)
		}
	}
	err = db.CreateCollection(ctx(t), "withDefault", options.CreateCollection().SetCollation(&options.Collation{Locale: "en"}))
	if !serverCode(err, 238) {
		t.Fatalf("a default collation: %v, want NotImplemented (238)", err)
	}
	_, err = c.Aggregate(ctx(t), mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "m", Value: bson.D{{Key: "$max", Value: "$s"}}}}}}},
		options.Aggregate().SetCollation(&options.Collation{Locale: "en", Strength: 2}))
	if !serverCode(err, 238) {
		t.Fatalf("$max under a collation: %v, want NotImplemented (238)", err)
	}
	if err := c.FindOne(ctx(t), bson.D{}, options.FindOne().SetCollation(&options.Collation{Locale: "xx-nowhere"})).Err(); !serverCode(err, 2) {
		t.Fatalf("unknown locale: %v, want BadValue", err)
	}
}

func TestLetAndArrayFilters(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("c")
	insertDocs(t, c, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 5, 9}}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.A{2}}})
	byVar := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_id", "$$id"}}}}}
	var got bson.M
	if err := c.FindOne(ctx(t), byVar, options.FindOne()).Err(); !serverCode(err, 17276) {
		t.Fatalf("undefined variable: %v, want 17276", err)
	}
	cur, err := c.Find(ctx(t), byVar, options.Find().SetLet(bson.D{{Key: "id", Value: 2}}))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := cur.All(ctx(t), &docs); err != nil || len(docs) != 1 || docs[0]["_id"] != int32(2) {
		t.Fatalf("find with let: %v %v", docs, err)
	}
	if _, err := c.DeleteMany(ctx(t), byVar, options.DeleteMany().SetLet(bson.D{{Key: "Bad", Value: 1}})); !serverCode(err, 9) {
		t.Fatalf("invalid variable name: %v", err)
	}
	upd := bson.D{{Key: "$set", Value: bson.D{{Key: "a.$[big]", Value: 0}}}}
	if _, err := c.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: 1}}, upd,
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "big", Value: bson.D{{Key: "$gte", Value: 5}}}}})); err != nil {
		t.Fatal(err)
	}
	if err := c.FindOne(ctx(t), bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if a := got["a"].(bson.A); a[0] != int32(1) || a[1] != int32(0) || a[2] != int32(0) {
		t.Fatalf("arrayFilters: %v", a)
	}
}

func TestValidatorHintsViewsAndIDs(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("c")
	insertDocs(t, c, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "s"}})
	mod := bson.D{{Key: "collMod", Value: "c"}, {Key: "validator", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$type", Value: "string"}}}}}}
	if err := db.RunCommand(ctx(t), mod).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}})
	if !serverCode(err, 121) {
		t.Fatalf("invalid insert: %v, want DocumentValidationFailure (121)", err)
	}
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}, options.InsertOne().SetBypassDocumentValidation(true)); err != nil {
		t.Fatalf("bypassDocumentValidation: %v", err)
	}
	schema := bson.D{{Key: "collMod", Value: "c"}, {Key: "validator", Value: bson.D{{Key: "$jsonSchema", Value: bson.D{}}}}}
	if err := db.RunCommand(ctx(t), schema).Err(); !serverCode(err, 238) {
		t.Fatalf("$jsonSchema: %v, want NotImplemented (238)", err)
	}

	if err := c.FindOne(ctx(t), bson.D{}, options.FindOne().SetHint("nope_1")).Err(); !serverCode(err, 2) {
		t.Fatalf("hint of no index: %v, want BadValue", err)
	}
	if err := c.FindOne(ctx(t), bson.D{}, options.FindOne().SetHint(bson.D{{Key: "_id", Value: 1}})).Err(); err != nil {
		t.Fatalf("hint of the _id index: %v", err)
	}

	if err := db.CreateView(ctx(t), "v", "c", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "x", Value: "s"}}}}}); err != nil {
		t.Fatal(err)
	}
	v := db.Collection("v")
	if n, err := v.CountDocuments(ctx(t), bson.D{}); err != nil || n != 1 {
		t.Fatalf("count through a view: %d %v", n, err)
	}
	if _, err := v.DeleteMany(ctx(t), bson.D{}); !serverCode(err, 166) {
		t.Fatalf("delete on a view: %v, want CommandNotSupportedOnView", err)
	}

	_, err = c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: bson.D{{Key: "$a", Value: 1}}}})
	if !serverCode(err, 52) {
		t.Fatalf("$-prefixed name in _id: %v, want 52", err)
	}
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 5}, {Key: "$a", Value: "s"}, {Key: "x", Value: "s"}, {Key: "a.b", Value: 1}}); err != nil {
		t.Fatalf("top-level $ and dotted names are storable since 5.0: %v", err)
	}
}

func TestClientBulkWriteInTransaction(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("c")
	insertDocs(t, c, bson.D{{Key: "_id", Value: 1}})
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	ins := func(id int) mongo.ClientBulkWrite {
		return mongo.ClientBulkWrite{Database: db.Name(), Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: id}})}
	}
	sctx := mongo.NewSessionContext(ctx(t), sess)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.BulkWrite(sctx, []mongo.ClientBulkWrite{ins(2), ins(3)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 1 {
		t.Fatalf("uncommitted writes visible: %d documents", n)
	}
	if err := sess.CommitTransaction(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 3 {
		t.Fatalf("after commit: %d documents, want 3", n)
	}
	// A failed operation aborts the transaction: nothing of it commits.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	_, err = client.BulkWrite(sctx, []mongo.ClientBulkWrite{ins(4), ins(1)})
	var cbe mongo.ClientBulkWriteException
	if !errors.As(err, &cbe) || cbe.WriteErrors[1].Code != 11000 {
		t.Fatalf("duplicate in a transaction: %v", err)
	}
	if err := sess.CommitTransaction(ctx(t)); !serverCode(err, 251) {
		t.Fatalf("commit after a failed write: %v, want NoSuchTransaction (251)", err)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 3 {
		t.Fatalf("an aborted transaction left writes: %d documents", n)
	}
}

// TestFindLimitBeyondOneReply: a find whose limit fits its batch size but
// whose documents pass 16 MiB returns the first 16 MiB and leaves a cursor
// open for the rest of the limit, as a real server does (the cursor is
// closed with the first batch only when it holds the whole result).
func TestFindLimitBeyondOneReply(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("big")
	pad := string(make([]byte, 1<<20))
	for i := range 24 {
		insertDocs(t, c, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}})
	}
	reply, err := db.RunCommand(ctx(t), bson.D{{Key: "find", Value: "big"}, {Key: "filter", Value: bson.D{}},
		{Key: "limit", Value: 20}, {Key: "batchSize", Value: 100}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	id := reply.Lookup("cursor", "id").Int64()
	if len(first) >= 20 || id == 0 {
		t.Fatalf("first batch %d documents, cursor %d: want under 16 MiB's worth and an open cursor", len(first), id)
	}
	more, err := db.RunCommand(ctx(t), bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "big"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := more.Lookup("cursor", "nextBatch").Array().Values()
	if len(first)+len(rest) != 20 || more.Lookup("cursor", "id").Int64() != 0 {
		t.Fatalf("%d + %d documents, cursor %d: want the limit's 20 and the cursor closed", len(first), len(rest), more.Lookup("cursor", "id").Int64())
	}
	// Within one reply, the first batch closes the cursor.
	small, err := db.RunCommand(ctx(t), bson.D{{Key: "find", Value: "big"}, {Key: "limit", Value: 3}, {Key: "batchSize", Value: 3}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := small.Lookup("cursor", "firstBatch").Array().Values(); len(n) != 3 || small.Lookup("cursor", "id").Int64() != 0 {
		t.Fatalf("limit 3: %d documents, cursor %d; want 3 and closed", len(n), small.Lookup("cursor", "id").Int64())
	}
}
