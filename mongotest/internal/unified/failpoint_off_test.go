package unified

import (
	"context"
	"testing"

	"github.com/ferry-io/ferry/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The fail point left behind by a test is turned off even when the client
// that set it is still recovering from it; only the client's own transient
// state (a cleared pool, a network error) is worth another try, never a
// server's answer.
func TestTransientClientError(t *testing.T) {
	srv := mongotest.NewServer()
	defer srv.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	ctx := context.Background()
	admin := client.Database("admin")
	set := func(data bson.D) {
		t.Helper()
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}, {Key: "data", Value: data}}
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatal(err)
		}
	}

	set(bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "closeConnection", Value: true}})
	err = admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	if err == nil || !transientClientError(err) {
		t.Fatalf("a connection the server closed: transientClientError(%v) = false, want true", err)
	}

	set(bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}})
	err = admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	if err == nil || transientClientError(err) {
		t.Fatalf("a server's error reply: transientClientError(%v) = true, want false", err)
	}

	// After the closed connection, the fail point still goes off.
	set(bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}})
	if err := turnOffFailPoint(ctx, client, "failCommand"); err != nil {
		t.Fatal(err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping after the fail point was turned off: %v", err)
	}
}
