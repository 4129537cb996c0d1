package mongotest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestTransactionCommitAppearsAtomicallyInChangeStreams(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("acct")
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}})
		return err
	})
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	// An aborted transaction leaves no trace.
	mustDo(t, func() error { return sess.StartTransaction() })
	sctx := mongo.NewSessionContext(ctx, sess)
	mustDo(t, func() error { _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: "ghost"}}); return err })
	mustDo(t, func() error { return sess.AbortTransaction(ctx) })
	// A committed one shows as its writes, in order, with one clusterTime.
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: "b"}, {Key: "n", Value: 2}}); err != nil {
			return nil, err
		}
		if _, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}); err != nil {
			return nil, err
		}
		_, err := c.DeleteOne(sctx, bson.D{{Key: "_id", Value: "b"}})
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []bson.M
	for range 3 {
		evs = append(evs, next(t, cs))
	}
	want := []string{"insert", "update", "delete"}
	for i, ev := range evs {
		if ev["operationType"] != want[i] {
			t.Fatalf("event %d = %v, want %s", i, ev["operationType"], want[i])
		}
		if ev["clusterTime"] != evs[0]["clusterTime"] {
			t.Fatalf("transaction events have different clusterTimes: %v and %v", evs[0]["clusterTime"], ev["clusterTime"])
		}
		if ev["txnNumber"] == nil || ev["lsid"] == nil {
			t.Fatalf("transaction event without lsid/txnNumber: %v", ev)
		}
		if i > 0 && tokenData(evs[i-1]) >= tokenData(ev) {
			t.Fatal("transaction event tokens not ordered by txnOpIndex")
		}
	}
	if sub(evs[0], "documentKey")["_id"] == "ghost" {
		t.Fatal("aborted transaction reached the change stream")
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: "ghost"}}); n != 0 {
		t.Fatal("aborted insert is visible")
	}
}

func TestTransactionWriteConflictAndSnapshot(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("doc")
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 1}})
		return err
	})
	s1, _ := client.StartSession()
	defer s1.EndSession(ctx)
	s2, _ := client.StartSession()
	defer s2.EndSession(ctx)
	c1 := mongo.NewSessionContext(ctx, s1)
	c2 := mongo.NewSessionContext(ctx, s2)
	mustDo(t, func() error { return s1.StartTransaction() })
	mustDo(t, func() error { return s2.StartTransaction() })
	read := func(sctx context.Context) int32 {
		var d struct {
			V int32 `bson:"v"`
		}
		if err := c.FindOne(sctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d.V
	}
	if v := read(c2); v != 1 {
		t.Fatalf("transaction 2 reads v=%d, want 1", v)
	}
	mustDo(t, func() error {
		_, err := c.UpdateOne(c1, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 2}}}})
		return err
	})
	// Transaction 2 still sees its snapshot, and cannot write the document.
	if v := read(c2); v != 1 {
		t.Fatalf("transaction 2 sees an uncommitted write: v=%d", v)
	}
	_, err := c.UpdateOne(c2, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 3}}}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(112) || !se.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("second writer: %v, want WriteConflict (112) labelled TransientTransactionError", err)
	}
	// The conflict aborted transaction 2.
	_, err = c.InsertOne(c2, bson.D{{Key: "x", Value: 1}})
	if !errors.As(err, &se) || !se.HasErrorCode(251) {
		t.Fatalf("after the conflict: %v, want NoSuchTransaction (251)", err)
	}
	_ = s2.AbortTransaction(ctx)
	if v := read(ctx); v != 1 {
		t.Fatalf("outside reader sees uncommitted v=%d", v)
	}
	mustDo(t, func() error { return s1.CommitTransaction(ctx) })
	if v := read(ctx); v != 2 {
		t.Fatalf("after commit v=%d, want 2", v)
	}
	// A transaction whose snapshot predates a committed write conflicts.
	mustDo(t, func() error { return s2.StartTransaction() })
	if v := read(c2); v != 2 {
		t.Fatalf("new transaction reads v=%d, want 2", v)
	}
	mustDo(t, func() error {
		_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 4}}}})
		return err
	})
	if v := read(c2); v != 2 {
		t.Fatalf("snapshot read after an outside commit: v=%d, want 2", v)
	}
	_, err = c.UpdateOne(c2, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}})
	if !errors.As(err, &se) || !se.HasErrorCode(112) {
		t.Fatalf("write to a document changed after the snapshot: %v, want WriteConflict", err)
	}
	_ = s2.AbortTransaction(ctx)
}

// TestTransactionsUnderConcurrency moves money between accounts from many
// goroutines with transactions (retrying on TransientTransactionError) while
// readers check that the total never changes: nobody sees half a
// transaction, and every conflict is resolved by a retry.
func TestTransactionsUnderConcurrency(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("bank")
	const accounts, start = 5, 100
	for i := range accounts {
		mustDo(t, func() error {
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "bal", Value: start}})
			return err
		})
	}
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	const workers, transfers = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := client.StartSession()
			if err != nil {
				errs <- err
				return
			}
			defer sess.EndSession(context.Background())
			for i := range transfers {
				from, to := (w+i)%accounts, (w+i+1)%accounts
				_, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
					if _, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: from}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "bal", Value: -1}}}}); err != nil {
						return nil, err
					}
					_, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: to}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "bal", Value: 1}}}})
					return nil, err
				}, options.Transaction())
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-allDone:
				return
			default:
			}
			cur, err := c.Find(ctx, bson.D{})
			if err != nil {
				errs <- err
				return
			}
			var docs []struct {
				Bal int32 `bson:"bal"`
			}
			if err := cur.All(ctx, &docs); err != nil {
				errs <- err
				return
			}
			total := int32(0)
			for _, d := range docs {
				total += d.Bal
			}
			if total != accounts*start {
				errs <- errors.New("a reader saw half a transaction")
				return
			}
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The change stream holds exactly the committed updates, two per
	// transfer, in pairs sharing a clusterTime.
	for i := 0; i < workers*transfers; i++ {
		a, b := next(t, cs), next(t, cs)
		if a["clusterTime"] != b["clusterTime"] || a["txnNumber"] != b["txnNumber"] {
			t.Fatalf("transfer %d: its two updates are not one transaction: %v / %v", i, a, b)
		}
	}
	c2, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if cs.TryNext(c2) {
		t.Fatalf("extra event after all transfers: %v", cs.Current)
	}
}
