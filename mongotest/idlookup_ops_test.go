package mongotest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The commands the _id index path serves, each as an idOp: run it with a
// filter and it returns what the command replied (documents, counts,
// distinct values) for both() to compare. A write's reply is followed by
// the collection's contents as x sees them, so that the documents it
// touched are compared too.

type idOp struct {
	name  string
	write bool
	run   func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error)
}

// val encodes v as the document {_id: v}, the form generated() normalises.
func val(v any) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_id", Value: v}})
	if err != nil {
		panic(err)
	}
	return b
}

// withContents appends the collection's contents as x sees them to a
// write's reply.
func withContents(x context.Context, c *mongo.Collection, reply ...bson.Raw) ([]bson.Raw, error) {
	docs, err := findRaw(x, c, bson.D{})
	return append(reply, docs...), err
}

func idOps() []idOp {
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: true}}}}
	return []idOp{
		{name: "find", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findRaw(x, c, f)
		}},
		{name: "find limit 2", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findRaw(x, c, f, options.Find().SetLimit(2))
		}},
		{name: "find sorted", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findRaw(x, c, f, options.Find().SetSort(bson.D{{Key: "k", Value: -1}}).SetProjection(bson.D{{Key: "i", Value: 0}}))
		}},
		{name: "count", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			n, err := c.CountDocuments(x, f)
			return []bson.Raw{val(n)}, err
		}},
		{name: "distinct", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			arr, err := c.Distinct(x, "k", f).Raw()
			return []bson.Raw{bson.Raw(arr)}, err
		}},
		{name: "aggregate", run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return aggRaw(x, c, mongo.Pipeline{{{Key: "$match", Value: f}}, {{Key: "$project", Value: bson.D{{Key: "k", Value: 1}}}}})
		}},
		{name: "updateMany", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.UpdateMany(x, f, set)
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.MatchedCount), val(res.ModifiedCount))
		}},
		{name: "updateOne upsert", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.UpdateOne(x, f, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.MatchedCount), val(res.UpsertedCount), val(res.UpsertedID))
		}},
		{name: "replaceOne", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.ReplaceOne(x, f, bson.D{{Key: "replaced", Value: true}})
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.MatchedCount), val(res.ModifiedCount))
		}},
		{name: "deleteMany", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.DeleteMany(x, f)
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.DeletedCount))
		}},
		{name: "deleteOne", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.DeleteOne(x, f)
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.DeletedCount))
		}},
		{name: "findOneAndUpdate", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findAndModify(x, c, c.FindOneAndUpdate(x, f, set, options.FindOneAndUpdate().SetReturnDocument(options.After)))
		}},
		{name: "findOneAndUpdate sorted upsert", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findAndModify(x, c, c.FindOneAndUpdate(x, f, set, options.FindOneAndUpdate().SetSort(bson.D{{Key: "i", Value: -1}}).SetUpsert(true)))
		}},
		{name: "findOneAndReplace", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findAndModify(x, c, c.FindOneAndReplace(x, f, bson.D{{Key: "replaced", Value: true}}))
		}},
		{name: "findOneAndDelete", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			return findAndModify(x, c, c.FindOneAndDelete(x, f))
		}},
		{name: "bulkWrite", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			res, err := c.BulkWrite(x, []mongo.WriteModel{
				mongo.NewUpdateOneModel().SetFilter(f).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}),
				mongo.NewDeleteOneModel().SetFilter(f),
				mongo.NewUpdateManyModel().SetFilter(f).SetUpdate(set),
				mongo.NewReplaceOneModel().SetFilter(f).SetReplacement(bson.D{{Key: "replaced", Value: true}}).SetUpsert(true),
				mongo.NewDeleteManyModel().SetFilter(f),
			})
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.MatchedCount), val(res.ModifiedCount), val(res.DeletedCount), val(res.UpsertedCount))
		}},
		{name: "client bulkWrite", write: true, run: func(x context.Context, c *mongo.Collection, f bson.D) ([]bson.Raw, error) {
			db, coll := c.Database().Name(), c.Name()
			res, err := c.Database().Client().BulkWrite(x, []mongo.ClientBulkWrite{
				{Database: db, Collection: coll, Model: mongo.NewClientUpdateOneModel().SetFilter(f).SetUpdate(set)},
				{Database: db, Collection: coll, Model: mongo.NewClientDeleteOneModel().SetFilter(f)},
				{Database: db, Collection: coll, Model: mongo.NewClientUpdateManyModel().SetFilter(f).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})},
				{Database: db, Collection: coll, Model: mongo.NewClientDeleteManyModel().SetFilter(f)},
			})
			if err != nil {
				return nil, err
			}
			return withContents(x, c, val(res.MatchedCount), val(res.ModifiedCount), val(res.DeletedCount))
		}},
	}
}

// scenarioCtx bounds one scenario of a differential test.
func scenarioCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// findAndModify returns a findAndModify's document (or a marker for
// none) and the contents after it.
func findAndModify(x context.Context, c *mongo.Collection, res *mongo.SingleResult) ([]bson.Raw, error) {
	doc, err := res.Raw()
	if err == mongo.ErrNoDocuments {
		doc, err = val("no document"), nil
	}
	if err != nil {
		return nil, err
	}
	return withContents(x, c, doc)
}

// seedIDs fills c with idDocs, then deletes "a" and inserts it again, so
// that natural order is not the order of idDocs.
func seedIDs(t *testing.T, x context.Context, c *mongo.Collection) {
	t.Helper()
	if err := c.Drop(x); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for _, d := range idDocs() {
		docs = append(docs, d)
	}
	mustDo(t, func() error { _, err := c.InsertMany(x, docs); return err })
	mustDo(t, func() error { _, err := c.DeleteOne(x, bson.D{{Key: "_id", Value: "a"}}); return err })
	mustDo(t, func() error {
		_, err := c.InsertOne(x, bson.D{{Key: "_id", Value: "a"}, {Key: "k", Value: int32(1)}, {Key: "i", Value: int32(99)}})
		return err
	})
}

// changeOutside changes c outside any transaction, after a snapshot: 3.5
// deleted, "b" replaced, NumberLong(2) deleted and 2.0 inserted in its
// place (the same _id key, a new record), "zz" inserted.
func changeOutside(t *testing.T, x context.Context, c *mongo.Collection) {
	t.Helper()
	mustDo(t, func() error { _, err := c.DeleteOne(x, bson.D{{Key: "_id", Value: 3.5}}); return err })
	mustDo(t, func() error {
		_, err := c.ReplaceOne(x, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "k", Value: int32(2)}, {Key: "i", Value: int32(50)}})
		return err
	})
	mustDo(t, func() error { _, err := c.DeleteOne(x, bson.D{{Key: "_id", Value: int64(2)}}); return err })
	mustDo(t, func() error {
		_, err := c.InsertMany(x, []any{
			bson.D{{Key: "_id", Value: 2.0}, {Key: "k", Value: int32(0)}, {Key: "i", Value: int32(51)}},
			bson.D{{Key: "_id", Value: "zz"}, {Key: "k", Value: int32(1)}, {Key: "i", Value: int32(52)}},
		})
		return err
	})
}

// changeInside changes c in the transaction of x: "new" inserted, "ab"
// updated, true deleted.
func changeInside(t *testing.T, x context.Context, c *mongo.Collection) {
	t.Helper()
	mustDo(t, func() error {
		_, err := c.InsertOne(x, bson.D{{Key: "_id", Value: "new"}, {Key: "k", Value: int32(2)}, {Key: "i", Value: int32(60)}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.UpdateOne(x, bson.D{{Key: "_id", Value: "ab"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: int32(0)}}}})
		return err
	})
	mustDo(t, func() error { _, err := c.DeleteOne(x, bson.D{{Key: "_id", Value: true}}); return err })
}

// opGroups returns the reads as one group (they change nothing, so one
// collection serves them all) and the writes as one group each (each on a
// collection of its own), or all the writes as one group when chain.
func opGroups(chain bool) [][]idOp {
	var reads, writes []idOp
	for _, op := range idOps() {
		if op.write {
			writes = append(writes, op)
		} else {
			reads = append(reads, op)
		}
	}
	groups := [][]idOp{reads}
	if chain {
		return append(groups, writes)
	}
	for _, w := range writes {
		groups = append(groups, []idOp{w})
	}
	return groups
}

// runOps runs a group of operations one after the other with the same
// filter and returns their replies, each after a document naming it; it
// stops at the first error.
func runOps(x context.Context, c *mongo.Collection, ops []idOp, f bson.D) ([]bson.Raw, error) {
	var out []bson.Raw
	for _, op := range ops {
		reply, err := op.run(x, c, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.name, err)
		}
		out = append(append(out, val(op.name)), reply...)
	}
	return out, nil
}

func groupName(ops []idOp) string {
	if len(ops) == 1 {
		return ops[0].name
	}
	if ops[0].write {
		return "the writes"
	}
	return "the reads"
}

// Every command, outside transactions, on a collection whose natural
// order is not its insertion order: the same replies and the same
// documents written either way.
func TestIDLookupCommandsMatchScan(t *testing.T) {
	_, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	c := db.Collection("cmds")
	for _, ops := range opGroups(false) {
		for _, f := range idFilters() {
			both(t, srv, groupName(ops)+" "+fmt.Sprint(f), func() ([]bson.Raw, error) {
				x, cancel := scenarioCtx()
				defer cancel()
				seedIDs(t, x, c)
				return runOps(x, c, ops, f)
			})
		}
	}
}

// Every command in a transaction whose snapshot predates changeOutside and
// which made changeInside itself, and every command outside a transaction
// that is open but has written nothing (so the deleted records its
// snapshot may read are still kept, and nothing waits for it to end):
// the same replies, the same view inside, the same contents after the
// commit either way. Writes to documents changed since the snapshot fail
// with the same WriteConflict either way. (Beside the transaction the
// writes run as one group: none of them conflicts.)
func TestIDLookupTransactionsMatchScan(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	c := db.Collection("txn")
	for _, where := range []string{"inside", "beside"} {
		for _, ops := range opGroups(where == "beside") {
			for _, f := range idFilters() {
				both(t, srv, where+" a transaction: "+groupName(ops)+" "+fmt.Sprint(f), func() ([]bson.Raw, error) {
					x, cancel := scenarioCtx()
					defer cancel()
					seedIDs(t, x, c)
					sess, err := client.StartSession()
					if err != nil {
						t.Fatal(err)
					}
					defer sess.EndSession(x)
					sx := mongo.NewSessionContext(x, sess)
					if err := sess.StartTransaction(); err != nil {
						t.Fatal(err)
					}
					if _, err := findRaw(sx, c, bson.D{{Key: "_id", Value: "none"}}); err != nil { // takes the snapshot
						t.Fatal(err)
					}
					changeOutside(t, x, c)
					opx := x
					if where == "inside" {
						changeInside(t, sx, c)
						opx = sx
					}
					reply, err := runOps(opx, c, ops, f)
					if err != nil {
						_ = sess.AbortTransaction(x)
						return nil, err
					}
					view, err := findRaw(sx, c, bson.D{})
					if err != nil {
						_ = sess.AbortTransaction(x)
						return nil, fmt.Errorf("the transaction's view: %w", err)
					}
					out := append(append(reply, val("the transaction's view")), view...)
					if err := sess.CommitTransaction(x); err != nil {
						return nil, fmt.Errorf("commit: %w", err)
					}
					after, err := findRaw(x, c, bson.D{})
					return append(append(out, val("after the commit")), after...), err
				})
			}
		}
	}
}

// Every read in a snapshot session whose atClusterTime predates
// changeOutside: the same replies either way.
func TestIDLookupSnapshotReadsMatchScan(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (ScanOnly)")
	}
	c := db.Collection("snap")
	reads := opGroups(false)[0]
	for _, f := range idFilters() {
		both(t, srv, "snapshot reads "+fmt.Sprint(f), func() ([]bson.Raw, error) {
			x, cancel := scenarioCtx()
			defer cancel()
			seedIDs(t, x, c)
			sess, err := client.StartSession(options.Session().SetSnapshot(true))
			if err != nil {
				t.Fatal(err)
			}
			defer sess.EndSession(x)
			sx := mongo.NewSessionContext(x, sess)
			if _, err := findRaw(sx, c, bson.D{{Key: "_id", Value: "none"}}); err != nil { // fixes atClusterTime
				t.Fatal(err)
			}
			changeOutside(t, x, c)
			return runOps(sx, c, reads, f)
		})
	}
}
