package mongotest_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestOplogCountsATransactionOnce: a real server logs a transaction's
// writes as one applyOps oplog entry, so OplogMaxEntries counts them as
// one and drops them together: with room for five entries, a transaction
// of ten inserts and four inserts after it are all still in the oplog (a
// stream resumes inside the transaction); one more insert drops the whole
// transaction.
func TestOplogCountsATransactionOnce(t *testing.T) {
	client, db, srv := connect(t, mongotest.OplogMaxEntries(5))
	if srv == nil {
		t.Skip("needs the emulator's small oplog (OplogMaxEntries)")
	}
	ctx := ctx(t)
	c := db.Collection("txn")
	if err := db.CreateCollection(ctx, "txn"); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		for i := range 10 {
			if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	first := cs.ResumeToken() // the transaction's first write
	for i := 10; i < 14; i++ {
		mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); return err })
	}
	again, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(first))
	if err != nil {
		t.Fatalf("resume inside a transaction with four entries after it in a five-entry oplog: %v", err)
	}
	for want := 1; want < 14; want++ {
		if ev := next(t, again); ev["documentKey"].(bson.D)[0].Value != int32(want) {
			t.Fatalf("event %d after resuming: %v", want, ev["documentKey"])
		}
	}
	again.Close(ctx)
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 14}}); return err })
	_, err = c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(first))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(286) {
		t.Fatalf("resume inside a transaction pushed out of the oplog: %v, want ChangeStreamHistoryLost (286)", err)
	}
}
