package mongotest

import (
	"context"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// BenchmarkStoredReads measures the emulator's own work per document read,
// without a network or a driver: $MONGOTEST_BENCH_DOCS documents (100,000
// by default) of 1 KiB, shaped as `ferry bench snapshot` loads them ({_id:
// int64, g, v, payload}), are inserted through OP_MSG messages of 1000
// (document sequences, as insertMany sends them), then read back as the
// commands' replies encoded into OP_MSG bytes, as a connection writes them:
//
//   - read=scan: one find {} with batch size 1000 and its getMores (the
//     bench's raw driver loop);
//   - read=hashed: the chunks of a hashed-index snapshot, find with hint
//     {_id: "hashed"}, min/max over 4 ranges of the hashed _id, limit and
//     batch size 1001, readConcern snapshot at one cluster time (random
//     memory order over the documents).
//
// Each reports ns/doc (wall time) and cpu-ns/doc (the process's CPU time,
// the figure to compare on a busy machine), and the heap the stored
// collection holds per document after a GC (heap-B/doc).
func BenchmarkStoredReads(b *testing.B) {
	n := 100_000
	if s := os.Getenv("MONGOTEST_BENCH_DOCS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("MONGOTEST_BENCH_DOCS=%q: want a positive number of documents", s)
		}
		n = v
	}
	s := NewServer()
	defer s.Close()
	e := s.eng
	ctx := context.Background()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	payload := strings.Repeat("p", 1024-46)
	for i := 0; i < n; i += 1000 {
		seq := wire.Section1{Identifier: "documents"}
		for j := i; j < i+1000 && j < n; j++ {
			raw, err := bson.Marshal(bson.D{{Key: "_id", Value: int64(j)}, {Key: "g", Value: int32(j % 10)}, {Key: "v", Value: int32(0)}, {Key: "payload", Value: payload}})
			if err != nil {
				b.Fatal(err)
			}
			seq.Documents = append(seq.Documents, raw)
		}
		body, err := bson.Marshal(bson.D{{Key: "insert", Value: "docs"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "bench"}})
		if err != nil {
			b.Fatal(err)
		}
		msg := (&wire.Msg{Body: body, Sequences: []wire.Section1{seq}}).Append(nil, 1, 0)
		h, _ := wire.ParseHeader(msg)
		m, err := wire.ParseMsg(h, msg[wire.HeaderSize:])
		if err != nil {
			b.Fatal(err)
		}
		cmd, err := m.Command()
		if err != nil {
			b.Fatal(err)
		}
		if reply := e.run(ctx, nil, cmd, m.Sequences); lookupD(reply, "ok") != 1.0 {
			b.Fatalf("insert: %v", reply)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	heapPerDoc := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	if reply := e.run(ctx, nil, bson.D{{Key: "createIndexes", Value: "docs"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}, {Key: "name", Value: "_id_hashed"}}}},
		{Key: "$db", Value: "bench"}}, nil); lookupD(reply, "ok") != 1.0 {
		b.Fatalf("createIndexes: %v", reply)
	}
	enc := newReplyEncoder()
	var out []byte
	// send encodes a reply as conn.serve does and returns its cursor.
	send := func(reply bson.D) bson.Raw {
		out = enc.appendMsg(out[:0], 1, 1, reply)
		body := bson.Raw(out[wire.HeaderSize+5:])
		if ok, _ := body.Lookup("ok").DoubleOK(); ok != 1 {
			b.Fatalf("reply: %v", body)
		}
		return body.Lookup("cursor").Document()
	}
	count := func(cur bson.Raw, key string) int {
		vals, err := cur.Lookup(key).Array().Values()
		if err != nil {
			b.Fatal(err)
		}
		return len(vals)
	}
	b.Run("read=scan", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := ownCPU()
		for range b.N {
			cur := send(e.run(ctx, nil, bson.D{{Key: "find", Value: "docs"}, {Key: "filter", Value: bson.D{}},
				{Key: "batchSize", Value: int32(1000)}, {Key: "$db", Value: "bench"}}, nil))
			got := count(cur, "firstBatch")
			for id := cur.Lookup("id").Int64(); id != 0; id = cur.Lookup("id").Int64() {
				cur = send(e.run(ctx, nil, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "docs"},
					{Key: "batchSize", Value: int32(1000)}, {Key: "$db", Value: "bench"}}, nil))
				got += count(cur, "nextBatch")
			}
			if got != n {
				b.Fatalf("read %d documents, want %d", got, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/doc")
		b.ReportMetric(float64(ownCPU()-cpu0)/float64(b.N*n), "cpu-ns/doc")
		b.ReportMetric(heapPerDoc, "heap-B/doc")
	})
	b.Run("read=hashed", func(b *testing.B) {
		b.ReportAllocs()
		e.mu.Lock()
		at := e.lastTS
		e.mu.Unlock()
		edges := []any{int64(math.MinInt64), int64(math.MinInt64 / 2), int64(0), int64(math.MaxInt64 / 2), bson.MaxKey{}}
		cpu0 := ownCPU()
		for range b.N {
			got := 0
			for r := 0; r+1 < len(edges); r++ {
				from := edges[r].(int64)
				for {
					cur := send(e.run(ctx, nil, bson.D{{Key: "find", Value: "docs"}, {Key: "filter", Value: bson.D{}},
						{Key: "hint", Value: bson.D{{Key: "_id", Value: "hashed"}}},
						{Key: "min", Value: bson.D{{Key: "_id", Value: from}}}, {Key: "max", Value: bson.D{{Key: "_id", Value: edges[r+1]}}},
						{Key: "limit", Value: int64(1001)}, {Key: "batchSize", Value: int64(1001)},
						{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}},
						{Key: "$db", Value: "bench"}}, nil))
					vals, err := cur.Lookup("firstBatch").Array().Values()
					if err != nil {
						b.Fatal(err)
					}
					got += len(vals)
					if len(vals) < 1001 {
						break
					}
					h, err := hashkey.HashRaw(vals[len(vals)-1].Document().Lookup("_id"))
					if err != nil {
						b.Fatal(err)
					}
					from = h + 1
				}
			}
			if got != n {
				b.Fatalf("read %d documents, want %d", got, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/doc")
		b.ReportMetric(float64(ownCPU()-cpu0)/float64(b.N*n), "cpu-ns/doc")
	})
}
