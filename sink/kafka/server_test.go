package kafka_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/sinktest"
)

const topic = "ferry.events"

// startCluster starts an in-process one-broker fake cluster with the topic
// seeded with that many partitions.
func startCluster(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// record is one record read back from the topic.
type record struct {
	partition   int32
	offset      int64
	key         string
	d           sinktest.Delivery
	traceParent string
	operation   string
}

// receiver consumes the topic with its own kgo client.
type receiver struct {
	t          testing.TB
	cluster    *kfake.Cluster
	partitions int32
	cl         *kgo.Client

	sinktest.Faults

	mu   sync.Mutex
	got  []record
	next map[int32]int64 // next offset to read per partition
}

func newReceiver(t testing.TB, c *kfake.Cluster, partitions int32) *receiver {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &receiver{t: t, cluster: c, partitions: partitions, cl: cl, next: map[int32]int64{}}
}

// endOffsets asks the broker for each partition's high watermark.
func (r *receiver) endOffsets(ctx context.Context) map[int32]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range r.partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		r.t.Fatalf("ListOffsets: %v", err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				r.t.Fatalf("ListOffsets partition %d: %v", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// records reads the topic up to its current end and returns everything
// read so far, per partition in offset order (partitions interleaved as
// fetched).
func (r *receiver) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end := r.endOffsets(ctx)
	behind := func() bool {
		for p, e := range end {
			if r.next[p] < e {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := r.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			r.t.Fatalf("reading the topic up to %v (at %v): %v", end, r.next, err)
		}
		fs.EachError(func(_ string, p int32, err error) { r.t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(rec *kgo.Record) {
			r.got = append(r.got, toRecord(rec))
			r.next[rec.Partition] = rec.Offset + 1
		})
	}
	return append([]record(nil), r.got...)
}

func toRecord(rec *kgo.Record) record {
	var d sinktest.Delivery
	for _, h := range rec.Headers {
		switch h.Key {
		case kafka.EventIDHeader:
			d.EventID = string(h.Value)
			d.IdempotencyKey = d.EventID
		case kafka.EpochHeader:
			d.Epoch, _ = strconv.ParseInt(string(h.Value), 10, 64)
		}
	}
	d.Body = rec.Value
	out := record{partition: rec.Partition, offset: rec.Offset, key: string(rec.Key), d: d}
	for _, h := range rec.Headers {
		switch h.Key {
		case kafka.TraceParentHeader:
			out.traceParent = string(h.Value)
		case kafka.OperationHeader:
			out.operation = string(h.Value)
		}
	}
	return out
}

func (r *receiver) Received() []sinktest.Delivery {
	recs := r.records()
	out := make([]sinktest.Delivery, len(recs))
	for i, rec := range recs {
		out[i] = rec.d
	}
	return out
}

// fault fails events the way the client would: a leader election outlasting
// the produce (retryable) or a record above the batch limit (permanent).
func (r *receiver) fault() func(*ferry.Event) error {
	return r.Hook(kerr.NotLeaderForPartition, kerr.MessageTooLarge)
}

func (r *receiver) newSink(t testing.TB, opts ...kafka.Option) *kafka.Sink {
	opts = append([]kafka.Option{kafka.Topic(topic), kafka.WithFault(r.fault()), kafka.Timeout(5 * time.Second)}, opts...)
	s, err := kafka.New(r.cluster.ListenAddrs(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (r *receiver) NewSink(t *testing.T) sink.Sink { return r.newSink(t) }

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		// One partition: the topic's order is then the produce order,
		// which the suite checks across keys too.
		r := newReceiver(t, startCluster(t, 1), 1)
		return r.NewSink(t), r
	})
}
