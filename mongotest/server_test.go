package mongotest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// connect returns a client for the test's server (the emulator, or
// $FERRY_TEST_MONGODB_URI) and a database unique to the test.
func connect(t *testing.T, opts ...mongotest.Option) (*mongo.Client, *mongo.Database, *mongotest.Server) {
	t.Helper()
	client, srv := mongotest.Client(t, opts...)
	return client, testDB(t, client), srv
}

// connectClient connects a client with opts, disconnected when the test
// ends.
func connectClient(t *testing.T, opts *options.ClientOptions) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// testDB returns the database unique to the test on client, dropped so
// that the test starts from nothing.
func testDB(t *testing.T, client *mongo.Client) *mongo.Database {
	t.Helper()
	db := client.Database("mt_" + sanitize(t.Name()))
	if err := db.Drop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return db
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[len(b)-40:]
	}
	return string(b)
}

// ctx is a test's context. The bound only ends a hung test: under -race on a machine loaded past
// its cores, moving a 10 MiB split event took over 20 s.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return c
}

// watcher is what a change stream can be opened on: a collection, a
// database or a client.
type watcher interface {
	Watch(ctx context.Context, pipeline any, opts ...options.Lister[options.ChangeStreamOptions]) (*mongo.ChangeStream, error)
}

// watch opens a change stream on w and fails the test when it cannot be
// opened; the caller closes it.
func watch(t *testing.T, c context.Context, w watcher, pipeline mongo.Pipeline, opts ...options.Lister[options.ChangeStreamOptions]) *mongo.ChangeStream {
	t.Helper()
	cs, err := w.Watch(c, pipeline, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestPingAndHello(t *testing.T) {
	client, _, _ := connect(t)
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	var hello bson.M
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello["isWritablePrimary"] != true || hello["setName"] == nil {
		t.Fatalf("hello does not describe a replica-set primary: %v", hello)
	}
}

func TestCRUD(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("items")
	ctx := ctx(t)
	docs := []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "a"}, {Key: "qty", Value: 5}, {Key: "tags", Value: bson.A{"x", "y"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "b"}, {Key: "qty", Value: 15}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "c"}, {Key: "qty", Value: 25}, {Key: "tags", Value: bson.A{"y"}}},
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	n, err := c.CountDocuments(ctx, bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 10}}}})
	if err != nil || n != 2 {
		t.Fatalf("CountDocuments qty>10 = %d, %v; want 2", n, err)
	}
	cur, err := c.Find(ctx, bson.D{{Key: "tags", Value: "y"}}, options.Find().SetSort(bson.D{{Key: "qty", Value: -1}}))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 3 || got[1].ID != 1 {
		t.Fatalf("find tags=y sorted by qty desc = %v, want [3 1]", got)
	}
	res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: 1}}}})
	if err != nil || res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("UpdateOne = %+v, %v", res, err)
	}
	res, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "z"}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil || res.UpsertedID != int32(9) {
		t.Fatalf("upsert = %+v, %v; want upserted _id 9", res, err)
	}
	var doc bson.M
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "B"}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["name"] != "B" || doc["qty"] != int32(16) {
		t.Fatalf("findAndModify returned %v", doc)
	}
	dres, err := c.DeleteMany(ctx, bson.D{{Key: "qty", Value: bson.D{{Key: "$lt", Value: 20}}}})
	if err != nil || dres.DeletedCount != 2 {
		t.Fatalf("DeleteMany = %+v, %v; want 2", dres, err)
	}
	vals, err := c.Distinct(ctx, "name", bson.D{}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if arr, _ := vals.Values(); len(arr) != 2 {
		t.Fatalf("distinct names = %v, want 2 values", vals)
	}
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("deleted document still found: %v", err)
	}
}

func TestUniqueIndex(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("users")
	ctx := ctx(t)
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "email", Value: "a@x"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.InsertOne(ctx, bson.D{{Key: "email", Value: "a@x"}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("second insert with the same email: %v, want a duplicate key error", err)
	}
	_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1.0}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("_id 1.0 after _id 1: %v, want duplicate key (numbers compare by value)", err)
	}
}

func TestUnknownCommand(t *testing.T) {
	_, db, _ := connect(t)
	err := db.RunCommand(ctx(t), bson.D{{Key: "noSuchCommand", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 59 {
		t.Fatalf("unknown command error = %v, want CommandNotFound (59)", err)
	}
}

// TestMalformedMessages sends garbage on raw connections: the server must
// close them (or answer with an error) and keep serving others.
func TestMalformedMessages(t *testing.T) {
	srv := mongotest.New(t)
	inputs := [][]byte{
		{0x01, 0x02}, // short header
		{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0},     // absurd length
		{20, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0},    // OP_MSG without sections
		{21, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0}, // kind 0 with no document
	}
	for _, in := range inputs {
		nc, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(in); err != nil {
			t.Fatal(err)
		}
		if tcp, ok := nc.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		buf := make([]byte, 1024)
		for {
			if _, err := nc.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("input %x: connection neither answered nor closed", in)
				}
				break
			}
		}
		nc.Close()
	}
	client := connectClient(t, options.Client().ApplyURI(srv.URI()))
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatalf("server unusable after malformed input: %v", err)
	}
}

// TestServerStatusWhileClientsConnect: serverStatus counts the open
// connections while others are being accepted (and closed); the count is
// read under the server's lock, so the race detector has nothing to report
// (go test -race), and each reply counts at least the asking connection.
func TestServerStatusWhileClientsConnect(t *testing.T) {
	srv := mongotest.New(t)
	client := connectClient(t, options.Client().ApplyURI(srv.URI()))
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			nc, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Error(err)
				return
			}
			nc.Close()
		}
	}()
	for {
		var st struct {
			Connections struct{ Current int32 } `bson:"connections"`
		}
		if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if st.Connections.Current < 1 {
			t.Fatalf("serverStatus counts %d connections, asked over one", st.Connections.Current)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}
