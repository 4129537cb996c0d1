package ferry

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// benchQueueHook is a HookQueue, as `ferry bench snapshot`'s members have
// (their lag figure), and benchEventHook a HookEvent, as the daemon's
// metrics are.
type benchQueueHook struct{ n atomic.Int64 }

func (h *benchQueueHook) OnQueue(QueueInfo) { h.n.Add(1) }

type benchEventHook struct{ n atomic.Int64 }

func (h *benchEventHook) OnEvent(EventInfo) { h.n.Add(1) }

// BenchmarkSnapshotRows is a member's own work per snapshot row, without
// the driver, the server or the state store: each chunk is a fresh copy
// of a find reply of 1001 1 KiB documents ({_id: int64, g, v, payload},
// as `ferry bench snapshot` loads them; a fresh copy as the driver reads
// each reply into a new buffer), parsed and cut as a hashed-mode chunk
// (1000 rows), made into events and spliced into the lanes, applied by
// a no-op BatchHandler, and waited for. It reports the process's CPU
// time per row (cpu-ns/row), with a HookQueue (hooks=queue, the bench's
// members) or a HookEvent (hooks=event, as with the daemon's metrics).
func BenchmarkSnapshotRows(b *testing.B) {
	const chunkSize = 1000
	docs := make(bson.A, 0, chunkSize+1)
	pad := strings.Repeat("p", 1024-46)
	for i := range chunkSize + 1 {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(i)}, {Key: "g", Value: int32(i % 10)}, {Key: "v", Value: int32(0)}, {Key: "payload", Value: pad}})
	}
	at := bson.Timestamp{T: 1700000000, I: 1}
	tmpl, err := bson.Marshal(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: docs}, {Key: "atClusterTime", Value: at},
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "d.c"}}}, {Key: "ok", Value: 1.0}})
	if err != nil {
		b.Fatal(err)
	}
	for _, hook := range []string{"queue", "event"} {
		b.Run("hooks="+hook, func(b *testing.B) {
			st, client := offlineConsumerDeps(b)
			var h Hook = &benchQueueHook{}
			if hook == "event" {
				h = &benchEventHook{}
			}
			var applied atomic.Int64
			c, err := NewBatchConsumer(client, func(_ context.Context, evs []*Event) error { applied.Add(int64(len(evs))); return nil },
				WatchCollection("d", "c"), Stream("bench"), Checkpoints(st), OnPoison(PoisonStall), WithHooks(h))
			if err != nil {
				b.Fatal(err)
			}
			r := benchRunner(b, c)
			rec := &snapshotRecord{ID: "6b14054f37e99217de7ec774", Since: time.Now(), Mode: SnapshotByHashedIndex}
			ns := Namespace{DB: "d", Coll: "c"}
			rows := 0
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for rows < b.N {
				reply := append(bson.Raw(nil), tmpl...) // the driver's buffer of the reply
				ch, id, err := parseChunk(reply, bson.Timestamp{}, chunkSize+1)
				if err != nil || id != 0 {
					b.Fatal(err, id)
				}
				if err := ch.cutHashed(chunkSize, false); err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				items, err := r.chunkItems(ns, rec, ch, nil, &wg)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(len(items))
				s := newSplice(0)
				r.snap.hold = s
				r.spliceRows(s, items)
				wg.Wait()
				rows += len(items)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(rows), "cpu-ns/row")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
			for _, l := range r.lanes {
				close(l)
			}
			r.waitLanes(nil)
			if n := applied.Load(); n != int64(rows) {
				b.Fatalf("%d rows applied of %d", n, rows)
			}
		})
	}
}
