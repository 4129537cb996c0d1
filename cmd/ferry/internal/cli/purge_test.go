package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

func hwmToken(t *testing.T, ts bson.Timestamp) bson.Raw {
	t.Helper()
	data, _ := resumetoken.Token{ClusterTime: ts, Version: 2, TokenType: resumetoken.TypeHighWaterMark}.Encode()
	if data == "" {
		t.Fatal("could not encode a token")
	}
	raw, err := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCheckpointBound: the purge bound is the lowest resume position of all
// partitions, and there is none while any partition lacks a checkpoint or a
// token or is not running.
func TestCheckpointBound(t *testing.T) {
	opaque, _ := bson.Marshal(bson.D{{Key: "_data", Value: "not hex"}})
	cp := func(p int, ct uint32, tok bson.Raw, st checkpoint.State) checkpoint.Checkpoint {
		return checkpoint.Checkpoint{Partition: p, ClusterTime: bson.Timestamp{T: ct}, Token: tok, State: st}
	}
	run := checkpoint.StateRunning
	cases := []struct {
		name string
		cps  []checkpoint.Checkpoint
		n    int
		want uint32 // 0: no bound
		skip string
	}{
		{"none", nil, 1, 0, "partition 0 has no checkpoint"},
		{"none, zero partitions", nil, 0, 0, "no checkpoint"},
		{"one", []checkpoint.Checkpoint{cp(0, 10, opaque, run)}, 1, 10, ""},
		{"the token's time wins", []checkpoint.Checkpoint{cp(0, 10, hwmToken(t, bson.Timestamp{T: 20}), run)}, 1, 20, ""},
		{"min", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(1, 20, hwmToken(t, bson.Timestamp{T: 25}), run), cp(2, 40, opaque, run)}, 3, 25, ""},
		{"missing partition", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(2, 40, opaque, run)}, 3, 0, "partition 1 has no checkpoint"},
		{"origin only", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(1, 40, nil, run)}, 2, 0, "partition 1 has no resume token"},
		{"needs backfill", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(1, 40, opaque, checkpoint.StateNeedsBackfill)}, 2, 0, "needs-backfill"},
		{"invalidated", []checkpoint.Checkpoint{cp(0, 30, opaque, checkpoint.StateInvalidated)}, 1, 0, "invalidated"},
		{"stalled", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(1, 40, opaque, checkpoint.StateStalled)}, 2, 0, "stalled"},
		{"no time", []checkpoint.Checkpoint{cp(0, 0, opaque, run)}, 1, 0, "no clusterTime"},
		{"a surplus partition counts too", []checkpoint.Checkpoint{cp(0, 30, opaque, run), cp(1, 5, opaque, run)}, 1, 5, ""},
	}
	for _, c := range cases {
		pos, skip := checkpointBound(c.cps, c.n)
		if c.skip != "" {
			if !strings.Contains(skip, c.skip) || !pos.IsZero() {
				t.Errorf("%s: bound %v, skip %q; want no bound, %q", c.name, pos, skip, c.skip)
			}
			continue
		}
		if skip != "" || pos != (bson.Timestamp{T: c.want}) {
			t.Errorf("%s: bound %v, skip %q; want %d", c.name, pos, skip, c.want)
		}
	}
	if got := purgeInterval(24 * time.Hour); got != 10*time.Minute {
		t.Errorf("purgeInterval(24h) = %v", got)
	}
	if got := purgeInterval(time.Minute); got != 15*time.Second {
		t.Errorf("purgeInterval(1m) = %v", got)
	}
}

// TestRunMongoProjectionPurgesTombstones runs the daemon with the mongodb
// sink in a two-partition group and a fast purge loop. Tombstones stay while
// they are younger than tombstone_retention (the server's clock decides),
// and, once older, while a partition has no checkpoint, is stalled, or its
// checkpoint is still before the deletes; they go once every partition's
// checkpoint is past them, and no pass ever purges before that.
func TestRunMongoProjectionPurgesTombstones(t *testing.T) {
	env := newProjectionEnv(t, "", ", tombstone_retention: 1m")
	srv, cfgPath, client := env.srv, env.cfgPath, env.client
	ctx := context.Background()
	src, proj := env.src, env.proj
	stateDB := client.Database("ferry_state")
	store, err := mongostore.New(stateDB)
	if err != nil {
		t.Fatal(err)
	}
	tombstones := func() int64 {
		n, err := proj.CountDocuments(ctx, bson.D{{Key: "_ferry.del", Value: true}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// lastDelete is the clusterTime of the newest tombstone; deletes maps
	// every deleted _id to its delete's clusterTime.
	var lastDelete bson.Timestamp
	deletes := map[int32]bson.Timestamp{}
	// position returns the lowest clusterTime a partition resumes from, or
	// why there is none.
	position := func() (bson.Timestamp, string) {
		cps, err := store.List(ctx, "orders")
		if err != nil {
			return bson.Timestamp{}, err.Error()
		}
		if len(cps) != 2 {
			return bson.Timestamp{}, fmt.Sprintf("%d checkpoints", len(cps))
		}
		var pos bson.Timestamp
		for i, cp := range cps {
			tok, err := resumetoken.Parse(cp.Token)
			if err != nil || cp.State != checkpoint.StateRunning {
				return bson.Timestamp{}, fmt.Sprintf("partition %d", cp.Partition)
			}
			if i == 0 || tok.ClusterTime.Before(pos) {
				pos = tok.ClusterTime
			}
		}
		return pos, ""
	}
	// behind says which partition's checkpoint is not past every delete
	// ("" when all are).
	behind := func() string {
		pos, why := position()
		if why == "" && !lastDelete.Before(pos) {
			why = fmt.Sprintf("a partition at %v", pos)
		}
		return why
	}
	// purgedEarly names the tombstones gone although a partition's
	// checkpoint is not past their delete. Checkpoints only move forward:
	// one not past a delete now was not past it during the pass either.
	purgedEarly := func() string {
		pos, why := position()
		var gone []string
		for id, ct := range deletes {
			if n, _ := proj.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}}); n == 0 && (why != "" || !ct.Before(pos)) {
				gone = append(gone, fmt.Sprintf("%d (delete at %v, checkpoints at %v %s)", id, ct, pos, why))
			}
		}
		return strings.Join(gone, ", ")
	}

	var mu sync.Mutex
	var passes []purgeResult
	var violations []string
	purgeTestHooks.Store(&purgeHooks{
		interval: func(time.Duration) time.Duration { return 20 * time.Millisecond },
		pass: func(stream string, r purgeResult) {
			// Checkpoints only move forward: one behind now was behind
			// during the pass.
			var v string
			if r.Purged > 0 {
				if early := purgedEarly(); early != "" {
					v = fmt.Sprintf("purged tombstones before every checkpoint passed them: %s", early)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			passes = append(passes, r)
			if v != "" {
				violations = append(violations, v)
			}
		},
	})
	t.Cleanup(func() { purgeTestHooks.Store(nil) })
	passCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(passes)
	}
	// waitPasses waits until n more passes ran, none failing.
	waitPasses := func(run *running, n int) {
		t.Helper()
		from := passCount()
		poll.Until(t, 30*time.Second, func() error {
			run.alive(t)
			mu.Lock()
			defer mu.Unlock()
			for _, r := range passes[from:] {
				if r.Err != nil {
					t.Fatalf("purge pass failed: %v", r.Err)
				}
			}
			if len(passes) < from+n {
				return fmt.Errorf("%d purge passes ran, want %d", len(passes)-from, n)
			}
			return nil
		})
	}

	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry_state", 2)
	// Partition 1's position before every delete, as stored.
	cpColl := stateDB.Collection("checkpoints")
	id1 := mongostore.ID("orders", 1)
	early, err := cpColl.FindOne(ctx, bson.D{{Key: "_id", Value: id1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	rewind := bson.D{{Key: "token", Value: early.Lookup("token")}, {Key: "clusterTime", Value: early.Lookup("clusterTime")}}
	for i := range 10 {
		if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 6}}}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if n := tombstones(); n != 6 {
			return fmt.Errorf("%d tombstones, want 6", n)
		}
		return nil
	})
	cur, err := proj.Find(ctx, bson.D{{Key: "_ferry.del", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	var tombs []struct {
		ID int32 `bson:"_id"`
		F  struct {
			CT bson.Timestamp `bson:"ct"`
		} `bson:"_ferry"`
	}
	if err := cur.All(ctx, &tombs); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tombs {
		deletes[tb.ID] = tb.F.CT
		if lastDelete.Before(tb.F.CT) {
			lastDelete = tb.F.CT
		}
	}
	// Every checkpoint passes the deletes, but the tombstones are younger
	// than the retention: passes run and keep them.
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if b := behind(); b != "" {
			return fmt.Errorf("%s is behind the deletes", b)
		}
		return nil
	})
	waitPasses(run, 3)
	if n := tombstones(); n != 6 {
		t.Fatalf("%d tombstones left within the retention, want 6", n)
	}
	run.stop(t)

	// The retention has passed. With one partition behind, stalled or
	// without a checkpoint, a pass purges nothing.
	srv.AdvanceClock(2 * time.Minute)
	sk, err := mongoproj.New(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := sk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	p := &tombstonePurger{stream: "orders", partitions: 2, retention: time.Minute, sink: sk, store: store, state: stateDB}
	var saved bson.Raw
	if saved, err = cpColl.FindOne(ctx, bson.D{{Key: "_id", Value: id1}}).Raw(); err != nil {
		t.Fatal(err)
	}
	set := func(update bson.D) {
		t.Helper()
		if _, err := cpColl.UpdateOne(ctx, bson.D{{Key: "_id", Value: id1}}, bson.D{{Key: "$set", Value: update}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what, skip string) {
		t.Helper()
		r := p.pass(ctx)
		if r.Err != nil || r.Purged != 0 || !strings.Contains(r.Skip, skip) || tombstones() != 6 {
			t.Fatalf("%s: pass = %+v, %d tombstones left; want none purged (skip %q)", what, r, tombstones(), skip)
		}
	}
	set(rewind)
	check("partition 1 behind the deletes", "")
	set(bson.D{{Key: "token", Value: saved.Lookup("token")}, {Key: "state", Value: string(checkpoint.StateStalled)}})
	check("partition 1 stalled", "partition 1 is stalled")
	set(bson.D{{Key: "token", Value: nil}, {Key: "state", Value: ""}})
	check("partition 1 without a token", "partition 1 has no resume token")
	if _, err := cpColl.DeleteOne(ctx, bson.D{{Key: "_id", Value: id1}}); err != nil {
		t.Fatal(err)
	}
	check("partition 1 without a checkpoint", "partition 1 has no checkpoint")

	// The daemon restarts with partition 1 behind the deletes: it replays
	// them, its checkpoint passes them, and only then are they purged.
	if _, err := cpColl.InsertOne(ctx, saved); err != nil {
		t.Fatal(err)
	}
	set(rewind)
	run = startRun(t, cfgPath)
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if n := tombstones(); n != 0 {
			return fmt.Errorf("%d tombstones not purged", n)
		}
		return nil
	})
	if b := behind(); b != "" {
		t.Fatalf("tombstones purged while %s is behind them", b)
	}
	if n, _ := proj.CountDocuments(ctx, mongoproj.Live()); n != 4 {
		t.Fatalf("%d live documents after the purge, want 4", n)
	}
	run.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatal(strings.Join(violations, "\n"))
	}
	var total int64
	for _, r := range passes {
		total += r.Purged
	}
	if total != 6 {
		t.Fatalf("the passes purged %d tombstones, want 6", total)
	}
	if !strings.Contains(run.errOut.String(), `"msg":"purged tombstones"`) {
		t.Fatalf("no purge logged:\n%s", run.errOut.String())
	}
}
