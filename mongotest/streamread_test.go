package mongotest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestChangeStreamAcrossWindows builds change-stream batches from oplog
// windows of three entries (getMore copies the oplog in windows under the
// engine lock and builds events without it), with writes out of the
// streams' scope in between, and checks that every stream still returns
// every event once, in order, with increasing resume tokens; that
// updateLookup reads the current document; that resuming from any event
// returns exactly the rest; and that the postBatchResumeToken a drained
// stream ends on resumes with nothing missed and nothing repeated.
func TestChangeStreamAcrossWindows(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator (StreamWindow)")
	}
	mongotest.StreamWindow(srv, 3)
	ctx := ctx(t)
	c, other := db.Collection("c"), db.Collection("other")
	mustDo(t, func() error { return db.CreateCollection(ctx, "c") })
	mustDo(t, func() error { return db.CreateCollection(ctx, "other") })

	type stream struct {
		name     string
		w        watcher
		pipeline mongo.Pipeline
		opts     func() *options.ChangeStreamOptionsBuilder
		check    func(ev bson.Raw) error
		cs       *mongo.ChangeStream
		want     []string
	}
	open := func(s *stream, resume bson.Raw) *mongo.ChangeStream {
		o := s.opts()
		if resume != nil {
			o.SetResumeAfter(resume)
		}
		cs := watch(t, ctx, s.w, s.pipeline, o)
		t.Cleanup(func() { _ = cs.Close(context.Background()) })
		return cs
	}
	final := map[int32]int32{} // the current n of each document of c
	streams := []*stream{
		{name: "collection", w: c, opts: options.ChangeStream},
		{name: "database batchSize 4", w: db, opts: func() *options.ChangeStreamOptionsBuilder { return options.ChangeStream().SetBatchSize(4) }},
		{name: "updates with updateLookup", w: c, pipeline: mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "update"}}}}},
			opts: func() *options.ChangeStreamOptionsBuilder {
				return options.ChangeStream().SetFullDocument(options.UpdateLookup)
			},
			check: func(ev bson.Raw) error {
				id := ev.Lookup("documentKey", "_id").Int32()
				if got := ev.Lookup("fullDocument", "n").Int32(); got != final[id] {
					return fmt.Errorf("updateLookup of %d: n=%d, want the current %d", id, got, final[id])
				}
				return nil
			}},
	}
	for _, s := range streams {
		s.cs = open(s, nil)
	}
	var coll, db2, updates []string
	note := func(inC bool, op string, id int32) {
		e := fmt.Sprintf("%s %d", op, id)
		if inC {
			coll = append(coll, e)
			if op == "update" {
				updates = append(updates, e)
			}
		}
		db2 = append(db2, e)
	}
	for i := int32(0); i < 30; i++ {
		mustDo(t, func() error {
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: int32(0)}})
			return err
		})
		note(true, "insert", i)
		final[i] = 0
		if i%3 == 0 {
			mustDo(t, func() error { _, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: 100 + i}}); return err })
			note(false, "insert", 100+i)
		}
	}
	for i := int32(0); i < 30; i += 4 {
		mustDo(t, func() error {
			_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}})
			return err
		})
		note(true, "update", i)
		final[i]++
	}
	// A transaction: its events share a cluster time and come together.
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		for i := int32(40); i < 45; i++ {
			if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: int32(0)}}); err != nil {
				return nil, err
			}
			if _, err := other.InsertOne(sctx, bson.D{{Key: "_id", Value: 100 + i}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := int32(40); i < 45; i++ {
		note(true, "insert", i)
		note(false, "insert", 100+i)
		final[i] = 0
	}
	mustDo(t, func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: int32(3)}}); return err })
	note(true, "delete", 3)
	streams[0].want, streams[1].want, streams[2].want = coll, db2, updates

	for _, s := range streams {
		var got []string
		var tokens []string
		var evs []bson.Raw
		for len(got) < len(s.want) {
			if !s.cs.Next(ctx) {
				t.Fatalf("%s: stream ended after %d events: %v", s.name, len(got), s.cs.Err())
			}
			ev := s.cs.Current
			got = append(got, fmt.Sprintf("%s %d", ev.Lookup("operationType").StringValue(), ev.Lookup("documentKey", "_id").Int32()))
			tokens = append(tokens, ev.Lookup("_id", "_data").StringValue())
			evs = append(evs, append(bson.Raw(nil), ev...))
			if s.check != nil {
				if err := s.check(ev); err != nil {
					t.Errorf("%s: %v", s.name, err)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Fatalf("%s: events\n%v\nwant\n%v", s.name, got, s.want)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("%s: resume token %d (%s) is not after token %d (%s)", s.name, i, tokens[i], i-1, tokens[i-1])
			}
		}
		// Nothing more.
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		more := s.cs.TryNext(tctx)
		cancel()
		if more {
			t.Fatalf("%s: an event past the writes: %v", s.name, s.cs.Current)
		}
		// Resuming after any event returns exactly the rest.
		for _, k := range []int{0, len(evs) / 2, len(evs) - 2} {
			rs := open(s, evs[k].Lookup("_id").Document())
			for j := k + 1; j < len(evs); j++ {
				if !rs.Next(ctx) {
					t.Fatalf("%s: resumed after event %d, the stream ended at %d: %v", s.name, k, j, rs.Err())
				}
				if tok := rs.Current.Lookup("_id", "_data").StringValue(); tok != tokens[j] {
					t.Fatalf("%s: resumed after event %d, event %d has token %s, want %s", s.name, k, j, tok, tokens[j])
				}
			}
		}
	}

	// The token a drained stream ends on (a high-water mark past the last
	// event) resumes with the next write and nothing before it.
	pbrt := streams[0].cs.ResumeToken()
	if pbrt == nil {
		t.Fatal("the drained collection stream has no resume token")
	}
	rs := open(streams[0], pbrt)
	mustDo(t, func() error { _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(99)}}); return err })
	if !rs.Next(ctx) {
		t.Fatal(rs.Err())
	}
	if got := fmt.Sprintf("%s %d", rs.Current.Lookup("operationType").StringValue(), rs.Current.Lookup("documentKey", "_id").Int32()); got != "insert 99" {
		t.Fatalf("resumed from the drained stream's token: first event %s, want insert 99", got)
	}
}
