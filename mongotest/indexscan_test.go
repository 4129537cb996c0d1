package mongotest_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongoerr"
)

// The chunked reads of Ferry's snapshot against the emulator, through the
// driver: (A) ranges of the {_id: "hashed"} index with min/max, (B) ranges
// of the _id index with {_id: {$gt: last}} and a $toHashedIndexKey
// partition, each with limit L and batchSize L; the documents, their
// order, the serverStatus counters, at a snapshot while others write.

// ixDoc is a test document: its _id, hashed _id and n.
type ixDoc struct {
	id any
	h  int64
	n  int32
}

func hashOf(t *testing.T, v any) int64 {
	t.Helper()
	h, err := hashkey.Hash(v)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// seedDocs inserts, in a shuffled order (so that insertion order is
// neither _id nor hashed order), documents {_id, n} with the given _ids,
// and returns them by n.
func seedDocs(t *testing.T, c *mongo.Collection, ids []any) []ixDoc {
	t.Helper()
	docs := make([]ixDoc, len(ids))
	seen := map[int64]bool{}
	for i, id := range ids {
		docs[i] = ixDoc{id: id, h: hashOf(t, id), n: int32(i)}
		if seen[docs[i].h] {
			t.Fatalf("two test _ids hash alike: pick others")
		}
		seen[docs[i].h] = true
	}
	order := rand.New(rand.NewPCG(7, 11)).Perm(len(docs))
	batch := make([]any, 0, len(docs))
	for _, i := range order {
		batch = append(batch, bson.D{{Key: "_id", Value: docs[i].id}, {Key: "n", Value: docs[i].n}})
	}
	if _, err := c.InsertMany(ctx(t), batch); err != nil {
		t.Fatal(err)
	}
	return docs
}

// counters are serverStatus' metrics.document and metrics.queryExecutor.
type counters struct{ returned, inserted, updated, deleted, keys, docs int64 }

func readCounters(t *testing.T, client *mongo.Client) counters {
	t.Helper()
	var st struct {
		Metrics struct {
			Document struct {
				Returned, Inserted, Updated, Deleted int64
			}
			QueryExecutor struct {
				Scanned        int64
				ScannedObjects int64 `bson:"scannedObjects"`
			} `bson:"queryExecutor"`
		}
	}
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	d, q := st.Metrics.Document, st.Metrics.QueryExecutor
	return counters{d.Returned, d.Inserted, d.Updated, d.Deleted, q.Scanned, q.ScannedObjects}
}

func (c counters) minus(o counters) counters {
	return counters{c.returned - o.returned, c.inserted - o.inserted, c.updated - o.updated, c.deleted - o.deleted, c.keys - o.keys, c.docs - o.docs}
}

func (c counters) String() string {
	return fmt.Sprintf("returned %d, inserted %d, updated %d, deleted %d, keys examined %d, documents examined %d",
		c.returned, c.inserted, c.updated, c.deleted, c.keys, c.docs)
}

// findNs runs a find and returns the n of the documents, in order.
func findNs(ctx context.Context, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) ([]int32, error) {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	var got []struct {
		N int32 `bson:"n"`
	}
	if err := cur.All(ctx, &got); err != nil {
		return nil, err
	}
	ns := make([]int32, len(got))
	for i, d := range got {
		ns[i] = d.N
	}
	return ns, nil
}

func nsOf(docs []ixDoc) []int32 {
	ns := make([]int32, len(docs))
	for i, d := range docs {
		ns[i] = d.n
	}
	return ns
}

// hashedChunk is mode (A)'s find: the documents whose hashed _id is in
// [lo, hi) (hi nil: MaxKey), at most limit.
func hashedChunk(lo int64, hi any, limit int64) *options.FindOptionsBuilder {
	if hi == nil {
		hi = bson.MaxKey{}
	}
	return options.Find().SetHint(bson.D{{Key: "_id", Value: "hashed"}}).
		SetMin(bson.D{{Key: "_id", Value: lo}}).SetMax(bson.D{{Key: "_id", Value: hi}}).
		SetLimit(limit).SetBatchSize(int32(limit))
}

// inHashRange returns the docs whose hash is in [lo, hi) (hi nil: no end),
// in hashed order.
func inHashRange(docs []ixDoc, lo int64, hi *int64) []ixDoc {
	var out []ixDoc
	for _, d := range docs {
		if d.h >= lo && (hi == nil || d.h < *hi) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b ixDoc) int { return cmp.Compare(a.h, b.h) })
	return out
}

func mixedIDs() []any {
	var ids []any
	for i := range 120 {
		ids = append(ids, int32(i*3))
	}
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("s-%03d", i))
	}
	for i := range 40 {
		var oid bson.ObjectID
		oid[0], oid[11] = 0x65, byte(i)
		ids = append(ids, oid)
	}
	return ids
}

func TestHashedRangeChunks(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("orders")
	docs := seedDocs(t, c, mixedIDs())
	if _, err := c.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	// Four ranges of the hashed space, each read in chunks of 7 by
	// moving min past the last hash read: every document once, each
	// range in hashed order.
	q := []int64{math.MinInt64, math.MinInt64 / 2, 0, math.MaxInt64 / 2}
	const limit = 7
	var all []int32
	for i, lo := range q {
		var hi any
		var hiP *int64
		if i+1 < len(q) {
			hi, hiP = q[i+1], &q[i+1]
		}
		want := inHashRange(docs, lo, hiP)
		var got []int32
		from := lo
		for {
			before := readCounters(t, client)
			chunk, err := findNs(ctx(t), c, bson.D{}, hashedChunk(from, hi, limit))
			if err != nil {
				t.Fatal(err)
			}
			rest := inHashRange(want, from, hiP)
			wantChunk := rest[:min(limit, len(rest))]
			if !slices.Equal(chunk, nsOf(wantChunk)) {
				t.Fatalf("range %d from %d: chunk %v, want %v", i, from, chunk, nsOf(wantChunk))
			}
			// An index scan stopped by the limit: one key and one
			// document examined per document returned.
			n := int64(len(wantChunk))
			if d := readCounters(t, client).minus(before); d != (counters{returned: n, keys: n, docs: n}) {
				t.Errorf("range %d from %d: counters moved by %v, want returned, keys and documents %d", i, from, d, n)
			}
			got = append(got, chunk...)
			if len(chunk) < limit {
				break
			}
			from = wantChunk[len(wantChunk)-1].h + 1
		}
		if !slices.Equal(got, nsOf(want)) {
			t.Errorf("range %d read %v, want %v", i, got, nsOf(want))
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if want := nsOf(docs); !slices.Equal(all, want) {
		t.Errorf("the ranges read %d documents, want each of the %d once", len(all), len(want))
	}

	// A user filter: the index is read until limit documents matched;
	// every key passed is examined, and its document.
	filter := bson.D{{Key: "n", Value: bson.D{{Key: "$mod", Value: bson.A{5, 0}}}}}
	var matching []ixDoc
	passed := 0
	for _, d := range inHashRange(docs, q[1], nil) {
		passed++
		if d.n%5 == 0 {
			matching = append(matching, d)
			if len(matching) == limit {
				break
			}
		}
	}
	before := readCounters(t, client)
	got, err := findNs(ctx(t), c, filter, hashedChunk(q[1], nil, limit).SetHint("_id_hashed"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, nsOf(matching)) {
		t.Errorf("filtered chunk %v, want %v", got, nsOf(matching))
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: limit, keys: int64(passed), docs: int64(passed)}) {
		t.Errorf("filtered chunk: counters moved by %v, want returned %d, keys and documents %d", d, limit, passed)
	}
}

// idOrderIDs are int32 _ids; idChunkFilter is mode (B)'s filter for
// partition p of 3.
func idChunkFilter(after any, p int, nested bool) bson.D {
	part := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
		bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$abs", Value: bson.D{{Key: "$toHashedIndexKey", Value: "$_id"}}}}, 3}}}, p}}}}}
	gt := bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}
	if nested {
		return bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 0}}}}, gt, part}}}
	}
	return append(gt, part...)
}

func partOf(h int64) int {
	if h < 0 {
		h = -h
	}
	return int(h % 3)
}

func TestIDRangeChunks(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("orders")
	var ids []any
	for i := range 300 {
		ids = append(ids, int32(i*2))
	}
	docs := seedDocs(t, c, ids) // docs are in _id order
	const limit = 11
	for _, hinted := range []bool{true, false} {
		for _, nested := range []bool{true, false} {
			t.Run(fmt.Sprintf("hint=%v/and=%v", hinted, nested), func(t *testing.T) {
				for p := range 3 {
					var want, got []int32
					for _, d := range docs {
						if partOf(d.h) == p {
							want = append(want, d.n)
						}
					}
					last := any(int32(-1))
					lastPos := -1 // index in docs of the last _id read
					for {
						opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(limit).SetBatchSize(limit)
						if hinted {
							opts.SetHint(bson.D{{Key: "_id", Value: 1}})
						}
						// The keys after last, until the limit-th match.
						passed, matched := 0, 0
						for _, d := range docs[lastPos+1:] {
							passed++
							if partOf(d.h) == p {
								if matched++; matched == limit {
									break
								}
							}
						}
						before := readCounters(t, client)
						chunk, err := findNs(ctx(t), c, idChunkFilter(last, p, nested), opts)
						if err != nil {
							t.Fatal(err)
						}
						if d := readCounters(t, client).minus(before); d != (counters{returned: int64(matched), keys: int64(passed), docs: int64(passed)}) {
							t.Errorf("partition %d after %v: counters moved by %v, want returned %d, keys and documents %d", p, last, d, matched, passed)
						}
						got = append(got, chunk...)
						if len(chunk) < limit {
							break
						}
						lastPos = int(chunk[len(chunk)-1])
						last = docs[lastPos].id
					}
					if !slices.Equal(got, want) {
						t.Errorf("partition %d read %v, want %v", p, got, want)
					}
				}
			})
		}
	}
	// $gte/$lt/$lte bound the range too: 40 < _id <= 60 examines the
	// keys 40..60 only.
	before := readCounters(t, client)
	got, err := findNs(ctx(t), c, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: int32(40)}, {Key: "$lte", Value: int64(60)}}},
		{Key: "n", Value: bson.D{{Key: "$ne", Value: int32(25)}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetHint(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[20 21 22 23 24 26 27 28 29 30]" {
		t.Errorf("$gte 40 $lte 60 read n %v", got)
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 10, keys: 11, docs: 11}) {
		t.Errorf("$gte/$lte: counters moved by %v, want returned 10, keys and documents 11", d)
	}
	before = readCounters(t, client)
	if got, err = findNs(ctx(t), c, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 9.5}}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}})); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[4 3 2 1 0]" {
		t.Errorf("$lt 9.5 sorted {_id: -1} read n %v", got)
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 5, keys: 5, docs: 5}) {
		t.Errorf("$lt: counters moved by %v, want returned, keys and documents 5 (no hint: the _id index all the same)", d)
	}
}

// TestIDRangeStopsAtTypeBracket: {_id: {$gt: 5}} reads numbers only, as
// the server's bounds (5, inf] do: the scan ends at the first string.
func TestIDRangeStopsAtTypeBracket(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("mixed")
	seedDocs(t, c, mixedIDs())
	before := readCounters(t, client)
	got, err := findNs(ctx(t), c, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: int32(340)}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetHint(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[114 115 116 117 118 119]" {
		t.Errorf("_id > 340 read n %v, want [114 .. 119] (the numbers 342..357)", got)
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 6, keys: 6, docs: 6}) {
		t.Errorf("counters moved by %v, want 6 of each", d)
	}
}

// TestCollectionScanCounters: a find with a filter and no usable index
// examines every document (no key); with a limit and no sort, until the
// limit-th match. Writes count what they insert, match and delete.
func TestCollectionScanCounters(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("scan")
	var ids []any
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("k%02d", i))
	}
	before := readCounters(t, client)
	seedDocs(t, c, ids)
	if d := readCounters(t, client).minus(before); d != (counters{inserted: 50}) {
		t.Errorf("insertMany of 50: counters moved by %v", d)
	}
	filter := bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 40}}}}
	before = readCounters(t, client)
	got, err := findNs(ctx(t), c, filter, options.Find().SetBatchSize(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("read %d documents, want 10", len(got))
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 10, docs: 50}) {
		t.Errorf("collection scan: counters moved by %v, want returned 10 (over 4 batches), documents 50, no key", d)
	}
	// With a limit: natural (insertion) order until the 4th match.
	cur, err := c.Find(ctx(t), bson.D{}, options.Find().SetLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	var natural []struct {
		N int32 `bson:"n"`
	}
	if err := cur.All(ctx(t), &natural); err != nil {
		t.Fatal(err)
	}
	passed, matched := 0, 0
	for _, d := range natural {
		passed++
		if d.N >= 40 {
			if matched++; matched == 4 {
				break
			}
		}
	}
	before = readCounters(t, client)
	if _, err := findNs(ctx(t), c, filter, options.Find().SetLimit(4)); err != nil {
		t.Fatal(err)
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 4, docs: int64(passed)}) {
		t.Errorf("limited collection scan: counters moved by %v, want returned 4, documents %d", d, passed)
	}
	before = readCounters(t, client)
	if _, err := c.UpdateMany(ctx(t), bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 3}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMany(ctx(t), bson.D{{Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// The update matches 3 (modifies 2) after examining 50; the delete
	// removes the 3, now n: 1, after examining 50.
	if d := readCounters(t, client).minus(before); d != (counters{updated: 3, deleted: 3, docs: 100}) {
		t.Errorf("updateMany + deleteMany: counters moved by %v, want updated 3, deleted 3, documents 100", d)
	}
	before = readCounters(t, client)
	if err := c.FindOne(ctx(t), bson.D{{Key: "_id", Value: "k10"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 1, keys: 1, docs: 1}) {
		t.Errorf("find by _id: counters moved by %v, want one of each", d)
	}
}

func TestMinMaxErrors(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("orders")
	seedDocs(t, c, []any{int32(1), int32(2), int32(3)})
	if _, err := c.Indexes().CreateMany(ctx(t), []mongo.IndexModel{
		{Keys: bson.D{{Key: "_id", Value: "hashed"}}}, {Keys: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	minID := bson.D{{Key: "_id", Value: int64(0)}}
	hashed := bson.D{{Key: "_id", Value: "hashed"}}
	for _, tc := range []struct {
		name string
		opts *options.FindOptionsBuilder
		code int32
	}{
		{"min without hint", options.Find().SetMin(minID), mongoerr.CodeNoQueryExecutionPlans},
		{"max without hint", options.Find().SetMax(minID), mongoerr.CodeNoQueryExecutionPlans},
		{"hint of no index", options.Find().SetMin(minID).SetHint(bson.D{{Key: "x", Value: 1}}), mongoerr.CodeBadValue},
		{"min on another field", options.Find().SetMin(bson.D{{Key: "x", Value: int64(0)}}).SetHint(hashed), 51174},
		{"max of two fields", options.Find().SetMax(bson.D{{Key: "_id", Value: int64(0)}, {Key: "x", Value: 1}}).SetHint(hashed), 51174},
		{"min on the _id index with the hashed hint's name", options.Find().SetMin(bson.D{{Key: "n", Value: 1}}).SetHint("_id_hashed"), 51174},
		{"min equal to max", options.Find().SetMin(minID).SetMax(minID).SetHint(hashed), 51175},
		{"min after max", options.Find().SetMin(bson.D{{Key: "_id", Value: int64(5)}}).SetMax(minID).SetHint(hashed), 51175},
		{"min MaxKey", options.Find().SetMin(bson.D{{Key: "_id", Value: bson.MaxKey{}}}).SetHint(hashed), 51175},
		{"min/max of an index mongotest does not range", options.Find().SetMin(bson.D{{Key: "n", Value: 1}}).SetHint(bson.D{{Key: "n", Value: 1}}), mongoerr.CodeNotImplemented},
	} {
		_, err := findNs(ctx(t), c, bson.D{}, tc.opts)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		} else if tc.code == mongoerr.CodeNoQueryExecutionPlans && ce.Name != "NoQueryExecutionPlans" {
			t.Errorf("%s: codeName %q", tc.name, ce.Name)
		}
	}
	res := db.RunCommand(ctx(t), bson.D{{Key: "find", Value: "orders"}, {Key: "min", Value: 5}, {Key: "hint", Value: hashed}})
	var ce mongo.CommandError
	if !errors.As(res.Err(), &ce) || ce.Code != mongoerr.CodeTypeMismatch {
		t.Errorf("min: 5: %v, want TypeMismatch", res.Err())
	}
	// An empty min or max is no bound.
	got, err := findNs(ctx(t), c, bson.D{}, options.Find().SetMin(bson.D{}).SetMax(bson.D{{Key: "_id", Value: int32(3)}}).SetHint(bson.D{{Key: "_id", Value: 1}}))
	if err != nil || fmt.Sprint(got) != "[0 1]" {
		t.Errorf("min {} max {_id: 3} on the _id index: %v %v, want [0 1]", got, err)
	}
}

// readAllChunks reads every document in chunks of limit, mode (A) over
// the whole hashed space then mode (B) for each of 3 partitions, in ctx
// (a snapshot session or a transaction), and returns the n of each mode's
// documents in the order read.
func readAllChunks(t *testing.T, ctx context.Context, c *mongo.Collection, limit int64) (hashed, byID []int32, byIDPart [3][]int32) {
	t.Helper()
	from := int64(math.MinInt64)
	for {
		cur, err := c.Find(ctx, bson.D{}, hashedChunk(from, nil, limit))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			hashed = append(hashed, d.Lookup("n").Int32())
		}
		if int64(len(docs)) < limit {
			break
		}
		from = hashOf(t, docs[len(docs)-1].Lookup("_id").Int32()) + 1
	}
	for p := range 3 {
		last := any(int32(-1))
		for {
			cur, err := c.Find(ctx, idChunkFilter(last, p, true), options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).
				SetHint(bson.D{{Key: "_id", Value: 1}}).SetLimit(limit).SetBatchSize(int32(limit)))
			if err != nil {
				t.Fatal(err)
			}
			var docs []bson.Raw
			if err := cur.All(ctx, &docs); err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				byIDPart[p] = append(byIDPart[p], d.Lookup("n").Int32())
				byID = append(byID, d.Lookup("n").Int32())
			}
			if int64(len(docs)) < limit {
				break
			}
			last = docs[len(docs)-1].Lookup("_id").Int32()
		}
	}
	return hashed, byID, byIDPart
}

// state is what a read should see: the documents by _id, with their n.
type state map[int32]int32

func (s state) hashedOrder(t *testing.T) []int32 {
	ids := make([]int32, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int32) int { return cmp.Compare(hashOf(t, a), hashOf(t, b)) })
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = s[id]
	}
	return out
}

func (s state) idOrder(t *testing.T, p int) []int32 {
	ids := make([]int32, 0, len(s))
	for id := range s {
		if partOf(hashOf(t, id)) == p {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = s[id]
	}
	return out
}

func checkChunks(t *testing.T, what string, want state, hashed []int32, byIDPart [3][]int32) {
	t.Helper()
	if w := want.hashedOrder(t); !slices.Equal(hashed, w) {
		t.Errorf("%s: mode (A) read %d documents %v, want %d %v", what, len(hashed), hashed, len(w), w)
	}
	for p := range 3 {
		if w := want.idOrder(t, p); !slices.Equal(byIDPart[p], w) {
			t.Errorf("%s: mode (B) partition %d read %v, want %v", what, p, byIDPart[p], w)
		}
	}
}

// TestChunksAtSnapshot: a snapshot session reads, chunk after chunk, the
// documents as they were at its first read while other clients update,
// delete and insert documents in the ranges it has not read yet: a
// document deleted since is still read, as it was; one inserted since is
// not, and is not examined.
func TestChunksAtSnapshot(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("orders")
	var ids []any
	at := state{}
	for i := range 200 {
		ids = append(ids, int32(i*2))
		at[int32(i*2)] = int32(i)
	}
	seedDocs(t, c, ids)
	if _, err := c.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := client.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.EndSession(ctx(t))
	snapCtx := mongo.NewSessionContext(ctx(t), snap)
	first, err := findNs(snapCtx, c, bson.D{}, hashedChunk(math.MinInt64, nil, 5)) // fixes the snapshot
	if err != nil {
		t.Fatal(err)
	}
	if w := at.hashedOrder(t)[:5]; !slices.Equal(first, w) {
		t.Fatalf("first chunk %v, want %v", first, w)
	}
	// Others write after the snapshot: every tenth document deleted,
	// every seventh updated, 100 new documents (odd _ids) inserted.
	now := state{}
	for id, n := range at {
		now[id] = n
	}
	for i := range 200 {
		id := int32(i * 2)
		switch {
		case i%10 == 3:
			mustDo(t, func() error { _, err := c.DeleteOne(ctx(t), bson.D{{Key: "_id", Value: id}}); return err })
			delete(now, id)
		case i%7 == 2:
			mustDo(t, func() error {
				_, err := c.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1000}}}})
				return err
			})
			now[id] += 1000
		}
	}
	for i := range 100 {
		id := int32(i*4 + 1)
		mustDo(t, func() error {
			_, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 5000 + i}})
			return err
		})
		now[id] = int32(5000 + i)
	}

	hashed, _, byIDPart := readAllChunks(t, snapCtx, c, 13)
	checkChunks(t, "at the snapshot", at, hashed, byIDPart)
	hashed, _, byIDPart = readAllChunks(t, ctx(t), c, 13)
	checkChunks(t, "now", now, hashed, byIDPart)

	// One chunk at the snapshot, over a range the new documents are in:
	// only what existed then is examined.
	h := at.hashedOrder(t)
	byN := map[int32]int64{}
	for id, n := range at {
		byN[n] = hashOf(t, id)
	}
	from := byN[h[40]]
	before := readCounters(t, client)
	got, err := findNs(snapCtx, c, bson.D{}, hashedChunk(from, nil, 20))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, h[40:60]) {
		t.Errorf("chunk at the snapshot %v, want %v", got, h[40:60])
	}
	if d := readCounters(t, client).minus(before); d != (counters{returned: 20, keys: 20, docs: 20}) {
		t.Errorf("chunk at the snapshot: counters moved by %v, want 20 of each (the documents inserted since are not there for it)", d)
	}
}

// TestChunksInTransaction: inside a transaction, the chunks read its
// snapshot with its own writes: a document it inserted at its key's
// place, one it updated as updated, one it deleted not at all.
func TestChunksInTransaction(t *testing.T) {
	client, db, _ := connect(t)
	c := db.Collection("orders")
	var ids []any
	want := state{}
	for i := range 120 {
		ids = append(ids, int32(i*2))
		want[int32(i*2)] = int32(i)
	}
	seedDocs(t, c, ids)
	if _, err := c.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx(t))
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx(t), sess)
	for i := range 15 {
		id := int32(i*16 + 1)
		mustDo(t, func() error {
			_, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 900 + i}})
			return err
		})
		want[id] = int32(900 + i)
	}
	mustDo(t, func() error { _, err := c.DeleteOne(sctx, bson.D{{Key: "_id", Value: int32(10)}}); return err })
	delete(want, 10)
	mustDo(t, func() error {
		_, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: int32(12)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 777}}}})
		return err
	})
	want[12] = 777
	// A write by another client after the transaction's snapshot.
	mustDo(t, func() error {
		_, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: int32(3)}, {Key: "n", Value: 3333}})
		return err
	})
	hashed, _, byIDPart := readAllChunks(t, sctx, c, 9)
	checkChunks(t, "in the transaction", want, hashed, byIDPart)
	if err := sess.AbortTransaction(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestChunksAfterCompaction: deleting most documents (no snapshot open)
// drops the deleted records and their index entries; the chunks then read
// what is left, and documents inserted afterwards at their keys' places.
func TestChunksAfterCompaction(t *testing.T) {
	_, db, _ := connect(t)
	c := db.Collection("orders")
	var ids []any
	want := state{}
	for i := range 300 {
		ids = append(ids, int32(i*2))
		want[int32(i*2)] = int32(i)
	}
	seedDocs(t, c, ids)
	if _, err := c.Indexes().CreateOne(ctx(t), mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMany(ctx(t), bson.D{{Key: "n", Value: bson.D{{Key: "$mod", Value: bson.A{4, 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMany(ctx(t), bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 200}}}}); err != nil {
		t.Fatal(err)
	}
	for id, n := range want {
		if n%4 == 1 || n < 200 {
			delete(want, id)
		}
	}
	hashed, _, byIDPart := readAllChunks(t, ctx(t), c, 6)
	checkChunks(t, "after the deletes", want, hashed, byIDPart)
	for i := range 40 {
		id := int32(i*10 + 3)
		mustDo(t, func() error {
			_, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 1000 + i}})
			return err
		})
		want[id] = int32(1000 + i)
	}
	hashed, _, byIDPart = readAllChunks(t, ctx(t), c, 6)
	checkChunks(t, "after more inserts", want, hashed, byIDPart)
}
