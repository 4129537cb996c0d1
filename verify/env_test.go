package verify_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/ledger"
	"github.com/ferry-io/ferry/verify"
)

// env is a source (shop.orders) and the stores of a stream "orders" in
// the database ferry of the same server.
type env struct {
	t      testing.TB
	srv    *emutest.Server
	client *mongo.Client
	orders *mongo.Collection
	cps    *mongostore.Store
	ledger *ledger.Store
	dlq    *deadletter.Mongo
}

// newEnv starts an emulator with opts.
func newEnv(t testing.TB, opts ...emutest.Option) *env {
	t.Helper()
	srv := emutest.New(t, opts...)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	state := client.Database("ferry")
	cps, err := mongostore.New(state)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, client: client, orders: client.Database("shop").Collection("orders"),
		cps: cps, ledger: l, dlq: deadletter.NewMongo(state, "dlq")}
}

// config verifies stream "orders" (shop.orders, 2 partitions) from from.
func (e *env) config(from bson.Timestamp) verify.Config {
	return verify.Config{Client: e.client, Stream: "orders", Partitions: 2,
		Options:     []ferry.Option{ferry.WatchCollection("shop", "orders")},
		Checkpoints: e.cps, Ledger: e.ledger, DeadLetters: e.dlq, From: from}
}

// insert inserts the documents {_id: prefix-i} for i in [from, to) one by
// one and returns the cluster time of the first.
func (e *env) insert(coll *mongo.Collection, prefix string, from, to int) bson.Timestamp {
	e.t.Helper()
	var first bson.Timestamp
	for i := from; i < to; i++ {
		ts := e.write(func(ctx context.Context) error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("%s-%d", prefix, i)}})
			return err
		})
		if i == from {
			first = ts
		}
	}
	return first
}

// write runs one write in a session and returns its cluster time (the
// session's operationTime).
func (e *env) write(f func(ctx context.Context) error) bson.Timestamp {
	e.t.Helper()
	sess, err := e.client.StartSession()
	if err != nil {
		e.t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := f(mongo.NewSessionContext(context.Background(), sess)); err != nil {
		e.t.Fatal(err)
	}
	ts := sess.OperationTime()
	if ts == nil {
		e.t.Fatal("the write's session has no operationTime")
	}
	return *ts
}
