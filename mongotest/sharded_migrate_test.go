package mongotest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestShardedMigrationSameID: _id is unique per shard only, so a chunk
// whose document shares its _id with a document the recipient owns cannot
// move (a real migration fails with a duplicate key error on the
// recipient's _id index): moveChunk fails, and both documents stay where
// they were. A chunk without such a clash moves.
func TestShardedMigrationSameID(t *testing.T) {
	client, sc := emulatedCluster(t, "reads each shard")
	admin := client.Database("admin")
	c := client.Database("shop").Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "region", Value: 1}})
	adminCommand(t, client, bson.D{{Key: "split", Value: "shop.orders"}, {Key: "middle", Value: bson.D{{Key: "region", Value: "m"}}}})
	adminCommand(t, client, bson.D{{Key: "moveChunk", Value: "shop.orders"}, {Key: "find", Value: bson.D{{Key: "region", Value: "us"}}}, {Key: "to", Value: "shard1"}})
	for _, d := range []bson.D{
		{{Key: "_id", Value: 1}, {Key: "region", Value: "eu"}},
		{{Key: "_id", Value: 1}, {Key: "region", Value: "us"}},
		{{Key: "_id", Value: 2}, {Key: "region", Value: "eu"}},
	} {
		if _, err := c.InsertOne(ctx(t), d); err != nil {
			t.Fatal(err)
		}
	}
	err := admin.RunCommand(ctx(t), bson.D{{Key: "moveChunk", Value: "shop.orders"}, {Key: "find", Value: bson.D{{Key: "region", Value: "eu"}}}, {Key: "to", Value: "shard1"}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "E11000") {
		t.Errorf("moving eu's chunk onto the shard holding {region: us, _id: 1}: %v; want a duplicate key error", err)
	}
	if got := findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "region", Value: 1}, {Key: "_id", Value: 1}})); len(got) != 3 {
		t.Errorf("after the failed move: %v; want the 3 documents", got)
	}
	if n := len(shardDocs(t, sc.Shards()[0], "shop", "orders")); n != 2 {
		t.Errorf("shard0 holds %d documents; want eu's 2", n)
	}
	// Without the clash the chunk moves.
	if _, err := c.DeleteOne(ctx(t), bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: "us"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "moveChunk", Value: "shop.orders"}, {Key: "find", Value: bson.D{{Key: "region", Value: "eu"}}}, {Key: "to", Value: "shard1"}}).Err(); err != nil {
		t.Fatalf("moveChunk without a clash: %v", err)
	}
	if n := len(shardDocs(t, sc.Shards()[1], "shop", "orders")); n != 2 {
		t.Errorf("shard1 holds %d documents after the move; want eu's 2", n)
	}
}

// TestShardedUpdateLookupAfterMigration: updateLookup finds a document
// where it lives when the event is read, as a real shard's routed lookup
// does: an update whose document moved to another shard before the
// stream read it still gets its fullDocument.
func TestShardedUpdateLookupAfterMigration(t *testing.T) {
	client, _ := emulatedCluster(t, "", mongotest.NoopInterval(200*time.Millisecond))
	db := client.Database("shop")
	c := db.Collection("items")
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}})
	s, _ := openRaw(t, db, "items", bson.D{{Key: "fullDocument", Value: "updateLookup"}})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "a"}, {Key: "k", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateOne(ctx(t), bson.D{{Key: "k", Value: 5}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	adminCommand(t, client, bson.D{{Key: "moveChunk", Value: "shop.items"}, {Key: "find", Value: bson.D{{Key: "k", Value: 5}}}, {Key: "to", Value: "shard1"}})
	evs := s.collect(2, 10*time.Second)
	up := evs[1]
	if up.Lookup("operationType").StringValue() != "update" {
		t.Fatalf("second event %s; want the update", up)
	}
	if fd, ok := up.Lookup("fullDocument").DocumentOK(); !ok || fd.Lookup("v").Int32() != 1 {
		t.Errorf("the update's fullDocument after its document moved: %s; want {_id: a, k: 5, v: 1}", up.Lookup("fullDocument"))
	}
}

// TestShardedMigrationWaitsOnlyForItsTransactions: a chunk migration is
// refused (ConflictingOperationInProgress, 117: retry) while a transaction
// that wrote to its collection is open on the donor, not while one writes
// to another collection there (a consumer's ledger and checkpoints, in
// the same shard); once the transaction commits, the chunk moves.
func TestShardedMigrationWaitsOnlyForItsTransactions(t *testing.T) {
	client, sc := emulatedCluster(t, "")
	admin := client.Database("admin")
	c := client.Database("shop").Collection("items")
	other := client.Database("shop").Collection("ledger") // unsharded: on shop's primary shard, the donor
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	move := func(to string) error {
		return admin.RunCommand(ctx(t), bson.D{{Key: "moveChunk", Value: "shop.items"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: to}}).Err()
	}
	inTxn := func(coll *mongo.Collection, doc bson.D) (commit func()) {
		t.Helper()
		sess, err := client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		if _, err := coll.InsertOne(mongo.NewSessionContext(ctx(t), sess), doc); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := sess.CommitTransaction(ctx(t)); err != nil {
				t.Fatal(err)
			}
			sess.EndSession(ctx(t))
		}
	}
	commitOther := inTxn(other, bson.D{{Key: "_id", Value: "a"}})
	if err := move("shard1"); err != nil {
		t.Fatalf("moveChunk while a transaction on another collection is open on the donor: %v; want it to move", err)
	}
	commitOther()
	commitItems := inTxn(c, bson.D{{Key: "k", Value: 2}})
	err := move("shard0")
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 117 {
		t.Fatalf("moveChunk while a transaction that wrote to the collection is open on the donor: %v; want ConflictingOperationInProgress (117)", err)
	}
	commitItems()
	if err := move("shard0"); err != nil {
		t.Fatalf("moveChunk after the transaction committed: %v", err)
	}
	if n := len(shardDocs(t, sc.Shards()[0], "shop", "items")); n != 2 {
		t.Errorf("shard0 holds %d documents of items after the move back; want 2", n)
	}
}
