package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/mongotest"
)

// history is a small clean run: two documents, doc a inserted, updated,
// replaced and deleted, doc b inserted and updated, each change delivered
// once (b's update twice under one id: a redelivery), plus a 503 answer
// that is not an effect.
func history(t0 time.Time) checkInput {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	return checkInput{
		Writes: []write{
			{Doc: "a", V: 1, Op: "insert", At: at(0)},
			{Doc: "b", V: 1, Op: "insert", At: at(10)},
			{Doc: "a", V: 2, Op: "update", At: at(20)},
			{Doc: "b", V: 2, Op: "update", At: at(30)},
			{Doc: "a", V: 3, Op: "replace", At: at(40)},
			{Doc: "a", V: 4, Op: "delete", At: at(50)},
		},
		Deliveries: []delivery{
			{ID: "e1", Op: "insert", Doc: "a", V: 1, Epoch: 1, At: at(5), Code: 200},
			{ID: "e2", Op: "insert", Doc: "b", V: 1, Epoch: 1, At: at(15), Code: 200},
			{ID: "e3", Op: "update", Doc: "a", V: 2, Epoch: 1, At: at(25), Code: 503},
			{ID: "e3", Op: "update", Doc: "a", V: 2, Epoch: 2, At: at(300), Code: 200},
			{ID: "e4", Op: "update", Doc: "b", V: 2, Epoch: 1, At: at(35), Code: 200},
			{ID: "e4", Op: "update", Doc: "b", V: 2, Epoch: 1, At: at(36), Code: 200},
			{ID: "e5", Op: "replace", Doc: "a", V: 3, Epoch: 2, At: at(310), Code: 200},
			{ID: "e6", Op: "delete", Doc: "a", V: -1, Epoch: 2, At: at(320), Code: 200},
		},
		Faults:   []fault{{Kind: kill9, Start: at(22)}, {Kind: http5xx, Start: at(45)}},
		Restarts: []time.Time{at(23), at(24), at(60)},
	}
}

func TestCheckClean(t *testing.T) {
	t0 := time.Now()
	r := check(history(t0))
	if p := r.problems(10); len(p) > 0 {
		t.Fatalf("a clean history has problems:\n%s", strings.Join(p, "\n"))
	}
	if r.Writes != 6 || r.Delivered != 6 {
		t.Errorf("writes=%d delivered=%d, want 6 and 6 (a redelivery under the same id is not a second effect)", r.Writes, r.Delivered)
	}
	// a v2 written at 20 ms (before the first fault) first applied at 300
	// ms; in the kill9 window (22–45 ms): b v2 (5 ms) and a v3 (270 ms);
	// in the http5xx window: a's delete (270 ms).
	if r.Baseline != 280*time.Millisecond {
		t.Errorf("baseline worst delay %v, want 280ms", r.Baseline)
	}
	if len(r.Faults) != 2 || r.Faults[0].WorstDelay != 270*time.Millisecond || r.Faults[0].Writes != 2 ||
		r.Faults[1].WorstDelay != 270*time.Millisecond || r.Faults[1].Writes != 1 {
		t.Errorf("per fault: %+v", r.Faults)
	}
	if r.WorstDelay != 270*time.Millisecond {
		t.Errorf("worst delay %v, want 270ms", r.WorstDelay)
	}
	if r.Restarts != 3 || r.Faults[0].Restarts != 2 || r.Faults[1].Restarts != 1 {
		t.Errorf("restarts %d (%d, %d), want 3 (2, 1)", r.Restarts, r.Faults[0].Restarts, r.Faults[1].Restarts)
	}
}

// TestCheckCatches doctors the clean history once per kind of violation:
// the checker must report exactly that violation, naming the document and
// the versions.
func TestCheckCatches(t *testing.T) {
	cases := []struct {
		name   string
		doctor func(in *checkInput)
		want   string // a line of problems()
		count  func(r checkResult) int
	}{
		{"a lost change", func(in *checkInput) {
			in.Deliveries = drop(in.Deliveries, "e5")
		}, "lost: a v3 replace: made by the writer, never delivered", func(r checkResult) int { return len(r.Lost) }},
		{"a change only answered 503", func(in *checkInput) {
			in.Deliveries = drop(in.Deliveries, "e3")
			in.Deliveries = append(in.Deliveries, delivery{ID: "e3", Op: "update", Doc: "a", V: 2, Epoch: 2, Code: 503})
		}, "lost: a v2 update: made by the writer, never delivered", func(r checkResult) int { return len(r.Lost) }},
		{"a lost TTL expiry", func(in *checkInput) {
			in.Writes = append(in.Writes, write{Doc: "b", V: 3, Op: "delete", TTL: true})
		}, "lost: b v3 delete: made by the writer, never delivered", func(r checkResult) int { return len(r.Lost) }},
		{"a duplicate effect", func(in *checkInput) {
			in.Deliveries = append(in.Deliveries, delivery{ID: "e4-again", Op: "update", Doc: "b", V: 2, Epoch: 2, Code: 200})
		}, "duplicate effect: b v2 update applied under 2 event ids (e4, e4-again)", func(r checkResult) int { return len(r.Dups) }},
		{"an order violation", func(in *checkInput) {
			// a's replace (v3) arrives before its update (v2) is accepted.
			d := in.Deliveries
			d[3], d[6] = d[6], d[3]
		}, "order: a: v2 delivered after v3", func(r checkResult) int { return len(r.Order) }},
		{"a delete before the last update", func(in *checkInput) {
			d := in.Deliveries
			d[6], d[7] = d[7], d[6]
		}, "order: a: v3 delivered after v4", func(r checkResult) int { return len(r.Order) }},
		{"a zombie's effect", func(in *checkInput) {
			in.Deliveries[6].Epoch = 1 // a v3 by epoch 1 after epoch 2 delivered a v2
		}, "zombie effect: a v3 first delivered by epoch 1 after epoch 2 had delivered the document", func(r checkResult) int { return len(r.Zombie) }},
		{"a change nobody made", func(in *checkInput) {
			in.Deliveries = append(in.Deliveries, delivery{ID: "e9", Op: "update", Doc: "b", V: 7, Epoch: 1, Code: 200})
		}, "unexpected: update of b v7 (event e9): the writer made no such change", func(r checkResult) int { return len(r.Unexpected) }},
		{"a final state not delivered", func(in *checkInput) {
			in.FinalState = true
			in.Live = map[string]int{"b": 2}
			in.Deliveries = drop(in.Deliveries, "e4")
		}, "lost: b: its latest version v2 was never delivered", func(r checkResult) int { return len(r.Lost) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := history(time.Now())
			tc.doctor(&in)
			r := check(in)
			p := r.problems(10)
			if tc.count(r) != 1 || len(p) != 1 || p[0] != tc.want {
				t.Fatalf("problems:\n%s\nwant exactly:\n%s", strings.Join(p, "\n"), tc.want)
			}
		})
	}
}

// TestCheckFinalStateAcceptsBackfill: after lost history, intermediate
// changes may be missing; the latest version delivered by a backfill scan
// is enough, and a scan's document is not an order violation or a
// duplicate effect.
func TestCheckFinalStateAcceptsBackfill(t *testing.T) {
	in := history(time.Now())
	in.FinalState = true
	in.Live = map[string]int{"b": 2}
	in.Deliveries = drop(in.Deliveries, "e4")
	in.Deliveries = append(in.Deliveries, delivery{ID: "bf-1", Op: "backfill", Doc: "b", V: 2, Code: 200, Backfill: true},
		delivery{ID: "bf-2", Op: "backfill", Doc: "b", V: 1, Code: 200, Backfill: true})
	if p := check(in).problems(10); len(p) > 0 {
		t.Fatalf("problems:\n%s", strings.Join(p, "\n"))
	}
	in.Deliveries = append(in.Deliveries, delivery{ID: "bf-3", Op: "backfill", Doc: "b", V: 5, Code: 200, Backfill: true})
	if p := check(in).problems(10); len(p) != 1 || !strings.HasPrefix(p[0], "unexpected: backfill of b v5") {
		t.Fatalf("a scanned version the writer never made: %q", p)
	}
}

// TestCheckUnrecoverable: after lost history, a live document whose
// latest version never arrived is unrecoverable, not lost, when its
// partition is one a member gave up recovering (and said so); in any
// other partition it is lost.
func TestCheckUnrecoverable(t *testing.T) {
	in := history(time.Now())
	in.FinalState = true
	in.Live = map[string]int{"b": 2}
	in.Deliveries = drop(in.Deliveries, "e4") // b v2 never delivered
	if r := check(in); len(r.Lost) != 1 || r.Lost[0].Doc != "b" || len(r.Unrecoverable) != 0 {
		t.Fatalf("no partition given up: lost %v, unrecoverable %v; want b lost", r.Lost, r.Unrecoverable)
	}
	in.PartitionOf = func(doc string) int { return map[string]int{"a": 0, "b": 3}[doc] }
	in.GaveUp = map[int]bool{0: true}
	if r := check(in); len(r.Lost) != 1 || r.Lost[0].Doc != "b" || len(r.Unrecoverable) != 0 {
		t.Fatalf("a's partition given up: lost %v, unrecoverable %v; want b lost", r.Lost, r.Unrecoverable)
	}
	in.GaveUp = map[int]bool{3: true}
	r := check(in)
	if len(r.Lost) != 0 || len(r.Unrecoverable) != 1 || r.Unrecoverable[0] != (change{Doc: "b", V: 2, Op: "latest"}) {
		t.Fatalf("b's partition given up: lost %v, unrecoverable %v; want b v2 unrecoverable", r.Lost, r.Unrecoverable)
	}
	if p := r.problems(10); len(p) > 0 {
		t.Fatalf("an unrecoverable document is no problem of the checker's: %q", p)
	}
}

// TestPartitionOf agrees with the members' partition filter, the
// expression ferry's stream matches on (ferry.PartitionMatch under
// HashRange, the partitioning of a new stream), evaluated by the emulator
// over the writer's _ids.
func TestPartitionOf(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(ctx) }()
	coll := client.Database("chaos").Collection("docs")
	var docs []any
	for i := range 200 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("d-%05d", i)}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	type doc struct {
		ID string `bson:"_id"`
		P  int64  `bson:"p"`
	}
	var got []doc
	for p := range partitions {
		cur, err := coll.Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: "$expr", Value: ferry.PartitionMatch(ferry.HashRange, "$_id", p, partitions)}}}},
			{{Key: "$project", Value: bson.D{{Key: "p", Value: bson.D{{Key: "$literal", Value: int64(p)}}}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var in []doc
		if err := cur.All(ctx, &in); err != nil {
			t.Fatal(err)
		}
		got = append(got, in...)
	}
	seen := map[int]bool{}
	for _, d := range got {
		if p := partitionOf(d.ID); p != int(d.P) {
			t.Errorf("partitionOf(%s) = %d, the server's filter says %d", d.ID, p, d.P)
		}
		seen[int(d.P)] = true
	}
	if len(got) != 200 || len(seen) != partitions {
		t.Errorf("%d documents in partitions %v, want 200 in all %d", len(got), seen, partitions)
	}
}

func drop(ds []delivery, id string) []delivery {
	var out []delivery
	for _, d := range ds {
		if d.ID != id {
			out = append(out, d)
		}
	}
	return out
}

func TestParseDelivery(t *testing.T) {
	cases := []struct {
		body string
		want delivery
	}{
		{`{"_id":{"_data":"82"},"operationType":"insert","documentKey":{"_id":"d-00001"},"fullDocument":{"_id":"d-00001","v":{"$numberInt":"1"}}}`,
			delivery{Op: "insert", Doc: "d-00001", V: 1}},
		{`{"_id":{"_data":"82"},"operationType":"update","documentKey":{"_id":"d-00001"},"updateDescription":{"updatedFields":{"v":{"$numberInt":"7"},"n":3}}}`,
			delivery{Op: "update", Doc: "d-00001", V: 7}},
		{`{"_id":{"_data":"82"},"operationType":"replace","documentKey":{"_id":"d-00002"},"fullDocument":{"_id":"d-00002","v":4}}`,
			delivery{Op: "replace", Doc: "d-00002", V: 4}},
		{`{"_id":{"_data":"82"},"operationType":"delete","documentKey":{"_id":"d-00002"}}`,
			delivery{Op: "delete", Doc: "d-00002", V: -1}},
		{`{"_id":"d-00003","v":{"$numberInt":"9"},"n":1}`, delivery{Op: "backfill", Doc: "d-00003", V: 9, Backfill: true}},
	}
	for _, tc := range cases {
		got, err := parseDelivery([]byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("parseDelivery(%s) = %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
	if _, err := parseDelivery([]byte(`{"x":1}`)); err == nil {
		t.Error("a body that is neither a change event nor a document with a string _id was accepted")
	}
}
