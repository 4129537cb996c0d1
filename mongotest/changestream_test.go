package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongotest"
)

// next returns the stream's next event or fails the test.
func next(t *testing.T, cs *mongo.ChangeStream) bson.M {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !cs.Next(c) {
		t.Fatalf("no event: %v", cs.Err())
	}
	var ev bson.M
	if err := cs.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestChangeStreamEventShapes(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("orders")
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 2}}}, {Key: "$unset", Value: bson.D{{Key: "a", Value: ""}}}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "c", Value: 3}})
		return err
	})
	mustDo(t, func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); return err })

	ins := next(t, cs)
	wantFields(t, ins, "insert", "_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey")
	if sub(ins, "fullDocument")["a"] != int32(1) {
		t.Fatalf("insert fullDocument = %v", ins["fullDocument"])
	}
	ns := sub(ins, "ns")
	if ns["db"] != db.Name() || ns["coll"] != "orders" {
		t.Fatalf("ns = %v", ns)
	}
	upd := next(t, cs)
	wantFields(t, upd, "update", "_id", "operationType", "clusterTime", "wallTime", "ns", "documentKey", "updateDescription")
	ud := sub(upd, "updateDescription")
	if sub(ud, "updatedFields")["b"] != int32(2) || fmt.Sprint(ud["removedFields"]) != "[a]" {
		t.Fatalf("updateDescription = %v", ud)
	}
	if _, has := upd["fullDocument"]; has {
		t.Fatalf("update event has fullDocument without the fullDocument option: %v", upd)
	}
	rep := next(t, cs)
	wantFields(t, rep, "replace", "_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey")
	del := next(t, cs)
	wantFields(t, del, "delete", "_id", "operationType", "clusterTime", "wallTime", "ns", "documentKey")
	// Cluster times strictly increase, and so do tokens.
	prev := ins
	for _, ev := range []bson.M{upd, rep, del} {
		a, b := prev["clusterTime"].(bson.Timestamp), ev["clusterTime"].(bson.Timestamp)
		if !(a.T < b.T || a.T == b.T && a.I < b.I) {
			t.Fatalf("clusterTime did not increase: %v then %v", a, b)
		}
		if tokenData(prev) >= tokenData(ev) {
			t.Fatalf("resume tokens not ordered: %s then %s", tokenData(prev), tokenData(ev))
		}
		prev = ev
	}
}

func wantFields(t *testing.T, ev bson.M, op string, fields ...string) {
	t.Helper()
	if ev["operationType"] != op {
		t.Fatalf("operationType = %v, want %s (event %v)", ev["operationType"], op, ev)
	}
	for _, f := range fields {
		if _, ok := ev[f]; !ok {
			t.Fatalf("%s event lacks %q: %v", op, f, ev)
		}
	}
}

func tokenData(ev bson.M) string {
	id := sub(ev, "_id")
	s, _ := id["_data"].(string)
	return s
}

func mustDo(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

func TestChangeStreamUpdateLookup(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("c")
	cs := watch(t, ctx, c, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	defer cs.Close(ctx)
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "k"}, {Key: "n", Value: 1}})
		return err
	})
	mustDo(t, func() error {
		_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "k"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		return err
	})
	next(t, cs)
	upd := next(t, cs)
	if fd := sub(upd, "fullDocument"); fd["n"] != int32(2) {
		t.Fatalf("updateLookup fullDocument = %v, want n=2", upd["fullDocument"])
	}
}

// TestResumeAfter checks that resuming from an event's token yields exactly
// the events after it, and that the same event has the same token in streams
// with different filters and scopes.
func TestResumeAfterAndTokenIdentity(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("r")
	collStream := watch(t, ctx, c, mongo.Pipeline{})
	defer collStream.Close(ctx)
	filtered := watch(t, ctx, c, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "fullDocument.even", Value: true}}}}})
	defer filtered.Close(ctx)
	dbStream := watch(t, ctx, db, mongo.Pipeline{})
	defer dbStream.Close(ctx)
	clusterStream := watch(t, ctx, client, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "ns.db", Value: db.Name()}}}}})
	defer clusterStream.Close(ctx)
	for i := 0; i < 6; i++ {
		mustDo(t, func() error {
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "even", Value: i%2 == 0}})
			return err
		})
	}
	var tokens []string
	var raw []bson.Raw
	for i := 0; i < 6; i++ {
		ev := next(t, collStream)
		tokens = append(tokens, tokenData(ev))
		raw = append(raw, collStream.ResumeToken())
	}
	for i := 0; i < 6; i++ {
		if got := tokenData(next(t, dbStream)); got != tokens[i] {
			t.Fatalf("db stream token %d = %s, collection stream %s", i, got, tokens[i])
		}
		if got := tokenData(next(t, clusterStream)); got != tokens[i] {
			t.Fatalf("cluster stream token %d = %s, collection stream %s", i, got, tokens[i])
		}
	}
	for i := 0; i < 6; i += 2 {
		if got := tokenData(next(t, filtered)); got != tokens[i] {
			t.Fatalf("filtered stream token for event %d = %s, want %s", i, got, tokens[i])
		}
	}
	resumed := watch(t, ctx, c, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(raw[2]))
	defer resumed.Close(ctx)
	for i := 3; i < 6; i++ {
		ev := next(t, resumed)
		if got := tokenData(ev); got != tokens[i] {
			t.Fatalf("resumed stream event = %s, want event %d (%s)", got, i, tokens[i])
		}
	}
}

func TestStartAtOperationTime(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("s")
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); return err })
	sess, err := db.Client().StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	mustDo(t, func() error { _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); return err })
	opTime := sess.OperationTime()
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); return err })
	cs := watch(t, ctx, c, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(opTime))
	defer cs.Close(ctx)
	for _, want := range []int32{1, 2} {
		ev := next(t, cs)
		if id := sub(ev, "documentKey")["_id"]; id != want {
			t.Fatalf("startAtOperationTime: event for _id %v, want %d", id, want)
		}
	}
}

func TestQuietStreamTokenAdvances(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	quiet := db.Collection("quiet")
	busy := db.Collection("busy")
	cs := watch(t, ctx, quiet, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	defer cs.Close(ctx)
	first := cs.ResumeToken()
	if first == nil {
		t.Fatal("no postBatchResumeToken on the initial batch")
	}
	mustDo(t, func() error { _, err := busy.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); return err })
	until(t, 10*time.Second, func() error {
		if cs.TryNext(ctx) {
			t.Fatal("quiet stream returned an event for another collection")
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		if tok := cs.ResumeToken(); tok.Lookup("_data").StringValue() <= first.Lookup("_data").StringValue() {
			return errors.New("postBatchResumeToken did not advance past a write to another collection")
		}
		return nil
	})
}

func TestHistoryLost(t *testing.T) {
	_, db, srv := connect(t, mongotest.OplogMaxEntries(20))
	if srv == nil {
		t.Skip("needs the emulator's small oplog (OplogMaxEntries)")
	}
	ctx := ctx(t)
	c := db.Collection("h")
	cs := watch(t, ctx, c, mongo.Pipeline{})
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); return err })
	next(t, cs)
	old := cs.ResumeToken()
	cs.Close(ctx)
	for i := 1; i <= 50; i++ {
		mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); return err })
	}
	_, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(old))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(286) || !se.HasErrorLabel("NonResumableChangeStreamError") {
		t.Fatalf("resume from a token older than the oplog: %v, want ChangeStreamHistoryLost (286) labelled NonResumableChangeStreamError", err)
	}
}

func TestInvalidateAndStartAfter(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("inv")
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); return err })
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	mustDo(t, func() error { return c.Drop(ctx) })
	if ev := next(t, cs); ev["operationType"] != "drop" {
		t.Fatalf("first event after drop = %v", ev["operationType"])
	}
	inv := next(t, cs)
	if inv["operationType"] != "invalidate" {
		t.Fatalf("second event after drop = %v, want invalidate", inv["operationType"])
	}
	c2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cs.Next(c2) {
		t.Fatal("stream kept going after invalidate")
	}
	if cs.ID() != 0 {
		t.Fatalf("cursor id after invalidate = %d, want 0", cs.ID())
	}
	invTok := cs.ResumeToken()
	_, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(invTok))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(260) {
		t.Fatalf("resumeAfter an invalidate token: %v, want InvalidResumeToken (260)", err)
	}
	after := watch(t, ctx, c, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invTok))
	defer after.Close(ctx)
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); return err })
	ev := next(t, after)
	if ev["operationType"] != "insert" || sub(ev, "documentKey")["_id"] != int32(2) {
		t.Fatalf("startAfter invalidate: first event = %v, want the insert of _id 2", ev)
	}
}

func TestRenameInvalidates(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("from")
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); return err })
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	err := db.Client().Database("admin").RunCommand(ctx, bson.D{
		{Key: "renameCollection", Value: db.Name() + ".from"}, {Key: "to", Value: db.Name() + ".to"}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, cs)
	if ev["operationType"] != "rename" || sub(ev, "to")["coll"] != "to" {
		t.Fatalf("rename event = %v", ev)
	}
	if ev := next(t, cs); ev["operationType"] != "invalidate" {
		t.Fatalf("after rename: %v, want invalidate", ev["operationType"])
	}
}

func TestPipelineMustKeepID(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("p")
	cs := watch(t, ctx, c, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}})
	defer cs.Close(ctx)
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); return err })
	c2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cs.Next(c2) {
		t.Fatal("got an event whose _id was projected out")
	}
	var se mongo.ServerError
	if err := cs.Err(); !errors.As(err, &se) || !se.HasErrorCode(280) {
		t.Fatalf("error = %v, want ChangeStreamFatalError (280)", err)
	}
}

// TestGetMoreReturnsEarly checks that a waiting getMore answers as soon as
// an event arrives rather than with an empty batch at the end of its await
// time: the first getMore reply must carry the event.
func TestGetMoreReturnsEarly(t *testing.T) {
	uri, _ := mongotest.URI(t)
	var mu sync.Mutex
	var batches []int
	mon := &event.CommandMonitor{Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		if e.CommandName != "getMore" {
			return
		}
		n := 0
		if v, err := e.Reply.LookupErr("cursor", "nextBatch"); err == nil {
			vals, _ := v.Array().Values()
			n = len(vals)
		}
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}}
	client := connectClient(t, options.Client().ApplyURI(uri).SetMonitor(mon))
	base := ctx(t)
	c := client.Database("mt_getmore_early").Collection("w")
	cs := watch(t, base, c, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
	defer cs.Close(base)
	got := make(chan bool, 1)
	go func() { got <- cs.Next(base) }()
	mustDo(t, func() error { _, err := c.InsertOne(base, bson.D{{Key: "x", Value: 1}}); return err })
	if !<-got {
		t.Fatalf("no event: %v", cs.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) == 0 || batches[0] != 1 {
		t.Fatalf("getMore batch sizes = %v; the first getMore should have returned the event", batches)
	}
}

func TestTTLDeletesReachChangeStreams(t *testing.T) {
	_, db, srv := connect(t, mongotest.TTLMonitorInterval(10*time.Millisecond))
	if srv == nil {
		t.Skip("needs the emulator's clock control")
	}
	ctx := ctx(t)
	c := db.Collection("sessions")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expireAt", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	now := srv.Now()
	mustDo(t, func() error {
		_, err := c.InsertMany(ctx, []any{
			bson.D{{Key: "_id", Value: "soon"}, {Key: "expireAt", Value: now.Add(time.Hour)}},
			bson.D{{Key: "_id", Value: "never"}, {Key: "expireAt", Value: "not a date"}},
		})
		return err
	})
	next(t, cs)
	next(t, cs)
	srv.AdvanceClock(2 * time.Hour)
	ev := next(t, cs)
	if ev["operationType"] != "delete" || sub(ev, "documentKey")["_id"] != "soon" {
		t.Fatalf("after expiry: %v, want the delete of \"soon\"", ev)
	}
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("documents left = %d, %v; want 1 (the one without a date)", n, err)
	}
}

// sub returns the embedded document at key as a bson.M (the v2 driver
// decodes nested documents as bson.D).
func sub(m bson.M, key string) bson.M {
	switch v := m[key].(type) {
	case bson.M:
		return v
	case bson.D:
		out := bson.M{}
		for _, e := range v {
			out[e.Key] = e.Value
		}
		return out
	}
	return nil
}

// TestResumeFromUnknownToken resumes from a well-formed token for an event
// that never happened: like MongoDB, the server fails with
// ChangeStreamFatalError (280) instead of silently starting elsewhere.
func TestResumeFromUnknownToken(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("u")
	cs := watch(t, ctx, c, mongo.Pipeline{})
	defer cs.Close(ctx)
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); return err })
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); return err })
	next(t, cs)
	tok, err := resumetoken.Parse(cs.ResumeToken())
	if err != nil {
		t.Fatal(err)
	}
	tok.EventIdentifier = bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(999)}}}}
	forged, err := bson.Marshal(tok.Document())
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(bson.Raw(forged)))
	if err == nil {
		defer resumed.Close(ctx)
		c2, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if resumed.Next(c2) {
			t.Fatalf("resume from a token never issued returned %v", resumed.Current)
		}
		err = resumed.Err()
	}
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(280) {
		t.Fatalf("resume from a token never issued: %v, want ChangeStreamFatalError (280)", err)
	}
}

// TestResumeFromSplitEventFragment resumes from the token of a split
// event's first fragment: the stream continues with the second fragment.
func TestResumeFromSplitEventFragment(t *testing.T) {
	client, db, _ := connect(t)
	_ = client
	c := ctx(t)
	if err := db.CreateCollection(c, "big", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("big")
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: strings.Repeat("a", 10<<20)}}); err != nil {
		t.Fatal(err)
	}
	split := mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	cs := watch(t, c, coll, split, options.ChangeStream().SetFullDocumentBeforeChange(options.Required))
	defer cs.Close(c)
	if _, err := coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: strings.Repeat("b", 10<<20)}}}}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	if f := cs.Current.Lookup("splitEvent", "fragment").Int32(); f != 1 {
		t.Fatalf("first fragment number %d", f)
	}
	tok := cs.ResumeToken()
	resumed := watch(t, c, coll, split, options.ChangeStream().SetFullDocumentBeforeChange(options.Required).SetResumeAfter(tok))
	defer resumed.Close(c)
	next(t, resumed)
	if f, of := resumed.Current.Lookup("splitEvent", "fragment").Int32(), resumed.Current.Lookup("splitEvent", "of").Int32(); f != 2 || of != 2 {
		t.Fatalf("after resuming from fragment 1: fragment %d of %d, want 2 of 2", f, of)
	}
}

// TestInvalidateFilteredByThePipeline follows MongoDB's
// change_stream_check_resumability.js: a stream whose $match keeps only
// inserts does not return the invalidate of a dropDatabase, but is closed
// at it, no later event (of a re-created collection) following; the last
// batch's postBatchResumeToken is the invalidate's, from which startAfter
// continues on the re-created collection. (Raw commands: the Go driver does
// not keep the postBatchResumeToken of a batch that closes the cursor.)
func TestInvalidateFilteredByThePipeline(t *testing.T) {
	_, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("resumability")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	inserts := bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}
	agg, err := db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: c.Name()},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, inserts}},
		{Key: "cursor", Value: bson.D{}}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	id := agg.Lookup("cursor", "id").Int64()
	getMore := func() bson.Raw {
		t.Helper()
		r, err := db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: c.Name()},
			{Key: "maxTimeMS", Value: int64(200)}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := getMore().Lookup("cursor", "nextBatch").Array().Values(); len(evs) != 1 {
		t.Fatalf("first getMore: %d events, want the insert", len(evs))
	}
	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	// Written after the invalidation: never part of this stream.
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 101}}); err != nil {
		t.Fatal(err)
	}
	last := getMore()
	evs, _ := last.Lookup("cursor", "nextBatch").Array().Values()
	if len(evs) != 0 || last.Lookup("cursor", "id").Int64() != 0 {
		t.Fatalf("after the drop: %d events, cursor id %d; want none, closed", len(evs), last.Lookup("cursor", "id").Int64())
	}
	pbrt := last.Lookup("cursor", "postBatchResumeToken").Document()
	tok, err := resumetoken.Parse(pbrt)
	if err != nil || !tok.FromInvalidate {
		t.Fatalf("the closing batch's postBatchResumeToken %v (%v): want the invalidate's", pbrt, err)
	}
	after := watch(t, ctx, c, mongo.Pipeline{inserts}, options.ChangeStream().SetStartAfter(pbrt))
	if ev := next(t, after); ev["operationType"] != "insert" || fmt.Sprint(ev["fullDocument"]) != fmt.Sprint(bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(101)}}) {
		t.Fatalf("after the invalidate: %v, want the insert into the re-created collection", ev)
	}
}
