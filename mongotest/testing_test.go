package mongotest_test

import (
	"errors"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/mongotest"
)

// TestClient: Client connects a test to its server and disconnects it when
// the test ends.
func TestClient(t *testing.T) {
	var client *mongo.Client
	t.Run("test", func(t *testing.T) {
		var srv *mongotest.Server
		client, srv = mongotest.Client(t)
		if err := client.Ping(ctx(t), nil); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if (srv == nil) != (os.Getenv(mongotest.EnvURI) != "") {
			t.Errorf("server %v with %s=%q: want the emulator exactly when it is unset", srv, mongotest.EnvURI, os.Getenv(mongotest.EnvURI))
		}
	})
	if err := client.Ping(ctx(t), nil); !errors.Is(err, mongo.ErrClientDisconnected) {
		t.Fatalf("ping after the test ended: %v, want %v", err, mongo.ErrClientDisconnected)
	}
}
