package mongotest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/mongotest"
)

type clockReply struct {
	Now       time.Time `bson:"now"`
	UnixNanos int64     `bson:"unixNanos"`
}

// TestTestControlsOffByDefault: without the TestControls option the
// test-control commands fail loudly, saying how to enable them, and
// listCommands does not list them.
func TestTestControlsOffByDefault(t *testing.T) {
	client, _ := mongotest.Client(t)
	admin := client.Database("admin")
	for _, cmd := range []bson.D{{{Key: "ferryTestAdvanceClock", Value: 1000}}, {{Key: "ferryTestNow", Value: 1}}} {
		err := admin.RunCommand(ctx(t), cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 59 || !strings.Contains(ce.Message, "-test-controls") {
			t.Fatalf("%s without TestControls: %v; want CommandNotFound (59) naming -test-controls", cmd[0].Key, err)
		}
	}
	var lc struct {
		Commands map[string]bson.Raw `bson:"commands"`
	}
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "listCommands", Value: 1}}).Decode(&lc); err != nil {
		t.Fatal(err)
	}
	if _, ok := lc.Commands["ferryTestNow"]; ok {
		t.Fatal("listCommands lists ferryTestNow on a server without TestControls")
	}
	if _, ok := lc.Commands["find"]; !ok {
		t.Fatal("listCommands does not list find")
	}
}

// TestTestControls: ferryTestAdvanceClock moves the clock that $$NOW reads
// by whole milliseconds, as Server.AdvanceClock does, and ferryTestNow
// reads it, as Server.Now does.
func TestTestControls(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	client, srv := mongotest.Client(t, mongotest.TestControls(), mongotest.Clock(func() time.Time { return at }))
	admin := client.Database("admin")
	var now clockReply
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "ferryTestNow", Value: 1}}).Decode(&now); err != nil {
		t.Fatal(err)
	}
	if !now.Now.Equal(at) || now.UnixNanos != at.UnixNano() {
		t.Fatalf("ferryTestNow = %+v; want the frozen clock %v", now, at)
	}
	var moved clockReply
	if err := admin.RunCommand(ctx(t), bson.D{{Key: "ferryTestAdvanceClock", Value: int64(90_500)}}).Decode(&moved); err != nil {
		t.Fatal(err)
	}
	want := at.Add(90*time.Second + 500*time.Millisecond)
	if moved.UnixNanos != want.UnixNano() || !srv.Now().Equal(want) {
		t.Fatalf("after ferryTestAdvanceClock 90500: reply %+v, Server.Now %v; want %v", moved, srv.Now(), want)
	}
	// $$NOW follows it.
	db := testDB(t, client)
	cur, err := db.Aggregate(ctx(t), bson.A{
		bson.D{{Key: "$documents", Value: bson.A{bson.D{}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "now", Value: "$$NOW"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		Now time.Time `bson:"now"`
	}
	if err := cur.All(ctx(t), &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || !docs[0].Now.Equal(want) {
		t.Fatalf("$$NOW = %+v; want %v", docs, want)
	}
	// Only whole milliseconds, only on admin.
	for _, bad := range []any{1.5, "1000", int64(1) << 62} {
		err := admin.RunCommand(ctx(t), bson.D{{Key: "ferryTestAdvanceClock", Value: bad}}).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 14 {
			t.Fatalf("ferryTestAdvanceClock %v: %v; want TypeMismatch (14)", bad, err)
		}
	}
	if err := db.RunCommand(ctx(t), bson.D{{Key: "ferryTestNow", Value: 1}}).Err(); err == nil {
		t.Fatal("ferryTestNow on a non-admin database succeeded")
	}
	if !srv.Now().Equal(want) {
		t.Fatalf("refused commands moved the clock to %v", srv.Now())
	}
}
