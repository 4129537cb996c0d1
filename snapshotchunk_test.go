package ferry

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// chunkReply is a find reply of docs, at cluster time at (none when
// zero), with cursor id id.
func chunkReply(t *testing.T, docs bson.A, at bson.Timestamp, id int64) bson.Raw {
	t.Helper()
	cur := bson.D{{Key: "firstBatch", Value: docs}}
	if !at.IsZero() {
		cur = append(cur, bson.E{Key: "atClusterTime", Value: at})
	}
	cur = append(cur, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: "d.c"})
	raw, err := bson.Marshal(bson.D{{Key: "cursor", Value: cur}, {Key: "ok", Value: 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestParseChunk: a chunk's reply gives its documents in order (aliasing
// the reply), the cluster time it was read at (the one asked for when the
// reply has none), and the cursor left open; a reply without a cursor, a
// batch or a cluster time, or with a batch element that is not a
// document, is an error.
func TestParseChunk(t *testing.T) {
	var docs bson.A
	for i := range 5 {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(i)}, {Key: "pad", Value: strings.Repeat("p", i*10)}})
	}
	at := bson.Timestamp{T: 10, I: 3}
	reply := chunkReply(t, docs, at, 77)
	c, id, err := parseChunk(reply, bson.Timestamp{T: 1}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if id != 77 || c.at != at || c.bytes != int64(len(reply)) || len(c.rows) != len(docs) {
		t.Fatalf("parsed id %d, at %v, %d bytes, %d rows", id, c.at, c.bytes, len(c.rows))
	}
	for i, row := range c.rows {
		want, _ := bson.Marshal(docs[i])
		if !bytes.Equal(row, want) {
			t.Fatalf("row %d is %v, want %v", i, row, bson.Raw(want))
		}
		if at := bytes.Index(reply, row); at < 0 || &reply[at] != &row[0] {
			t.Fatalf("row %d is a copy, not the reply's bytes", i)
		}
	}
	if c, _, err := parseChunk(chunkReply(t, docs, bson.Timestamp{}, 0), at, 6); err != nil || c.at != at {
		t.Fatalf("a reply without atClusterTime: at %v, %v; want the time asked for", c.at, err)
	}
	if c, _, err := parseChunk(chunkReply(t, bson.A{}, at, 0), at, 6); err != nil || len(c.rows) != 0 {
		t.Fatalf("an empty batch: %v rows, %v", c.rows, err)
	}
	for name, bad := range map[string]bson.Raw{
		"no cursor":         mustRaw(t, bson.D{{Key: "ok", Value: 1.0}}),
		"no batch":          mustRaw(t, bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "atClusterTime", Value: at}}}}),
		"no cluster time":   chunkReply(t, docs, bson.Timestamp{}, 0),
		"a non-document":    chunkReply(t, bson.A{bson.D{{Key: "_id", Value: 1}}, "x"}, at, 0),
		"a non-array batch": mustRaw(t, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: "x"}, {Key: "atClusterTime", Value: at}}}}),
	} {
		if _, _, err := parseChunk(bad, bson.Timestamp{}, 6); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestChunkItemsAreBackfillEvents: the events chunkItems makes (in blocks)
// are the events newBackfillEvent makes of the same rows, one per row,
// distinct, each item done on the chunk's WaitGroup, with the chunk's
// cluster time and the snapshot's start; over several blocks.
func TestChunkItemsAreBackfillEvents(t *testing.T) {
	c := &Consumer{cfg: config{name: "s", partition: 2, epoch: 9}}
	r := &runner{c: c}
	at := bson.Timestamp{T: 1700000000, I: 4}
	rec := &snapshotRecord{ID: "6b14054f37e99217de7ec774", Since: time.Unix(1700000000, 0)}
	n := 2*max(eventBlock, itemBlock) + 3
	ch := &chunk{at: at}
	for i := range n {
		var id any = int64(i)
		if i%3 == 1 {
			id = "s" + strings.Repeat("x", i)
		}
		ch.rows = append(ch.rows, mustRaw(t, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: int32(i)}}))
	}
	ns := Namespace{DB: "d", Coll: "c"}
	var wg sync.WaitGroup
	items, err := r.chunkItems(ns, rec, ch, nil, &wg)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != n {
		t.Fatalf("%d items for %d rows", len(items), n)
	}
	seed := append([]byte(rec.ID+"\x00"), 0x65, 0x53, 0xf1, 0x00, 0, 0, 0, 4)
	seen := map[*Event]bool{}
	for i, it := range items {
		want, err := newBackfillEvent(ns, ch.rows[i], seed, 2, 9, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := it.ev
		if seen[ev] {
			t.Fatalf("row %d shares its event with another row", i)
		}
		seen[ev] = true
		if it.wg != &wg || it.size != int64(len(ch.rows[i])) {
			t.Fatalf("row %d: item size %d, its own WaitGroup %v", i, it.size, it.wg != &wg)
		}
		if ev.OperationType != OperationBackfill || ev.Namespace != ns || !bytes.Equal(ev.DocumentKey, want.DocumentKey) ||
			!bytes.Equal(ev.FullDocument, ch.rows[i]) || !bytes.Equal(ev.Raw, ch.rows[i]) || ev.Partition != 2 || ev.Epoch != 9 || !ev.Backfill ||
			ev.ClusterTime != at || ev.ScanMarker != at || !ev.ScanStarted.Equal(rec.Since) {
			t.Fatalf("row %d: event %+v, want the backfill event %+v at %v", i, ev, want, at)
		}
		if ev.ID() != want.ID() {
			t.Fatalf("row %d: id %s, want %s", i, ev.ID(), want.ID())
		}
	}
	// A row without _id fails the chunk.
	ch.rows[n-1] = mustRaw(t, bson.D{{Key: "v", Value: 1}})
	if _, err := r.chunkItems(ns, rec, ch, nil, &wg); err == nil {
		t.Fatal("a row without _id made an event")
	}
}
