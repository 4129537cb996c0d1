package ferry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
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
	name := "ferry_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 50 {
		name = name[:50]
	}
	db := client.Database(name)
	_ = db.Drop(context.Background())
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &env{t: t, srv: srv, client: client, db: db, store: store, dlq: deadletter.NewMongo(client.Database(name+"_state"), "dlq")}
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
	ctx := context.Background()
	var meta struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := e.client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: e.db.Name() + "." + coll}}).Decode(&meta); err != nil {
		e.t.Fatalf("config.collections of %s: %v", coll, err)
	}
	cur, err := e.client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: meta.UUID}}, options.Find().SetSort(bson.D{{Key: "min", Value: 1}}))
	if err != nil {
		e.t.Fatal(err)
	}
	var chunks []struct {
		Min   bson.Raw `bson:"min"`
		Shard string   `bson:"shard"`
	}
	if err := cur.All(ctx, &chunks); err != nil {
		e.t.Fatal(err)
	}
	// The last chunk whose min is at or below key (one-field keys only).
	owner := ""
	want, _ := bson.Marshal(key)
	for _, c := range chunks {
		if compareOneField(c.Min, want) <= 0 {
			owner = c.Shard
		}
	}
	if owner == "" {
		e.t.Fatalf("no chunk of %s holds %v", coll, key)
	}
	return owner
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

// shardByRegion shards collection coll on {region: 1} and places the
// regions from "m" on, "us" among them, on another shard than those
// before, "eu" among them: a document's shard is its region's.
func (e *env) shardByRegion(coll string) (eu, us string) {
	e.t.Helper()
	ns := e.db.Name() + "." + coll
	_ = e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "enableSharding", Value: e.db.Name()}}).Err()
	e.admin(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "region", Value: 1}}}})
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

// effects records, per documentKey, the v of every document version the
// handler was handed (insert, update and replace from fullDocument,
// backfill rows), and how often each event id was handed over.
type effects struct {
	mu      sync.Mutex
	byKey   map[string][]int32
	ids     map[string]int
	backKey map[string]int // backfill rows per documentKey
	lanes   map[string]map[int]bool
	n       int
}

func newEffects() *effects {
	return &effects{byKey: map[string][]int32{}, ids: map[string]int{}, backKey: map[string]int{}, lanes: map[string]map[int]bool{}}
}

func (f *effects) handle(_ context.Context, ev *ferry.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.ids[ev.ID()]++
	if ev.DocumentKey == nil {
		return nil
	}
	k := keyString(ev.DocumentKey)
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
	return append([]int32(nil), f.byKey[keyString(must(bson.Marshal(key)))]...)
}

// duplicates lists the event ids handed over more than once.
func (f *effects) duplicates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, n := range f.ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", id[:12], n))
		}
	}
	return out
}

// startConsumer is start, also returning the consumer.
func startConsumer(t *testing.T, client *mongo.Client, h ferry.Handler, opts ...ferry.Option) (*ferry.Consumer, *running) {
	t.Helper()
	c, err := ferry.NewConsumer(client, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return c, r
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
		if got := f.backKey[keyString(must(bson.Marshal(k)))]; got != 1 {
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
