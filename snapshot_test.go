package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	ferry "github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// projection is a handler's view of the source: _id -> v, built from
// snapshot rows and changes (replace and insert carry the whole document).
type projection struct {
	mu    sync.Mutex
	docs  map[int32]int32
	rows  map[int32]int // snapshot rows per _id
	total int
}

func newProjection() *projection {
	return &projection{docs: map[int32]int32{}, rows: map[int32]int{}}
}

func (p *projection) handle(_ context.Context, ev *ferry.Event) error {
	id := ev.DocumentKey.Lookup("_id").Int32()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.OperationType {
	case "insert", "replace", ferry.OperationBackfill:
		p.docs[id] = ev.FullDocument.Lookup("v").Int32()
		if ev.Backfill {
			p.rows[id]++
			p.total++
		}
	case "delete":
		delete(p.docs, id)
	}
	return nil
}

func (p *projection) rowsOf() (map[int32]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int32]int, len(p.rows))
	for k, v := range p.rows {
		out[k] = v
	}
	return out, p.total
}

// sourceDocs reads the source as _id -> v.
func sourceDocs(t *testing.T, c *mongo.Collection) map[int32]int32 {
	t.Helper()
	cur, err := c.Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID int32 `bson:"_id"`
		V  int32 `bson:"v"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]int32, len(docs))
	for _, d := range docs {
		out[d.ID] = d.V
	}
	return out
}

func insertN(t *testing.T, c *mongo.Collection, from, n int, v func(i int) bson.D) {
	t.Helper()
	docs := make([]any, 0, n)
	for i := from; i < from+n; i++ {
		docs = append(docs, append(bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: int32(i)}}, v(i)...))
	}
	if _, err := c.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
}

// waitSnapshot polls the checkpoint until its snapshot satisfies ok.
func waitSnapshot(t *testing.T, store checkpoint.Store, stream string, partition int, what string, ok func(ferry.SnapshotProgress) bool) ferry.SnapshotProgress {
	t.Helper()
	var got ferry.SnapshotProgress
	poll.Until(t, 60*time.Second, func() error {
		cp, err := store.Load(context.Background(), stream, partition)
		if err != nil {
			return err
		}
		p, has, err := ferry.SnapshotOf(cp)
		if err != nil {
			return err
		}
		if !has || !ok(p) {
			return fmt.Errorf("snapshot %+v, want %s", p, what)
		}
		got = p
		return nil
	})
	return got
}

func finished(p ferry.SnapshotProgress) bool { return !p.Finished.IsZero() }

// TestSnapshotConvergesUnderWrites: documents replaced, deleted and
// inserted while the snapshot reads them end in their latest state: a
// chunk's rows are read as of the reader's position and spliced there, so
// an older row never follows a newer change of its document (no document
// resurrected, none stale).
func TestSnapshotConvergesUnderWrites(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n = 3000
	insertN(t, c, 0, n, func(int) bson.D { return nil })
	proj := newProjection()
	r := start(t, e.client, proj.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(40))...)
	// Writes while the snapshot runs, on documents all over the _id range.
	rng := rand.New(rand.NewPCG(1, 2))
	next := n
	writes := 0
	for {
		cp, _ := e.store.Load(context.Background(), "s", 0)
		if p, ok, _ := ferry.SnapshotOf(cp); ok && !p.Finished.IsZero() {
			break
		}
		id := int32(rng.IntN(next))
		var err error
		switch rng.IntN(3) {
		case 0:
			_, err = c.ReplaceOne(context.Background(), bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "v", Value: int32(1_000_000 + writes)}})
		case 1:
			_, err = c.DeleteOne(context.Background(), bson.D{{Key: "_id", Value: id}})
		default:
			_, err = c.InsertOne(context.Background(), bson.D{{Key: "_id", Value: int32(next)}, {Key: "v", Value: int32(next)}})
			next++
		}
		if err != nil {
			t.Fatal(err)
		}
		writes++
	}
	if writes < 50 {
		t.Logf("only %d writes during the snapshot", writes)
	}
	// The stream applies everything up to a last write.
	insert(t, c, bson.D{{Key: "_id", Value: int32(10_000_000)}, {Key: "v", Value: int32(1)}})
	want := sourceDocs(t, c)
	poll.Until(t, 30*time.Second, func() error {
		proj.mu.Lock()
		defer proj.mu.Unlock()
		var stale, resurrected, missing int
		for id, v := range proj.docs {
			w, ok := want[id]
			switch {
			case !ok:
				resurrected++
			case w != v:
				stale++
			}
		}
		for id := range want {
			if _, ok := proj.docs[id]; !ok {
				missing++
			}
		}
		if stale+resurrected+missing > 0 {
			return fmt.Errorf("after %d writes: %d stale, %d resurrected, %d missing of %d", writes, stale, resurrected, missing, len(want))
		}
		return nil
	})
	t.Logf("%d writes during the snapshot; projection equals the source (%d documents)", writes, len(want))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotResumesAtItsNextChunk: a snapshot stopped in the middle goes
// on, in the next run, at the first chunk not finished: every document is
// delivered, and at most one chunk again.
func TestSnapshotResumesAtItsNextChunk(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n, chunk = 1000, 50
	insertN(t, c, 0, n, func(int) bson.D { return nil })
	proj := newProjection()
	blocked := make(chan struct{})
	var once sync.Once
	handle := func(ctx context.Context, ev *ferry.Event) error {
		if _, total := proj.rowsOf(); total >= 430 {
			once.Do(func() { close(blocked) })
			<-ctx.Done() // stuck until the drain gives up on it
			return ctx.Err()
		}
		return proj.handle(ctx, ev)
	}
	r := start(t, e.client, handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(chunk),
		ferry.DrainTimeout(50*time.Millisecond))...)
	<-blocked
	if err := r.stop(t); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	cp, _ := e.store.Load(context.Background(), "s", 0)
	mid, _, _ := ferry.SnapshotOf(cp)
	if !mid.Running() || mid.Done == 0 || mid.Done >= n {
		t.Fatalf("snapshot after the stop: %+v, want one in progress, part done", mid)
	}
	r = start(t, e.client, proj.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(chunk))...)
	done := waitSnapshot(t, e.store, "s", 0, "finished", finished)
	rows, total := proj.rowsOf()
	for i := range int32(n) {
		if rows[i] == 0 {
			t.Fatalf("document %d never delivered", i)
		}
	}
	again := total - n
	t.Logf("stopped at %d of %d done; finished %d documents in %d chunks; %d delivered again (chunk %d)", mid.Done, n, done.Done, done.Chunks, again, chunk)
	if again > chunk {
		t.Fatalf("%d documents delivered again, want at most one chunk (%d)", again, chunk)
	}
	if done.Done != n || done.ID != mid.ID {
		t.Fatalf("finished snapshot %+v, want the same snapshot with %d done", done, n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotRequestWithFilter: an operator's request with a filter,
// recorded in the store while the stream runs, is picked up without a
// restart and delivers exactly the matching documents, once.
func TestSnapshotRequestWithFilter(t *testing.T) {
	e := newEnv(t)
	e.useMongoStore()
	c := e.db.Collection("c")
	const n = 900
	insertN(t, c, 0, n, func(i int) bson.D { return bson.D{{Key: "k", Value: int32(i % 3)}} })
	proj := newProjection()
	r := start(t, e.client, proj.handle, e.opts(ferry.SnapshotPollInterval(20*time.Millisecond), ferry.SnapshotChunkSize(64))...)
	waitStarted(t, e.store)
	filter, _ := bson.Marshal(bson.D{{Key: "k", Value: int32(1)}})
	req, err := e.store.(checkpoint.SnapshotRequests).RequestSnapshot(context.Background(), checkpoint.SnapshotRequest{Stream: "s", Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	p := waitSnapshot(t, e.store, "s", 0, "the request finished", func(p ferry.SnapshotProgress) bool {
		return p.Request == req.ID && finished(p)
	})
	rows, total := proj.rowsOf()
	for id, k := range rows {
		if id%3 != 1 || k != 1 {
			t.Fatalf("document %d delivered %d times (k = %d)", id, k, id%3)
		}
	}
	if total != n/3 || p.Done != n/3 || p.Reason != ferry.SnapshotForRequest {
		t.Fatalf("delivered %d rows, snapshot %+v; want %d", total, p, n/3)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotPartitionsReadOnce: four partitions together have the
// server return each document once (serverStatus metrics.document
// returned), and each gets exactly its own documents.
func TestSnapshotPartitionsReadOnce(t *testing.T) {
	for _, hashed := range []bool{true, false} {
		t.Run(fmt.Sprintf("hashed_index=%v", hashed), func(t *testing.T) { testPartitionsReadOnce(t, hashed) })
	}
}

// testPartitionsReadOnce: with an {_id: "hashed"} index each partition
// reads its hashed range (the server examines each document once over all
// partitions); without one, each walks the _id index and the server
// evaluates the partition filter (it examines each document once per
// partition, and returns it once).
func testPartitionsReadOnce(t *testing.T, hashed bool) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n, parts = 2000, 4
	insertN(t, c, 0, n, func(int) bson.D { return nil })
	if hashed {
		if _, err := c.Indexes().CreateOne(context.Background(), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
			t.Fatal(err)
		}
	}
	before := serverCounters(t, e.client)
	projs := make([]*projection, parts)
	for p := range parts {
		projs[p] = newProjection()
		start(t, e.client, projs[p].handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.Partition(p, parts), ferry.SnapshotChunkSize(100))...)
	}
	var mode string
	for p := range parts {
		mode = waitSnapshot(t, e.store, "s", p, "finished", finished).Mode
	}
	after := serverCounters(t, e.client)
	seen := map[int32]int{}
	for _, pr := range projs {
		rows, _ := pr.rowsOf()
		for id, k := range rows {
			seen[id] += k
		}
	}
	for i := range int32(n) {
		if seen[i] != 1 {
			t.Fatalf("document %d delivered %d times over the partitions", i, seen[i])
		}
	}
	returned := after.returned - before.returned
	examined := after.examined - before.examined
	t.Logf("mode %s: server returned %d and examined %d documents for a collection of %d over %d partitions", mode, returned, examined, n, parts)
	if float64(returned) > 1.1*n {
		t.Fatalf("the server returned %d documents for %d", returned, n)
	}
	wantMode, maxExamined := ferry.SnapshotByID, 1.1*n*parts
	if hashed {
		wantMode, maxExamined = ferry.SnapshotByHashedIndex, 1.1*n
	}
	if mode != wantMode || float64(examined) > maxExamined {
		t.Fatalf("mode %s examined %d documents, want mode %s and at most %.0f", mode, examined, wantMode, maxExamined)
	}
}

type counters struct{ returned, examined int64 }

func serverCounters(t *testing.T, client *mongo.Client) counters {
	t.Helper()
	raw, err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	num := func(path ...string) int64 {
		v, err := raw.LookupErr(path...)
		if err != nil {
			t.Fatalf("serverStatus has no %v", path)
		}
		n, _ := v.AsInt64OK()
		return n
	}
	return counters{returned: num("metrics", "document", "returned"), examined: num("metrics", "queryExecutor", "scannedObjects")}
}

// TestSnapshotChunksOfLargeDocuments: a chunk holds what one server reply
// holds (16 MiB), whatever SnapshotChunkSize says, so memory stays bounded
// with large documents: 48 documents of 1 MiB are read in at least 3
// chunks, each document once.
func TestSnapshotChunksOfLargeDocuments(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n = 48
	pad := string(make([]byte, 1<<20))
	insertN(t, c, 0, n, func(int) bson.D { return bson.D{{Key: "pad", Value: pad}} })
	if k, err := c.CountDocuments(context.Background(), bson.D{}); err != nil || k != n {
		t.Fatalf("%d documents inserted (%v), want %d", k, err, n)
	}
	proj := newProjection()
	var mu sync.Mutex
	var largest, prevDone, prevChunks int64 // the most rows one chunk delivered
	hook := snapshotHookFunc(func(i ferry.SnapshotInfo) {
		mu.Lock()
		defer mu.Unlock()
		if i.Progress.Chunks == prevChunks+1 {
			largest = max(largest, i.Progress.Done-prevDone)
		}
		prevDone, prevChunks = i.Progress.Done, i.Progress.Chunks
	})
	r := start(t, e.client, proj.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(1000), ferry.WithHooks(hook))...)
	done := waitSnapshot(t, e.store, "s", 0, "finished", finished)
	rows, total := proj.rowsOf()
	if total != n || len(rows) != n {
		t.Fatalf("%d rows for %d documents, want each once", total, n)
	}
	t.Logf("%d documents of 1 MiB in %d chunks", done.Done, done.Chunks)
	// The hook runs again while the consumer runs (the finished snapshot
	// shown at each poll): mu is not held across r.stop below.
	mu.Lock()
	big := largest
	mu.Unlock()
	t.Logf("largest chunk: %d documents", big)
	if done.Chunks < 3 || big == 0 || big > 16 {
		t.Fatalf("%d MiB read in %d chunks, the largest %d documents: a chunk held more than one 16 MiB reply", n, done.Chunks, big)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

type snapshotHookFunc func(ferry.SnapshotInfo)

func (h snapshotHookFunc) OnSnapshot(i ferry.SnapshotInfo) { h(i) }

// TestSnapshotFilteredReadsOnce: a filtered request over four partitions
// with a hashed index has the server examine each document about once:
// no partition counts the filter over the whole collection for its
// estimate (which examined it once per partition more), the total is
// extrapolated from the chunks instead.
func TestSnapshotFilteredReadsOnce(t *testing.T) {
	e := newEnv(t)
	e.useMongoStore()
	c := e.db.Collection("c")
	const n, parts = 3000, 4
	insertN(t, c, 0, n, func(i int) bson.D { return bson.D{{Key: "k", Value: int32(i % 3)}} })
	if _, err := c.Indexes().CreateOne(context.Background(), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	projs := make([]*projection, parts)
	for p := range parts {
		projs[p] = newProjection()
		start(t, e.client, projs[p].handle, e.opts(ferry.Partition(p, parts), ferry.SnapshotChunkSize(50), ferry.SnapshotPollInterval(20*time.Millisecond))...)
	}
	for p := range parts {
		poll.Until(t, 20*time.Second, func() error {
			if cp, err := e.store.Load(context.Background(), "s", p); err != nil || cp.Token == nil {
				return fmt.Errorf("partition %d has no checkpoint with a token yet (%v)", p, err)
			}
			return nil
		})
	}
	before := serverCounters(t, e.client)
	filter, _ := bson.Marshal(bson.D{{Key: "k", Value: int32(1)}})
	req, err := e.store.(checkpoint.SnapshotRequests).RequestSnapshot(context.Background(), checkpoint.SnapshotRequest{Stream: "s", Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var done int64
	for p := range parts {
		sp := waitSnapshot(t, e.store, "s", p, "the request finished", func(sp ferry.SnapshotProgress) bool { return sp.Request == req.ID && finished(sp) })
		if sp.Total != sp.Done {
			t.Errorf("partition %d finished with %d of %d estimated", p, sp.Done, sp.Total)
		}
		done += sp.Done
	}
	after := serverCounters(t, e.client)
	examined := after.examined - before.examined
	t.Logf("filtered request: %d documents delivered; the server examined %d for a collection of %d over %d partitions", done, examined, n, parts)
	if done != n/3 || float64(examined) > 1.1*n {
		t.Fatalf("%d delivered (want %d), %d examined (want at most %.0f)", done, n/3, examined, 1.1*n)
	}
}

// TestSnapshotFailingChunkIsVisible: a chunk the source keeps refusing is
// retried, and its failed tries and error are recorded with the snapshot
// (what ferry status and ferry snapshot -wait read), not only logged; once
// a chunk finishes, the snapshot goes on and the failure is cleared.
func TestSnapshotFailingChunkIsVisible(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n, chunk = 200, 50
	insertN(t, c, 0, n, func(int) bson.D { return nil })
	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"find"}, Skip: 1, ErrorCode: 8000, Namespace: e.db.Name() + ".c"})
	defer e.srv.ClearFailPoints()
	proj := newProjection()
	r := start(t, e.client, proj.handle, e.opts(ferry.StartAt(ferry.StartWithBackfill()), ferry.SnapshotChunkSize(chunk))...)
	failing := waitSnapshot(t, e.store, "s", 0, "a chunk failing twice", func(p ferry.SnapshotProgress) bool { return p.Failures >= 2 })
	if !failing.Running() || failing.Done != chunk || !strings.Contains(failing.Error, "8000") {
		t.Fatalf("snapshot while its second chunk fails: %+v; want it running at %d done with the server's error 8000", failing, chunk)
	}
	e.srv.ClearFailPoints()
	done := waitSnapshot(t, e.store, "s", 0, "finished", finished)
	if done.Done != n || done.Failures != 0 || done.Error != "" {
		t.Fatalf("finished snapshot %+v; want %d done and the failure cleared", done, n)
	}
	if rows, _ := proj.rowsOf(); len(rows) != n {
		t.Fatalf("%d documents delivered, want %d", len(rows), n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
