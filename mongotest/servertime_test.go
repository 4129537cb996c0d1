package mongotest_test

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"context"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongotest"
)

// acquire is the lease bookkeeping Ferry does: one atomic findAndModify
// judged by the server's clock ($$NOW), taking the lease when it is free or
// expired and bumping the epoch on every change of owner.
func acquire(t *testing.T, c *mongo.Collection, owner string, ttl time.Duration) (bson.M, bool) {
	t.Helper()
	filter := bson.D{{Key: "_id", Value: "p0"}, {Key: "$expr", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$eq", Value: bson.A{"$owner", owner}}},
		bson.D{{Key: "$lt", Value: bson.A{"$expiresAt", "$$NOW"}}},
	}}}}}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "epoch", Value: bson.D{{Key: "$cond", Value: bson.A{
			bson.D{{Key: "$eq", Value: bson.A{"$owner", owner}}},
			bson.D{{Key: "$ifNull", Value: bson.A{"$epoch", 0}}},
			bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$epoch", 0}}}, 1}}},
		}}}},
		{Key: "owner", Value: owner},
		{Key: "expiresAt", Value: bson.D{{Key: "$add", Value: bson.A{"$$NOW", ttl.Milliseconds()}}}},
	}}}}
	var doc bson.M
	err := c.FindOneAndUpdate(ctx(t), filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return doc, true
}

// TestLeaseByServerClock: a lease judged by $$NOW expires only when the
// server's clock passes it. The clock stands still but for AdvanceClock,
// so the test depends on no real time passing (it used to allow 1 s
// between reading the clock and the acquire, and 10 s before b's try).
func TestLeaseByServerClock(t *testing.T) {
	frozen := time.Now().Truncate(time.Millisecond) // BSON dates have millisecond precision
	_, db, srv := connect(t, mongotest.Clock(func() time.Time { return frozen }))
	if srv == nil {
		t.Skip("needs the emulator's clock control (AdvanceClock)")
	}
	c := db.Collection("leases")
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "p0"}, {Key: "owner", Value: nil}, {Key: "epoch", Value: 0}, {Key: "expiresAt", Value: time.Unix(0, 0)}})
		return err
	})
	a, ok := acquire(t, c, "a", 10*time.Second)
	if !ok || a["owner"] != "a" || a["epoch"] != int64(1) && a["epoch"] != int32(1) {
		t.Fatalf("a's first acquire = %v, %v; want owner a, epoch 1", a, ok)
	}
	exp := a["expiresAt"].(bson.DateTime).Time()
	if d := exp.Sub(srv.Now()); d != 10*time.Second {
		t.Fatalf("expiresAt is %v after the server's clock; want $$NOW + 10s", d)
	}
	if _, ok := acquire(t, c, "b", 10*time.Second); ok {
		t.Fatal("b took a lease that has not expired")
	}
	if again, ok := acquire(t, c, "a", 10*time.Second); !ok || again["epoch"] != a["epoch"] {
		t.Fatalf("a's renewal = %v, %v; want the same epoch", again, ok)
	}
	srv.AdvanceClock(11 * time.Second)
	b, ok := acquire(t, c, "b", 10*time.Second)
	if !ok || b["owner"] != "b" {
		t.Fatalf("b could not take an expired lease: %v", b)
	}
	if epoch, _ := b["epoch"].(int64); epoch != 2 {
		if e32, _ := b["epoch"].(int32); e32 != 2 {
			t.Fatalf("epoch after a change of owner = %v, want 2", b["epoch"])
		}
	}
}

func TestToHashedIndexKey(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	cur, err := db.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "v", Value: "string to hash"}}}}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "h", Value: bson.D{{Key: "$toHashedIndexKey", Value: "$v"}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		H int64 `bson:"h"`
	}
	if err := cur.All(ctx, &out); err != nil {
		t.Fatal(err)
	}
	// The check value from the MongoDB manual's $toHashedIndexKey page.
	if len(out) != 1 || out[0].H != 763543691661428748 {
		t.Fatalf("$toHashedIndexKey(\"string to hash\") = %v, want 763543691661428748", out)
	}
}

// TestPartitionedChangeStreams opens one change stream per partition with
// DESIGN.md's filter and checks that every event lands in exactly the
// partition its _id hashes to.
func TestPartitionedChangeStreams(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("parts")
	const n = 4
	streams := make([]*mongo.ChangeStream, n)
	for p := range n {
		filter := bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
			bson.D{{Key: "$abs", Value: bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$toHashedIndexKey", Value: "$documentKey._id"}}, n}}}}},
			p,
		}}}}}}}
		cs := watch(t, ctx, c, mongo.Pipeline{filter})
		defer cs.Close(ctx)
		streams[p] = cs
	}
	ids := []any{int32(1), int64(2), 3.0, 3.5, "k", bson.NewObjectID(), bson.D{{Key: "a", Value: 1}}, true}
	for i := 0; i < 40; i++ {
		ids = append(ids, i+100)
	}
	want := make([]int, n)
	for _, id := range ids {
		h, err := hashkey.Hash(id)
		if err != nil {
			t.Fatal(err)
		}
		p := h % n
		if p < 0 {
			p = -p
		}
		want[p]++
		mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); return err })
	}
	total := 0
	for p, cs := range streams {
		for range want[p] {
			ev := next(t, cs)
			h, err := hashkey.Hash(sub(ev, "documentKey")["_id"])
			if err != nil {
				t.Fatal(err)
			}
			if got := h % n; got != int64(p) && got != -int64(p) {
				t.Fatalf("partition %d received _id %v, which hashes to partition %d", p, sub(ev, "documentKey")["_id"], got)
			}
			total++
		}
	}
	if total != len(ids) {
		t.Fatalf("partitions saw %d events, want %d", total, len(ids))
	}
}

func TestTTLMonitorSetParameter(t *testing.T) {
	client, _, srv := connect(t)
	if srv == nil {
		t.Skip("setParameter changes server state; run against the emulator only")
	}
	ctx := ctx(t)
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 7}}).Err(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Secs int32 `bson:"ttlMonitorSleepSecs"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Secs != 7 {
		t.Fatalf("ttlMonitorSleepSecs = %d after setting it to 7", got.Secs)
	}
	err := admin.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: -1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("negative ttlMonitorSleepSecs: %v, want BadValue", err)
	}
}

// TestFailPointGoAPI fails one insert with a retryable error through the Go
// API: the server labels it RetryableWriteError, the driver retries once,
// and the document is written exactly once.
func TestFailPointGoAPI(t *testing.T) {
	uri, srv := mongotest.URI(t)
	if srv == nil {
		t.Skip("exercises the emulator's Go fail-point API")
	}
	var labels []string
	mon := &event.CommandMonitor{Failed: func(_ context.Context, e *event.CommandFailedEvent) {
		var le interface{ HasErrorLabel(string) bool }
		if errors.As(e.Failure, &le) && le.HasErrorLabel("RetryableWriteError") {
			labels = append(labels, "RetryableWriteError")
		}
	}}
	client := connectClient(t, options.Client().ApplyURI(uri).SetMonitor(mon))
	c := client.Database("fp").Collection("c")
	srv.FailCommand(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91, Times: 1})
	if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert should succeed on the driver's retry: %v", err)
	}
	if len(labels) != 1 {
		t.Fatalf("failed attempts labelled RetryableWriteError: %d, want 1", len(labels))
	}
	if n, _ := c.CountDocuments(ctx(t), bson.D{}); n != 1 {
		t.Fatalf("documents = %d, want 1", n)
	}
	srv.FailCommand(mongotest.FailPoint{Commands: []string{"find"}, CloseConnection: true, Times: 1})
	var doc bson.M
	if err := c.FindOne(ctx(t), bson.D{}).Decode(&doc); err != nil {
		t.Fatalf("find should succeed on the driver's retry after a dropped connection: %v", err)
	}
	srv.ClearFailPoints()
}
