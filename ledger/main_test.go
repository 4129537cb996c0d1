package ledger_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/leakcheck"
	"github.com/ferry-io/ferry/ledger"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// connectURI connects to uri, with a command monitor when mon is not nil.
func connectURI(t *testing.T, uri string, mon ...*event.CommandMonitor) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(uri)
	if len(mon) > 0 {
		o.SetMonitor(mon[0])
	}
	client, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	return client
}

// freshDB returns a database no other test uses, dropped when the test ends
// (so the suite can share a real replica set).
func freshDB(t *testing.T, client *mongo.Client) *mongo.Database {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	db := client.Database("ferry_ledger_test_" + hex.EncodeToString(b[:]))
	t.Cleanup(func() { db.Drop(context.Background()) })
	return db
}

func newStore(t *testing.T, db *mongo.Database, opts ...ledger.Option) *ledger.Store {
	t.Helper()
	s, err := ledger.New(t.Context(), db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventID returns an event id like ferry.Event.ID(): hex sha256.
func eventID(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}
