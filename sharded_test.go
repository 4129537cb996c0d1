package ferry_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// newShardedEnv is newEnv against a sharded cluster of 2 shards: the
// emulated one (each shard's periodic no-op every 200 ms, as test
// clusters lower periodicNoopIntervalSecs) or the mongos
// $FERRY_TEST_MONGODB_SHARDED_URI names.
func newShardedEnv(t *testing.T, opts ...emutest.Option) *env {
	t.Helper()
	client, srv := emutest.ShardedClient(t, 2, append([]emutest.Option{emutest.NoopInterval(200 * time.Millisecond)}, opts...)...)
	return envOn(t, client, srv)
}

// admin runs an admin command through the mongos.
func (e *env) admin(cmd bson.D) bson.Raw {
	e.t.Helper()
	raw, err := e.client.Database("admin").RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		e.t.Fatalf("%s: %v", cmd[0].Key, err)
	}
	return raw
}

// shardIDs lists the cluster's shards (config.shards), sorted.
func (e *env) shardIDs() []string {
	e.t.Helper()
	cur, err := e.client.Database("config").Collection("shards").Find(context.Background(), bson.D{})
	if err != nil {
		e.t.Fatal(err)
	}
	var shards []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(context.Background(), &shards); err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, s := range shards {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	if len(ids) < 2 {
		e.t.Fatalf("the cluster has shards %v; the test needs 2", ids)
	}
	return ids
}

// ownerOf is the shard that owns the chunk of coll holding shard key
// value key (config.chunks).
func (e *env) ownerOf(coll string, key bson.D) string {
	e.t.Helper()
	owner, err := e.ownerOfErr(coll, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return owner
}

// ownerOfErr is ownerOf, for any goroutine.
func (e *env) ownerOfErr(coll string, key bson.D) (string, error) {
	ctx := context.Background()
	var meta struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := e.client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: e.db.Name() + "." + coll}}).Decode(&meta); err != nil {
		return "", fmt.Errorf("config.collections of %s: %w", coll, err)
	}
	cur, err := e.client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: meta.UUID}})
	if err != nil {
		return "", err
	}
	var chunks []struct {
		Min   bson.Raw `bson:"min"`
		Shard string   `bson:"shard"`
	}
	if err := cur.All(ctx, &chunks); err != nil {
		return "", err
	}
	// The chunk with the greatest min at or below key (one-field keys only).
	owner := ""
	var best bson.Raw
	want, _ := bson.Marshal(key)
	for _, c := range chunks {
		if compareOneField(c.Min, want) <= 0 && (best == nil || compareOneField(c.Min, best) > 0) {
			owner, best = c.Shard, c.Min
		}
	}
	if owner == "" {
		return "", fmt.Errorf("no chunk of %s holds %v", coll, key)
	}
	return owner, nil
}

// compareOneField compares the single values of two one-field documents,
// with MinKey and MaxKey at the ends and strings by bytes: enough for the
// shard keys these tests use.
func compareOneField(a, b bson.Raw) int {
	rank := func(d bson.Raw) (int, string) {
		elems, _ := d.Elements()
		v := elems[0].Value()
		switch v.Type {
		case bson.TypeMinKey:
			return 0, ""
		case bson.TypeMaxKey:
			return 3, ""
		case bson.TypeString:
			return 2, v.StringValue()
		}
		n, _ := v.AsInt64OK()
		return 1, fmt.Sprintf("%020d", n+1<<62)
	}
	ra, sa := rank(a)
	rb, sb := rank(b)
	if ra != rb {
		return ra - rb
	}
	return strings.Compare(sa, sb)
}

// shardOn shards collection coll on key through the mongos and returns
// its namespace (enableSharding first, its error ignored: shardCollection
// is what must succeed).
func (e *env) shardOn(coll string, key bson.D) string {
	e.t.Helper()
	ns := e.db.Name() + "." + coll
	_ = e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "enableSharding", Value: e.db.Name()}}).Err()
	e.admin(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key}})
	return ns
}

// shardByRegion shards collection coll on {region: 1} and places the
// regions from "m" on, "us" among them, on another shard than those
// before, "eu" among them: a document's shard is its region's.
func (e *env) shardByRegion(coll string) (eu, us string) {
	e.t.Helper()
	ns := e.shardOn(coll, bson.D{{Key: "region", Value: 1}})
	e.admin(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "region", Value: "m"}}}})
	ids := e.shardIDs()
	eu = e.ownerOf(coll, bson.D{{Key: "region", Value: "eu"}})
	us = ids[0]
	if us == eu {
		us = ids[1]
	}
	if e.ownerOf(coll, bson.D{{Key: "region", Value: "us"}}) != us {
		e.admin(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "region", Value: "us"}}}, {Key: "to", Value: us}})
	}
	if got := e.ownerOf(coll, bson.D{{Key: "region", Value: "us"}}); got != us || got == eu {
		e.t.Fatalf("region us on %s, eu on %s; want two shards", got, eu)
	}
	return eu, us
}

// keyString is a documentKey as a map key (relaxed Extended JSON).
func keyString(key bson.Raw) string {
	b, err := bson.MarshalExtJSON(key, false, false)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// keyStringOf is keyString of a documentKey written as a bson.D.
func keyStringOf(key bson.D) string { return keyString(must(bson.Marshal(key))) }

// effects records, per documentKey, the v of every document version the
// handler was handed (insert, update and replace from fullDocument,
// backfill rows), and how often each event id was handed over.
type effects struct {
	mu      sync.Mutex
	byKey   map[string][]int32
	ids     map[string]int
	backKey map[string]int // backfill rows per documentKey
	lanes   map[string]map[int]bool
	starts  int
	control map[string]int      // events without a documentKey, by operation type
	opOf    map[string]string   // their operation types, by event id
	by      map[string][]string // event id → the tags of the consumers that handed it over
	// opsByKey counts the events per documentKey and operation type.
	opsByKey map[string]map[string]int
	n        int
	keyed    int // events with a documentKey
}

func newEffects() *effects {
	return &effects{byKey: map[string][]int32{}, ids: map[string]int{}, backKey: map[string]int{}, lanes: map[string]map[int]bool{},
		opsByKey: map[string]map[string]int{}}
}

func (f *effects) handle(ctx context.Context, ev *ferry.Event) error { return f.tagged("")(ctx, ev) }

// tagged is handle, remembering which consumer (tag) handed each event
// over, for the report of duplicates.
func (f *effects) tagged(tag string) ferry.Handler {
	return func(_ context.Context, ev *ferry.Event) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.by == nil {
			f.by = map[string][]string{}
		}
		f.by[ev.ID()] = append(f.by[ev.ID()], tag)
		return f.handleLocked(ev)
	}
}

func (f *effects) handleLocked(ev *ferry.Event) error {
	f.n++
	f.ids[ev.ID()]++
	if ev.DocumentKey == nil {
		if f.control == nil {
			f.control = map[string]int{}
		}
		f.control[ev.OperationType]++
		if f.opOf == nil {
			f.opOf = map[string]string{}
		}
		f.opOf[ev.ID()] = ev.OperationType
		return nil
	}
	f.keyed++
	k := keyString(ev.DocumentKey)
	if f.opsByKey[k] == nil {
		f.opsByKey[k] = map[string]int{}
	}
	f.opsByKey[k][ev.OperationType]++
	if ev.Backfill {
		f.backKey[k]++
	}
	id := keyString(bson.Raw(must(bson.Marshal(bson.D{{Key: "_id", Value: ev.DocumentKey.Lookup("_id")}}))))
	if f.lanes[id] == nil {
		f.lanes[id] = map[int]bool{}
	}
	f.lanes[id][ev.Lane()] = true
	if ev.FullDocument != nil {
		if v, ok := ev.FullDocument.Lookup("v").Int32OK(); ok {
			f.byKey[k] = append(f.byKey[k], v)
		}
	} else if ev.OperationType == "update" {
		f.byKey[k] = append(f.byKey[k], -1) // the lookup found no document
	}
	return nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// count is how many events were handed over.
func (f *effects) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// versions is what the handler saw of one document, by documentKey.
func (f *effects) versions(key bson.D) []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.byKey[keyStringOf(key)]...)
}

// duplicates lists the event ids handed over more than once.
func (f *effects) duplicates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, n := range f.ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d %v", id[:12], n, f.by[id]))
		}
	}
	return out
}

// TestShardedSameIDTwoDocuments: on a collection sharded on {region: 1},
// two documents with _id 1 live on two shards, {region: "eu", _id: 1} and
// {region: "us", _id: 1}, and they are two documents everywhere: the
// snapshot delivers a row for each (with chunks of one document, so a
// chunk ends between them), each row and change carries its own
// documentKey and event id, and each document's versions arrive in
// order.
func TestShardedSameIDTwoDocuments(t *testing.T) {
	e := newShardedEnv(t)
	e.shardByRegion("c")
	c := e.db.Collection("c")
	ctx := context.Background()
	insert(t, c,
		bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: "eu"}, {Key: "v", Value: int32(0)}},
		bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: "us"}, {Key: "v", Value: int32(100)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "region", Value: "eu"}, {Key: "v", Value: int32(0)}})
	f := newEffects()
	cons, r := startConsumer(t, e.client, f.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(1),
		ferry.FullDocument("updateLookup"), ferry.Concurrency(8))...)
	// The snapshot first, then the changes.
	poll.Until(t, 30*time.Second, func() error {
		if st := cons.Status(); st.Snapshot == nil || st.Snapshot.Finished.IsZero() {
			return fmt.Errorf("snapshot not finished: %+v", st.Snapshot)
		}
		return nil
	})
	const n = 20
	for i := int32(1); i <= n; i++ {
		for _, d := range []struct {
			region string
			v      int32
		}{{"eu", i}, {"us", 100 + i}} {
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "region", Value: d.region}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: d.v}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eu := bson.D{{Key: "region", Value: "eu"}, {Key: "_id", Value: int32(1)}}
	us := bson.D{{Key: "region", Value: "us"}, {Key: "_id", Value: int32(1)}}
	poll.Until(t, 30*time.Second, func() error {
		for _, k := range []bson.D{eu, us} {
			vs := f.versions(k)
			if len(vs) == 0 || vs[len(vs)-1]%100 != n {
				return fmt.Errorf("%v: versions %v, want the last to be %d", k, vs, n)
			}
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, k := range []bson.D{eu, us, {{Key: "region", Value: "eu"}, {Key: "_id", Value: int32(2)}}} {
		if got := f.backKey[keyStringOf(k)]; got != 1 {
			t.Errorf("snapshot rows of %v: %d, want 1 (rows: %v)", k, got, f.backKey)
		}
	}
	for _, k := range []bson.D{eu, us} {
		vs := f.versions(k)
		for i := 1; i < len(vs); i++ {
			if vs[i] < vs[i-1] {
				t.Errorf("%v: versions %v go back", k, vs)
				break
			}
		}
		if vs[0]%100 != 0 {
			t.Errorf("%v: versions %v, want the snapshot row (v %d) first", k, vs, vs[0]/100*100)
		}
	}
	if d := f.duplicates(); len(d) > 0 {
		t.Errorf("event ids handed over more than once: %v", d)
	}
}

// TestShardedDocumentOneLane: a document's documentKey can change shape
// while it stays one document: inserted without a shard key field its key
// is {_id} (the server leaves a missing field out), and once an update
// sets the field it is {region, _id} (a real server also sends {_id}
// until a shard learns the collection is sharded, SERVER-34090). Its
// events must still share a lane, or a later one could be applied before
// an earlier one: lanes go by namespace and _id, which never changes.
func TestShardedDocumentOneLane(t *testing.T) {
	e := newShardedEnv(t)
	e.shardByRegion("c")
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	r := start(t, e.client, f.handle, e.opts(ferry.FullDocument("updateLookup"), ferry.Concurrency(8))...)
	waitStarted(t, e.store)
	const docs = 8
	for id := int32(0); id < docs; id++ {
		insert(t, c, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: int32(0)}})
		for _, v := range []int32{1, 2} {
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "region", Value: "eu"}, {Key: "v", Value: v}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := f.count(); n < 3*docs {
			return fmt.Errorf("%d of %d events", n, 3*docs)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	shapes := map[string]bool{}
	for k := range f.byKey {
		shapes[strings.SplitN(k, ":", 2)[0]] = true
	}
	if len(shapes) != 2 {
		t.Fatalf("documentKeys seen %v; want both {_id} and {region, _id} shapes", f.byKey)
	}
	for id, lanes := range f.lanes {
		if len(lanes) != 1 {
			t.Errorf("the events of %s went to lanes %v; want one lane", id, lanes)
		}
	}
}

// opsOf is the operation type of a control event by id ("" for others).
// Callers hold f.mu.
func (f *effects) opsOf(id string) string { return f.opOf[id] }

// ops counts, per documentKey, the events handed over by operation type.
func (f *effects) ops() map[string]map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[string]int{}
	for k, n := range f.opsByKey {
		out[k] = maps.Clone(n)
	}
	return out
}

// startPartitions runs partitions 0..n-1 of stream "s" on e.db.c, handing
// every event to f, and waits until each wrote its first checkpoint.
func (e *env) startPartitions(t *testing.T, n int, f *effects, extra ...ferry.Option) []*running {
	t.Helper()
	rs := make([]*running, n)
	for p := range n {
		rs[p] = e.startPartition(t, p, n, f, extra...)
	}
	return rs
}

func (e *env) startPartition(t *testing.T, p, n int, f *effects, extra ...ferry.Option) *running {
	t.Helper()
	opts := e.opts(append([]ferry.Option{ferry.Partition(p, n), ferry.Concurrency(4)}, extra...)...)
	f.mu.Lock()
	f.starts++
	tag := fmt.Sprintf("p%d#%d", p, f.starts)
	f.mu.Unlock()
	r := start(t, e.client, f.tagged(tag), opts...)
	poll.Until(t, 20*time.Second, func() error {
		if cp, err := e.store.Load(context.Background(), "s", p); err != nil || cp.Token == nil {
			return fmt.Errorf("partition %d wrote no checkpoint yet (%v)", p, err)
		}
		return nil
	})
	return r
}

// waitTotal waits until as many events as want counts were handed over.
func (f *effects) waitTotal(t *testing.T, want map[string]map[string]int) {
	t.Helper()
	total := 0
	for _, ops := range want {
		for _, n := range ops {
			total += n
		}
	}
	poll.Until(t, 60*time.Second, func() error {
		f.mu.Lock()
		n := f.keyed
		f.mu.Unlock()
		if n < total {
			return fmt.Errorf("%d of %d events of documents handed over", n, total)
		}
		return nil
	})
}

// wantEach waits until every document of want (documentKey → operation
// → count) was handed over as often as want says, then checks that no
// other event came and no event id came twice.
func (f *effects) wantEach(t *testing.T, want map[string]map[string]int) {
	t.Helper()
	f.waitTotal(t, want)
	got := f.ops()
	lost, extra := 0, 0
	for k, ops := range want {
		for op, n := range ops {
			if got[k][op] < n {
				lost += n - got[k][op]
				if lost <= 5 {
					t.Errorf("%s: %d %s events, want %d", k, got[k][op], op, n)
				}
			}
		}
	}
	for k, ops := range got {
		for op, n := range ops {
			if n > want[k][op] {
				extra += n - want[k][op]
				if extra <= 5 {
					t.Errorf("%s: %d %s events, want %d", k, n, op, want[k][op])
				}
			}
		}
	}
	if d := f.duplicates(); len(d) > 0 {
		t.Errorf("event ids handed over more than once: %v", d)
	}
	t.Logf("%d events: %d lost, %d extra, %d duplicate ids", f.count(), lost, extra, len(f.duplicates()))
}

// wantLookupsFound checks that every update's updateLookup found its
// document (no fullDocument null), wherever it had moved.
func (f *effects) wantLookupsFound(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var missed []string
	for k, vs := range f.byKey {
		if slices.Contains(vs, -1) {
			missed = append(missed, k)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("%d documents had updates without a fullDocument (the lookup missed them after they moved): %v", len(missed), missed[:min(len(missed), 5)])
	}
}

// stopAll stops every consumer of rs; each must stop without an error.
func stopAll(t *testing.T, rs []*running) {
	t.Helper()
	for _, r := range rs {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShardedChunkMigrationsExactlyOnce: while two partitions stream a
// collection sharded on {k: 1}, chunks move between the shards after
// every round of writes (moveChunk: the documents copied to the recipient
// and deleted from the donor, writes the server marks fromMigrate), and
// partition 1 stops and resumes across a migration: every change is
// handed over once, nothing of the migrations is, and every update's
// updateLookup finds its document, which no write deletes, wherever it
// moved.
func TestShardedChunkMigrationsExactlyOnce(t *testing.T) {
	e := newShardedEnv(t)
	ns := e.shardOn("c", bson.D{{Key: "k", Value: 1}})
	shards := e.shardIDs()
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	rs := e.startPartitions(t, 2, f, ferry.FullDocument("updateLookup"))
	want := map[string]map[string]int{}
	key := func(k int32, id any) string {
		return keyStringOf(bson.D{{Key: "k", Value: k}, {Key: "_id", Value: id}})
	}
	ids := map[int32]any{}
	const rounds, per = 6, 10
	for round := int32(0); round < rounds; round++ {
		for i := int32(0); i < per; i++ {
			k := round*per + i
			res, err := c.InsertOne(ctx, bson.D{{Key: "k", Value: k}, {Key: "v", Value: int32(0)}})
			if err != nil {
				t.Fatal(err)
			}
			ids[k] = res.InsertedID
			want[key(k, res.InsertedID)] = map[string]int{"insert": 1}
		}
		// Every document so far is updated once more.
		if _, err := c.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
		for k := int32(0); k < (round+1)*per; k++ {
			want[key(k, ids[k])]["update"]++
		}
		// This round's documents get a chunk of their own, on the shard
		// the previous round's are not on, and the first chunk moves too.
		if round > 0 {
			e.admin(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "k", Value: round * per}}}})
		}
		to := shards[(round+1)%2]
		if e.ownerOf("c", bson.D{{Key: "k", Value: round * per}}) != to {
			e.admin(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: round * per}}}, {Key: "to", Value: to}})
		}
		if round > 0 {
			from := e.ownerOf("c", bson.D{{Key: "k", Value: 0}})
			other := shards[0]
			if other == from {
				other = shards[1]
			}
			e.admin(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: 0}}}, {Key: "to", Value: other}})
		}
		if round == rounds/2 {
			// Partition 1 stops after a migration and resumes from its
			// checkpoint across the next. It stops once everything so far
			// was handed over: a drain leaves the events it did not start
			// (and so the finished ones after them, the checkpoint being
			// before) to be delivered again, at least once.
			f.waitTotal(t, want)
			if err := rs[1].stop(t); err != nil {
				t.Fatal(err)
			}
			rs[1] = e.startPartition(t, 1, 2, f, ferry.FullDocument("updateLookup"))
		}
	}
	f.wantEach(t, want)
	f.wantLookupsFound(t)
	stopAll(t, rs)
}

// TestShardedSnapshotThroughMigrations: a snapshot of a collection
// sharded on {k: 1}, in chunks of 10 documents, while after each of its
// chunks a chunk of the collection moves to the other shard and a
// document is updated: each document gets one snapshot row, keyed by its
// documentKey, and ends in its latest state.
func TestShardedSnapshotThroughMigrations(t *testing.T) {
	e := newShardedEnv(t)
	ns := e.shardOn("c", bson.D{{Key: "k", Value: 1}})
	shards := e.shardIDs()
	c := e.db.Collection("c")
	ctx := context.Background()
	const n = 100
	docs := make([]any, n)
	for k := range n {
		docs[k] = bson.D{{Key: "_id", Value: int32(n - 1 - k)}, {Key: "k", Value: int32(k)}, {Key: "v", Value: int32(0)}}
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for k := int32(20); k < n; k += 20 {
		e.admin(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "k", Value: k}}}})
	}
	// After each snapshot chunk: the next chunk of the collection moves
	// to the other shard, and document k = chunk*7 is updated (v 1).
	var mu sync.Mutex
	var hookErr []error
	moved := 0
	hook := snapshotHookFunc(func(i ferry.SnapshotInfo) {
		if !i.Progress.Running() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		k := int32(moved*20) % n
		moved++
		owner, err := e.ownerOfErr("c", bson.D{{Key: "k", Value: k}})
		to := shards[0]
		if owner == to {
			to = shards[1]
		}
		if err == nil {
			err = e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: k}}}, {Key: "to", Value: to}}).Err()
		}
		if err == nil {
			_, err = c.UpdateOne(ctx, bson.D{{Key: "k", Value: (int32(moved) * 7) % n}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(1)}}}})
		}
		if err != nil {
			hookErr = append(hookErr, err)
		}
	})
	f := newEffects()
	cons, r := startConsumer(t, e.client, f.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(10),
		ferry.FullDocument("updateLookup"), ferry.WithHooks(hook))...)
	poll.Until(t, 60*time.Second, func() error {
		if st := cons.Status(); st.Snapshot == nil || st.Snapshot.Finished.IsZero() {
			return fmt.Errorf("snapshot not finished: %+v", st.Snapshot)
		}
		return nil
	})
	mu.Lock()
	if len(hookErr) > 0 {
		t.Fatalf("moving chunks during the snapshot: %v", hookErr)
	}
	t.Logf("%d chunks moved during the snapshot", moved)
	mu.Unlock()
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var final []struct {
		ID int32 `bson:"_id"`
		K  int32 `bson:"k"`
		V  int32 `bson:"v"`
	}
	if err := cur.All(ctx, &final); err != nil || len(final) != n {
		t.Fatalf("%d documents (%v)", len(final), err)
	}
	poll.Until(t, 30*time.Second, func() error {
		var wrong []string
		for _, d := range final {
			vs := f.versions(bson.D{{Key: "k", Value: d.K}, {Key: "_id", Value: d.ID}})
			if len(vs) == 0 || vs[len(vs)-1] != d.V {
				wrong = append(wrong, fmt.Sprintf("k %d: versions %v, want the last to be %d", d.K, vs, d.V))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%d events, %d documents: %s", f.count(), len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, d := range final {
		key := keyStringOf(bson.D{{Key: "k", Value: d.K}, {Key: "_id", Value: d.ID}})
		rows += f.backKey[key]
		if f.backKey[key] != 1 {
			t.Errorf("k %d: %d snapshot rows, want 1", d.K, f.backKey[key])
		}
	}
	if rows != n || len(f.backKey) != n {
		t.Errorf("%d snapshot rows of %d documentKeys, want %d, one each", rows, len(f.backKey), n)
	}
	if d := f.duplicates(); len(d) > 0 {
		t.Errorf("event ids handed over more than once: %v", d)
	}
}

// TestShardedBalancerExactlyOnce: while two partitions stream a
// collection sharded on {k: 1} that starts as one chunk on one shard, the
// balancer splits and moves its chunks to the other shard: every insert
// and update is handed over once, each update with its document.
func TestShardedBalancerExactlyOnce(t *testing.T) {
	e := newShardedEnv(t, emutest.BalancerInterval(20*time.Millisecond))
	e.shardOn("c", bson.D{{Key: "k", Value: 1}})
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	rs := e.startPartitions(t, 2, f, ferry.FullDocument("updateLookup"))
	want := map[string]map[string]int{}
	const n = 300
	for k := int32(0); k < n; k++ {
		res, err := c.InsertOne(ctx, bson.D{{Key: "k", Value: k}, {Key: "v", Value: int32(0)}})
		if err != nil {
			t.Fatal(err)
		}
		key := keyStringOf(bson.D{{Key: "k", Value: k}, {Key: "_id", Value: res.InsertedID}})
		want[key] = map[string]int{"insert": 1}
		if k%3 == 0 && k > 0 {
			// The one three back is updated: often after it moved.
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "k", Value: k - 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(1)}}}}); err != nil {
				t.Fatal(err)
			}
			for key, ops := range want {
				if strings.HasPrefix(key, fmt.Sprintf(`{"k":%d,`, k-3)) {
					ops["update"]++
				}
			}
		}
	}
	owners := map[string]bool{}
	poll.Until(t, 30*time.Second, func() error {
		for _, k := range []int32{0, n / 2, n - 1} {
			o, err := e.ownerOfErr("c", bson.D{{Key: "k", Value: k}})
			if err != nil {
				return err
			}
			owners[o] = true
		}
		if len(owners) < 2 {
			return fmt.Errorf("the balancer has not moved a chunk yet: owners %v", owners)
		}
		return nil
	})
	f.wantEach(t, want)
	f.wantLookupsFound(t)
	stopAll(t, rs)
}

// TestShardedIdleShardExactlyOnce: a collection sharded on {region: 1}
// with "eu" on one shard and "us" on the other, and only "eu" written:
// the other shard is idle, and every event waits for its periodic no-op
// (here 300 ms, a real server's periodicNoopIntervalSecs, 10 s by
// default) before the mongos returns it. Every change is still handed
// over once, also across a restart while the shard is idle, and the first
// write to the idle shard after it arrives too.
func TestShardedIdleShardExactlyOnce(t *testing.T) {
	const noop = 300 * time.Millisecond
	e := newShardedEnv(t, emutest.NoopInterval(noop))
	e.shardByRegion("c")
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	rs := e.startPartitions(t, 2, f, ferry.FullDocument("updateLookup"))
	want := map[string]map[string]int{}
	write := func(region string, from, to int32) {
		t.Helper()
		for id := from; id < to; id++ {
			if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "region", Value: region}, {Key: "v", Value: int32(0)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "region", Value: region}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(1)}}}}); err != nil {
				t.Fatal(err)
			}
			want[keyStringOf(bson.D{{Key: "region", Value: region}, {Key: "_id", Value: id}})] = map[string]int{"insert": 1, "update": 1}
		}
	}
	began := time.Now()
	write("eu", 0, 50)
	f.waitTotal(t, want)
	t.Logf("50 inserts and 50 updates on one shard, the other idle: all handed over %v after the first write", time.Since(began).Round(time.Millisecond))
	for p, r := range rs {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rs[p] = e.startPartition(t, p, 2, f, ferry.FullDocument("updateLookup"))
	}
	write("eu", 50, 100)
	write("us", 0, 10) // the idle shard's first writes: the same _ids as eu's
	f.wantEach(t, want)
	stopAll(t, rs)
}

// TestShardedIdleShardHeldAcrossRestart: with the idle shard's no-op
// writer off (a shard idle for longer than the test), the mongos holds
// back every change of the written shard: none is handed over, the
// partitions stop (checkpointing the mongos' position, which is behind
// the held changes) and start again, and the first write to the idle
// shard releases them all, each handed over once.
func TestShardedIdleShardHeldAcrossRestart(t *testing.T) {
	e := newShardedEnv(t, emutest.NoopInterval(0))
	if e.srv == nil {
		t.Skip("turns the shards' periodic no-op off: needs the emulated cluster")
	}
	e.shardByRegion("c")
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	rs := e.startPartitions(t, 2, f)
	want := map[string]map[string]int{}
	for id := int32(0); id < 50; id++ {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "region", Value: "eu"}}); err != nil {
			t.Fatal(err)
		}
		want[keyStringOf(bson.D{{Key: "region", Value: "eu"}, {Key: "_id", Value: id}})] = map[string]int{"insert": 1}
	}
	for p, r := range rs {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if n := f.count(); n != 0 {
			t.Fatalf("%d events handed over while the other shard was idle; want none (the mongos holds them)", n)
		}
		rs[p] = e.startPartition(t, p, 2, f)
	}
	// us's write releases eu's changes; an eu write after it releases
	// us's (and is itself held, eu's shard being idle then).
	for _, d := range []bson.D{{{Key: "_id", Value: 0}, {Key: "region", Value: "us"}}, {{Key: "_id", Value: 1000}, {Key: "region", Value: "eu"}}} {
		if _, err := c.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	want[keyStringOf(bson.D{{Key: "region", Value: "us"}, {Key: "_id", Value: int32(0)}})] = map[string]int{"insert": 1}
	f.wantEach(t, want)
	stopAll(t, rs)
}

// TestShardedReshardCollection: reshardCollection gives a collection a new
// shard key and a new UUID while two partitions stream it with
// showExpandedEvents. It invalidates nothing (no on_invalidate, no
// on_history_lost: partition 0 goes on, partition 1, stopped before it,
// resumes across it); its event, which has no documentKey, is handed over
// once, by partition 0; every change is handed over once, those after it
// under the new documentKey ({v, _id} instead of {region, _id}), and a
// document's changes before and after share a lane (lanes go by _id).
func TestShardedReshardCollection(t *testing.T) {
	e := newShardedEnv(t)
	e.shardByRegion("c")
	c := e.db.Collection("c")
	ctx := context.Background()
	f := newEffects()
	rs := e.startPartitions(t, 2, f, ferry.ShowExpandedEvents(true))
	want := map[string]map[string]int{}
	for id := int32(0); id < 20; id++ {
		region := []string{"eu", "us"}[id%2]
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "region", Value: region}, {Key: "v", Value: id * 10}}); err != nil {
			t.Fatal(err)
		}
		want[keyStringOf(bson.D{{Key: "region", Value: region}, {Key: "_id", Value: id}})] = map[string]int{"insert": 1}
	}
	// Partition 1 stops before the resharding and resumes after it, from
	// a token of the old UUID.
	f.waitTotal(t, want)
	if err := rs[1].stop(t); err != nil {
		t.Fatal(err)
	}
	e.admin(bson.D{{Key: "reshardCollection", Value: e.db.Name() + ".c"}, {Key: "key", Value: bson.D{{Key: "v", Value: 1}}}})
	for id := int32(0); id < 20; id++ {
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: id * 10}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
		want[keyStringOf(bson.D{{Key: "v", Value: id * 10}, {Key: "_id", Value: id}})] = map[string]int{"update": 1}
	}
	rs[1] = e.startPartition(t, 1, 2, f, ferry.ShowExpandedEvents(true))
	f.wantEach(t, want)
	for _, r := range rs {
		if err := r.stop(t); err != nil {
			t.Fatalf("a partition stopped by itself: %v; want the stream to go on past reshardCollection", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var tags []string
	for id, by := range f.by {
		if f.ids[id] > 0 && len(by) > 0 && f.opsOf(id) == "reshardCollection" {
			tags = append(tags, by...)
		}
	}
	if n := f.control["reshardCollection"]; n != 1 || len(tags) != 1 || !strings.HasPrefix(tags[0], "p0#") {
		t.Errorf("reshardCollection handed over %d times, by %v; want once, by partition 0", n, tags)
	}
	for id, lanes := range f.lanes {
		if len(lanes) != 1 {
			t.Errorf("the events of %s went to lanes %v; want one", id, lanes)
		}
	}
}
