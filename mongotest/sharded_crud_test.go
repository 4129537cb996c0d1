package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// emulatedCluster is a client of an emulated cluster of 2 shards
// started with opts (mongotest.ShardedClient), and the cluster, for a
// test that drives it beyond what a client can (reads a shard, its
// options, its fail points): against $FERRY_TEST_MONGODB_SHARDED_URI it
// skips, saying why (reason, when not "").
func emulatedCluster(t *testing.T, reason string, opts ...mongotest.Option) (*mongo.Client, *mongotest.ShardedServer) {
	t.Helper()
	client, sc := mongotest.ShardedClient(t, 2, opts...)
	if sc == nil {
		if reason != "" {
			t.Skip(reason + ": needs the emulated cluster")
		}
		t.Skip("needs the emulated cluster")
	}
	return client, sc
}

// adminCommand runs cmd on the admin database through the mongos; an
// error fails the test, naming the command.
func adminCommand(t *testing.T, client *mongo.Client, cmd bson.D) {
	t.Helper()
	if err := client.Database("admin").RunCommand(ctx(t), cmd).Err(); err != nil {
		t.Fatalf("%s: %v", cmd[0].Key, err)
	}
}

// insertEach inserts doc(i) into c for each i from from to to-1, one
// insert at a time.
func insertEach(t *testing.T, c *mongo.Collection, from, to int, doc func(i int) bson.D) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := c.InsertOne(ctx(t), doc(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// shardCollection shards db.coll with key through the mongos.
func shardCollection(t *testing.T, client *mongo.Client, ns string, key bson.D) {
	t.Helper()
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key}}).Err(); err != nil {
		t.Fatalf("shardCollection %s: %v", ns, err)
	}
}

func findAll(t *testing.T, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []bson.M {
	t.Helper()
	cur, err := c.Find(ctx(t), filter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.M
	if err := cur.All(ctx(t), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShardedHashedCollection: a collection sharded on {_id: "hashed"} is
// split into a chunk per shard (config.chunks), its documents spread over
// both shards, and every read and write through the mongos sees one
// collection: a merged find with sort, skip, limit and projection; count;
// distinct; aggregate; broadcast and targeted updates and deletes; an
// updateOne that does not pin the shard key.
func TestShardedHashedCollection(t *testing.T) {
	client, sc := emulatedCluster(t, "reads each shard")
	c := client.Database("shop").Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "_id", Value: "hashed"}})
	chunks := findAll(t, client.Database("config").Collection("chunks"), bson.D{}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if len(chunks) != 2 || chunks[0]["shard"] == chunks[1]["shard"] {
		t.Fatalf("config.chunks %v; want a chunk on each of the 2 shards", chunks)
	}
	colls := findAll(t, client.Database("config").Collection("collections"), bson.D{{Key: "_id", Value: "shop.orders"}})
	if len(colls) != 1 {
		t.Fatalf("config.collections %v; want shop.orders", colls)
	}
	docs := make([]any, 100)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 3}, {Key: "v", Value: i}}
	}
	if _, err := c.InsertMany(ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	for i, srv := range sc.Shards() {
		if n := len(shardDocs(t, srv, "shop", "orders")); n < 20 || n > 80 {
			t.Errorf("shard %d holds %d of 100 documents; want them spread by the hashed _id", i, n)
		}
	}
	got := findAll(t, c, bson.D{{Key: "v", Value: bson.D{{Key: "$gte", Value: 10}}}},
		options.Find().SetSort(bson.D{{Key: "v", Value: -1}}).SetSkip(2).SetLimit(3).SetProjection(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 0}}))
	if len(got) != 3 || got[0]["v"] != int32(97) || got[2]["v"] != int32(95) || len(got[0]) != 1 {
		t.Errorf("find sorted v desc, skip 2, limit 3, projected: %v; want v 97, 96, 95 alone", got)
	}
	if all := findAll(t, c, bson.D{}, options.Find().SetBatchSize(7)); len(all) != 100 {
		t.Errorf("find all in batches of 7: %d documents, want 100", len(all))
	}
	if n, err := c.CountDocuments(ctx(t), bson.D{{Key: "g", Value: 0}}); err != nil || n != 34 {
		t.Errorf("count g=0: %d (%v), want 34", n, err)
	}
	var distinct []int32
	if err := c.Distinct(ctx(t), "g", bson.D{}).Decode(&distinct); err != nil || len(distinct) != 3 {
		t.Errorf("distinct g: %v (%v), want 3 values", distinct, err)
	}
	cur, err := c.Aggregate(ctx(t), mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "v", Value: bson.D{{Key: "$lt", Value: 30}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$v"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := cur.All(ctx(t), &groups); err != nil || len(groups) != 3 || groups[0]["sum"] != int32(135) {
		t.Errorf("aggregate $group over both shards: %v (%v); want 3 groups, g=0 summing 135", groups, err)
	}
	res, err := c.UpdateMany(ctx(t), bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1000}}}})
	if err != nil || res.MatchedCount != 100 || res.ModifiedCount != 100 {
		t.Errorf("updateMany on both shards: %+v (%v), want 100 matched and modified", res, err)
	}
	// updateOne without the shard key finds its document, then writes it.
	res, err = c.UpdateOne(ctx(t), bson.D{{Key: "v", Value: 1042}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: true}}}})
	if err != nil || res.ModifiedCount != 1 {
		t.Errorf("updateOne by v: %+v (%v), want 1 modified", res, err)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{{Key: "x", Value: true}, {Key: "_id", Value: 42}}); n != 1 {
		t.Errorf("document 42 after updateOne by v: not updated")
	}
	_, err = c.UpdateOne(ctx(t), bson.D{{Key: "v", Value: -1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	var we mongo.WriteException
	var ce mongo.CommandError
	if !(errors.As(err, &ce) && ce.Code == 61) && !(errors.As(err, &we) && len(we.WriteErrors) > 0 && we.WriteErrors[0].Code == 61) {
		t.Errorf("upsert without the shard key: %v; want ShardKeyNotFound (61)", err)
	}
	if d, err := c.DeleteOne(ctx(t), bson.D{{Key: "_id", Value: 7}}); err != nil || d.DeletedCount != 1 {
		t.Errorf("deleteOne by _id: %+v (%v)", d, err)
	}
	if d, err := c.DeleteMany(ctx(t), bson.D{{Key: "g", Value: 1}}); err != nil || d.DeletedCount != 32 {
		t.Errorf("deleteMany g=1 (after deleting 7): %+v (%v), want 32", d, err)
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 67 {
		t.Errorf("count after deletes: %d, want 67", n)
	}
}

// TestShardedSameIDOnTwoShards: with a shard key other than _id, two
// documents with the same _id live on different shards, and the mongos
// shows both; a ranged key's collection starts as one chunk on the
// database's primary shard.
func TestShardedSameIDOnTwoShards(t *testing.T) {
	client, sc := emulatedCluster(t, "reads each shard")
	c := client.Database("shop").Collection("carts")
	shardCollection(t, client, "shop.carts", bson.D{{Key: "tenant", Value: "hashed"}})
	// Find a tenant on each shard.
	probe := make([]any, 20)
	for i := range probe {
		probe[i] = bson.D{{Key: "_id", Value: bson.D{{Key: "probe", Value: i}}}, {Key: "tenant", Value: i}}
	}
	if _, err := c.InsertMany(ctx(t), probe); err != nil {
		t.Fatal(err)
	}
	tenantOn := make([]any, 2)
	for i, srv := range sc.Shards() {
		docs := shardDocs(t, srv, "shop", "carts")
		if len(docs) == 0 {
			t.Fatalf("shard %d holds none of 20 tenants", i)
		}
		tenantOn[i] = docs[0]["tenant"]
	}
	for _, tenant := range tenantOn {
		if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "same"}, {Key: "tenant", Value: tenant}}); err != nil {
			t.Fatalf("insert _id \"same\" for tenant %v: %v", tenant, err)
		}
	}
	if got := findAll(t, c, bson.D{{Key: "_id", Value: "same"}}); len(got) != 2 {
		t.Errorf("find _id \"same\" through the mongos: %v; want the two documents", got)
	}
	for i, srv := range sc.Shards() {
		n := 0
		for _, d := range shardDocs(t, srv, "shop", "carts") {
			if d["_id"] == "same" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("shard %d holds %d documents with _id \"same\"; want 1", i, n)
		}
	}
	// A targeted update changes only the tenant's document.
	res, err := c.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: "same"}, {Key: "tenant", Value: tenantOn[1]}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("update of tenant %v's document: %+v (%v)", tenantOn[1], res, err)
	}
	if got := findAll(t, c, bson.D{{Key: "x", Value: 1}}); len(got) != 1 || got[0]["tenant"] != tenantOn[1] {
		t.Errorf("documents with x: %v; want only tenant %v's", got, tenantOn[1])
	}

	r := client.Database("shop").Collection("ranged")
	shardCollection(t, client, "shop.ranged", bson.D{{Key: "k", Value: 1}})
	insertEach(t, r, 0, 10, func(i int) bson.D { return bson.D{{Key: "k", Value: i}} })
	if n := len(shardDocs(t, sc.Shards()[0], "shop", "ranged")); n != 10 {
		t.Errorf("the primary shard holds %d of the ranged collection's 10 documents; want all (one chunk)", n)
	}
}

// TestShardedTransactionOnShardedCollection: a transaction writing
// documents of a sharded collection on both shards commits on both, and
// reads its own writes through the mongos before committing.
func TestShardedTransactionOnShardedCollection(t *testing.T) {
	client, sc := emulatedCluster(t, "reads each shard")
	c := client.Database("shop").Collection("orders")
	shardCollection(t, client, "shop.orders", bson.D{{Key: "_id", Value: "hashed"}})
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	_, err = sess.WithTransaction(ctx(t), func(sctx context.Context) (any, error) {
		for i := 0; i < 20; i++ {
			if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
		}
		n, err := c.CountDocuments(sctx, bson.D{})
		if err == nil && n != 20 {
			err = fmt.Errorf("the transaction counts %d of its 20 documents", n)
		}
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, srv := range sc.Shards() {
		n := len(shardDocs(t, srv, "shop", "orders"))
		if n == 0 {
			t.Errorf("shard %d got none of the transaction's 20 documents", i)
		}
		total += n
	}
	if total != 20 {
		t.Errorf("the shards hold %d documents; want 20", total)
	}
}

// TestShardedClientBulkWrite: a client bulkWrite over two databases on
// different shards and a sharded collection is split by shard and merged:
// the counts and every result's idx are the command's.
func TestShardedClientBulkWrite(t *testing.T) {
	client, sc := emulatedCluster(t, "reads each shard")
	for _, db := range []string{"alpha", "beta"} { // primaries shard0, shard1
		if _, err := client.Database(db).Collection("c").InsertOne(ctx(t), bson.D{{Key: "_id", Value: "setup"}}); err != nil {
			t.Fatal(err)
		}
	}
	shardCollection(t, client, "alpha.sharded", bson.D{{Key: "_id", Value: "hashed"}})
	var models []mongo.ClientWriteModel
	var targets []string
	for i := 0; i < 6; i++ {
		db := []string{"alpha", "beta"}[i%2]
		models = append(models, mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: i}}))
		targets = append(targets, db+".c")
		models = append(models, mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: i}}))
		targets = append(targets, "alpha.sharded")
	}
	var w []mongo.ClientBulkWrite
	for i, m := range models {
		db, coll, _ := strings.Cut(targets[i], ".")
		w = append(w, mongo.ClientBulkWrite{Database: db, Collection: coll, Model: m})
	}
	res, err := client.BulkWrite(ctx(t), w, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.InsertedCount != 12 || len(res.InsertResults) != 12 {
		t.Fatalf("bulkWrite: %d inserted, %d results; want 12 and 12", res.InsertedCount, len(res.InsertResults))
	}
	for i := 0; i < 12; i++ {
		if _, ok := res.InsertResults[i]; !ok {
			t.Fatalf("no result for operation %d (results %v)", i, res.InsertResults)
		}
	}
	if n := len(shardDocs(t, sc.Shards()[1], "beta", "c")); n != 4 {
		t.Errorf("shard1 holds %d documents of beta.c; want 4", n)
	}
	total := 0
	for _, srv := range sc.Shards() {
		total += len(shardDocs(t, srv, "alpha", "sharded"))
	}
	if total != 6 {
		t.Errorf("the shards hold %d documents of alpha.sharded; want 6", total)
	}
}

// TestShardCollectionNeedsAnIndexOnANonEmptyCollection: a real mongos
// creates the shard key's index only on an empty collection; a collection
// with documents and no index starting with the key is refused with
// InvalidOptions (72) and stays unsharded, and is sharded once the index
// exists (an empty collection gets the index made for it:
// TestShardedHashedKeyIndex).
func TestShardCollectionNeedsAnIndexOnANonEmptyCollection(t *testing.T) {
	client, _ := mongotest.ShardedClient(t, 2)
	admin := client.Database("admin")
	c := client.Database("shop").Collection("items")
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []bson.D{{{Key: "k", Value: 1}}, {{Key: "k", Value: "hashed"}}} {
		err := admin.RunCommand(ctx(t), bson.D{{Key: "shardCollection", Value: "shop.items"}, {Key: "key", Value: key}}).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 72 || !strings.Contains(ce.Message, "Please create an index that starts with the proposed shard key") {
			t.Fatalf("shardCollection %v of a non-empty collection without its index: %v; want 72 InvalidOptions naming the index", key, err)
		}
	}
	if colls := findAll(t, client.Database("config").Collection("collections"), bson.D{{Key: "_id", Value: "shop.items"}}); len(colls) != 0 {
		t.Fatalf("config.collections %v after a refused shardCollection; want it unsharded", colls)
	}
	if _, err := c.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	shardCollection(t, client, "shop.items", bson.D{{Key: "k", Value: 1}})
}

// TestShardFailCommandSparesTheMongos: a mongos is an internal client of
// its shards, so a failCommand set on a shard fails only the commands
// clients send the shard directly, unless its data has
// failInternalCommands: true, as on a real cluster.
func TestShardFailCommandSparesTheMongos(t *testing.T) {
	client, sc := mongotest.ShardedClient(t, 2)
	if sc == nil {
		t.Skip("sets a fail point on a shard: needs the emulated cluster")
	}
	// Sharded on a hashed _id: an untargeted find goes to every shard.
	shardCollection(t, client, "shop.items", bson.D{{Key: "_id", Value: "hashed"}})
	c := client.Database("shop").Collection("items")
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, srv := range sc.Shards() {
		direct := connectClient(t, options.Client().ApplyURI(srv.URI()).SetRetryReads(false))
		admin := direct.Database("admin")
		for _, internal := range []bool{false, true} {
			data := bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 2}}
			if internal {
				data = append(data, bson.E{Key: "failInternalCommands", Value: true})
			}
			if err := admin.RunCommand(ctx(t), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: data}}).Err(); err != nil {
				t.Fatal(err)
			}
			err := direct.Database("shop").Collection("items").FindOne(ctx(t), bson.D{}).Err()
			if ce := (mongo.CommandError{}); !errors.As(err, &ce) || ce.Code != 2 {
				t.Fatalf("a find sent to the shard directly with its fail point on: %v; want error 2", err)
			}
			_, err = c.Find(ctx(t), bson.D{})
			if internal && err == nil {
				t.Errorf("failInternalCommands: true: a find through the mongos succeeded; want the shard's error")
			}
			if !internal && err != nil {
				t.Errorf("a find through the mongos with a shard's fail point (no failInternalCommands): %v; want it unaffected", err)
			}
		}
		if err := admin.RunCommand(ctx(t), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
