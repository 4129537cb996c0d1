package mongotest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestCredentialsRefused: the emulator has no users, so a client with
// credentials fails as against a MongoDB server that does not know the
// user: its handshake's saslStart gets AuthenticationFailed (18), which
// the driver reports as a server error with that code, and the message
// names no password.
func TestCredentialsRefused(t *testing.T) {
	srv := mongotest.New(t)
	uri := strings.Replace(srv.URI(), "mongodb://", "mongodb://bob:s3cret-pw@", 1)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	err = client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(18) || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("ping with credentials: %v; want AuthenticationFailed (18)", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("the error quotes the password: %v", err)
	}
}
