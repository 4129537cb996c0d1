package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/sinktest"
)

func TestNewValidation(t *testing.T) {
	cases := []struct {
		name    string
		brokers []string
		opts    []kafka.Option
		want    string
	}{
		{"no brokers", nil, []kafka.Option{kafka.Topic("t")}, "brokers: no seed brokers"},
		{"empty broker", []string{""}, []kafka.Option{kafka.Topic("t")}, "brokers[0]: must not be empty"},
		{"broker without port", []string{"h"}, []kafka.Option{kafka.Topic("t")}, "brokers[0]: has no port"},
		{"broker with scheme", []string{"h:1", "kafka://h:9092"}, []kafka.Option{kafka.Topic("t")}, "brokers[1]: must be host:port without a scheme"},
		{"no topic", []string{"h:9092"}, nil, "Topic: required"},
		{"empty topic", []string{"h:9092"}, []kafka.Option{kafka.Topic("")}, "Topic: must not be empty"},
		{"bad topic", []string{"h:9092"}, []kafka.Option{kafka.Topic("a b")}, "Topic: may contain only ASCII letters"},
		{"dot topic", []string{"h:9092"}, []kafka.Option{kafka.Topic("..")}, `Topic: cannot be "." or ".."`},
		{"long topic", []string{"h:9092"}, []kafka.Option{kafka.Topic(strings.Repeat("x", 250))}, "Topic: must be at most 249 characters, got 250"},
		{"bad timeout", []string{"h:9092"}, []kafka.Option{kafka.Topic("t"), kafka.Timeout(0)}, "Timeout: must be positive"},
		{"nil option", []string{"h:9092"}, []kafka.Option{kafka.Topic("t"), nil}, "nil option"},
		{"nil client option", []string{"h:9092"}, []kafka.Option{kafka.Topic("t"), kafka.ClientOptions(nil)}, "ClientOptions: option 0 is nil"},
		// Validated once, every problem named; a later option overrides
		// an earlier one.
		{"every problem", []string{""}, []kafka.Option{kafka.Timeout(0), kafka.Timeout(time.Second), kafka.Topic("a/b")},
			"kafka: invalid option: brokers[0]: must not be empty: write a host:port address such as \"kafka-1:9092\"; " +
				"Topic: may contain only ASCII letters, digits, '.', '_' and '-', got \"a/b\""},
	}
	for _, c := range cases {
		_, err := kafka.New(c.brokers, c.opts...)
		if !errors.Is(err, kafka.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want ErrInvalidOption containing %q", c.name, err, c.want)
		}
	}
	if _, err := kafka.New([]string{"h:9092"}, kafka.Topic("ferry.events-1_x")); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// TestRecordShape checks key, value format, headers, and that the events of
// one document share a partition.
func TestRecordShape(t *testing.T) {
	c := startCluster(t, 4)
	r := newReceiver(t, c, 4)
	ctx := context.Background()
	for _, canonical := range []bool{false, true} {
		var opts []kafka.Option
		if canonical {
			opts = append(opts, kafka.Canonical())
		}
		s := r.newSink(t, opts...)
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		var evs []*ferry.Event
		for i := range 12 {
			evs = append(evs, sinktest.NewEvent(i, fmt.Sprintf("doc%d", i%3), 2))
		}
		// A snapshot row: the bare document, operation "backfill".
		row := sinktest.NewEvent(99, "doc0", 2)
		row.OperationType, row.Raw, row.Backfill, row.Token = "backfill", row.FullDocument, true, bson.Raw(row.FullDocument)
		evs = append(evs, row)
		if err := s.Write(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		recs := r.records()
		recs = recs[len(recs)-len(evs):]
		byID := map[string]record{}
		for _, rec := range recs {
			byID[rec.d.EventID] = rec
		}
		partOf := map[string]int32{}
		for _, ev := range evs {
			rec, ok := byID[ev.ID()]
			if !ok {
				t.Fatalf("canonical=%v: event %s missing", canonical, ev.ID())
			}
			want, _ := bson.MarshalExtJSON(ev.DocumentKey, true, false)
			if rec.key != string(want) {
				t.Errorf("key %q, want %q", rec.key, want)
			}
			if p, seen := partOf[rec.key]; seen && p != rec.partition {
				t.Errorf("key %s in partitions %d and %d", rec.key, p, rec.partition)
			}
			partOf[rec.key] = rec.partition
			if has := bytes.Contains(rec.d.Body, []byte(`"$numberInt"`)); has != canonical {
				t.Errorf("canonical=%v: value %s", canonical, rec.d.Body)
			}
			if rec.d.Epoch != 2 {
				t.Errorf("epoch header %d, want 2", rec.d.Epoch)
			}
			if rec.operation != ev.OperationType {
				t.Errorf("operation header %q, want %q", rec.operation, ev.OperationType)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	ev := sinktest.NewEvent(1, "a", 1)
	for _, err := range []error{kerr.MessageTooLarge, kerr.TopicAuthorizationFailed, kerr.InvalidTopicException,
		kerr.RecordListTooLarge, kerr.InvalidRecord, fmt.Errorf("wrapped: %w", kerr.MessageTooLarge)} {
		if got := kafka.Classify(ev, "t", err); sink.IsRetryable(got) || !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v, want permanent wrapping it", err, got)
		}
	}
	for _, err := range []error{kerr.NotLeaderForPartition, kerr.NotEnoughReplicas, kerr.UnknownTopicOrPartition,
		kerr.RequestTimedOut, context.DeadlineExceeded, kgo.ErrClientClosed, errors.New("something odd")} {
		if got := kafka.Classify(ev, "t", err); !sink.IsRetryable(got) || !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v, want retryable wrapping it", err, got)
		}
	}
}

// TestTooLargeIsPermanent produces a record above the client's batch limit:
// the client fails it with kerr.MessageTooLarge, a permanent failure, and
// the other events are delivered.
func TestTooLargeIsPermanent(t *testing.T) {
	r := newReceiver(t, startCluster(t, 1), 1)
	ctx := context.Background()
	s := r.newSink(t, kafka.ClientOptions(kgo.ProducerBatchMaxBytes(2048)))
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	sinktest.CheckTooLarge(t, s, r, 4096, kerr.MessageTooLarge)
}

func TestBrokerDownIsRetryable(t *testing.T) {
	c := startCluster(t, 1)
	r := newReceiver(t, c, 1)
	ctx := context.Background()
	s := r.newSink(t, kafka.Timeout(300*time.Millisecond))
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Write(ctx, []*ferry.Event{sinktest.NewEvent(1, "a", 1)}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	evs := []*ferry.Event{sinktest.NewEvent(2, "a", 1), sinktest.NewEvent(3, "a", 1), sinktest.NewEvent(4, "b", 1)}
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	for i, e := range errs {
		if e == nil || !sink.IsRetryable(e) {
			t.Errorf("event %d with the broker down: %v, want a retryable error", i, e)
		}
	}
	if err := sink.Handler(s)(ctx, evs[0]); err == nil || errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler with the broker down = %v, want a plain retryable error", err)
	}
}

func TestConnectFailsWithoutBroker(t *testing.T) {
	c := startCluster(t, 1)
	addrs := c.ListenAddrs()
	c.Close()
	s, err := kafka.New(addrs, kafka.Topic(topic), kafka.Timeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); err == nil {
		_ = s.Close(context.Background())
		t.Fatal("Connect with no broker listening succeeded")
	}
	if err := s.Write(context.Background(), []*ferry.Event{sinktest.NewEvent(1, "a", 1)}); !errors.Is(err, sink.ErrNotConnected) {
		t.Errorf("Write after a failed Connect = %v, want ErrNotConnected", err)
	}
}

// TestForcedReplay writes events, "crashes" after the broker acknowledged
// them but before the checkpoint, and replays them from an earlier
// checkpoint with new sink instances (new producer sessions). Kafka's
// idempotent producer de-duplicates only within a session, so the topic
// holds the replays: the test counts and prints them, and checks that every
// event is there and that each document's records are in one partition in
// exactly the order they were produced.
func TestForcedReplay(t *testing.T) {
	const partitions = 4
	r := newReceiver(t, startCluster(t, partitions), partitions)
	replay := sinktest.ForcedReplay(t, func() sink.Sink { return r.newSink(t) })
	evs := replay.Events
	wantByKey := replay.ByKey(func(ev *ferry.Event) string { // record key -> event ids in produce order
		k, _ := bson.MarshalExtJSON(ev.DocumentKey, true, false)
		return string(k)
	})
	recs := r.records()
	count := map[string]int{}
	gotByKey := map[string][]string{}
	partOf := map[string]int32{}
	for _, rec := range recs {
		count[rec.d.EventID]++
		if p, ok := partOf[rec.key]; ok && p != rec.partition {
			t.Errorf("document %s in partitions %d and %d", rec.key, p, rec.partition)
		}
		partOf[rec.key] = rec.partition
		gotByKey[rec.key] = append(gotByKey[rec.key], rec.d.EventID)
	}
	for _, ev := range evs {
		if count[ev.ID()] == 0 {
			t.Errorf("event %s lost", ev.ID()[:12])
		}
	}
	dups := len(recs) - len(count)
	t.Logf("produced %d records for %d events; topic holds %d records, %d distinct, %d duplicates",
		40+50+40+60, len(evs), len(recs), len(count), dups)
	fmt.Printf("kafka forced replay: %d events written in 4 producer sessions; topic holds %d records, %d distinct events, %d duplicates (allowed: replays across sessions)\n",
		len(evs), len(recs), len(count), dups)
	if want := sinktest.ReplayWrites; len(recs) != want {
		t.Errorf("topic holds %d records, want %d (every acknowledged produce, once)", len(recs), want)
	}
	if len(count) != len(evs) {
		t.Errorf("topic holds %d distinct events, want %d", len(count), len(evs))
	}
	for key, want := range wantByKey {
		if !slices.Equal(gotByKey[key], want) {
			t.Errorf("document %s: partition order differs from produce order:\n got %v\nwant %v", key, gotByKey[key], want)
		}
	}
}

// BenchmarkWrite produces batches of 100 events to the in-process cluster
// next to the no-op baseline (sinktest.Benchmark).
func BenchmarkWrite(b *testing.B) {
	c := startCluster(b, 4)
	sinktest.Benchmark(b, "kafka", "kfake", func(b *testing.B, baseline bool) sink.Sink {
		opts := []kafka.Option{kafka.Topic(topic)}
		if baseline {
			opts = append(opts, kafka.WithoutProduce())
		}
		s, err := kafka.New(c.ListenAddrs(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
