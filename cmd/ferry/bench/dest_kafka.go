package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ferry-io/ferry/sink/kafka"
)

// The Kafka destination's topic and its partition count.
const (
	kafkaTopic      = "ferry.bench"
	kafkaPartitions = 4
)

// kafkaDest is a one-broker kfake cluster. While the bench measures, it
// counts the topic's records by its partitions' high watermarks (kfake
// keeps every record from offset 0), asked every pollEvery; verify reads
// the topic back and counts distinct ferry-event-id headers.
type kafkaDest struct {
	cluster *kfake.Cluster
	cl      *kgo.Client
}

func startKafka(ctx context.Context, c *counter, r *ready) (destination, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, kafkaTopic))
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		cluster.Close()
		return nil, err
	}
	d := &kafkaDest{cluster: cluster, cl: cl}
	r.KafkaBroker, r.KafkaTopic = cluster.ListenAddrs()[0], kafkaTopic
	go poll(ctx, c, func(ctx context.Context) (int64, int64, error) {
		n, err := d.watermarks(ctx)
		return n, -1, err
	})
	return d, nil
}

// watermarks is the sum of the topic's partitions' high watermarks.
func (d *kafkaDest) watermarks(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = kafkaTopic
	for p := range int32(kafkaPartitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("ListOffsets partition %d: %w", p.Partition, err)
			}
			sum += p.Offset
		}
	}
	return sum, nil
}

func (d *kafkaDest) counts(ctx context.Context, verify bool) (counts, error) {
	total, err := d.watermarks(ctx)
	if err != nil {
		return counts{}, err
	}
	if !verify {
		return counts{Delivered: total, Distinct: -1, How: "records in the topic (high watermarks)"}, nil
	}
	distinct, err := d.readBack(ctx, total)
	if err != nil {
		return counts{}, err
	}
	return counts{Delivered: total, Distinct: distinct, How: "records in the topic, read back, distinct by " + kafka.EventIDHeader}, nil
}

// readBack consumes the topic's total records and counts distinct event
// ids.
func (d *kafkaDest) readBack(ctx context.Context, total int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.cluster.ListenAddrs()...), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ids := map[string]struct{}{}
	var read int64
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("read %d of the topic's %d records back within a minute", read, total)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("fetch partition %d: %w", p, err) })
		if ferr != nil {
			return 0, ferr
		}
		fs.EachRecord(func(rec *kgo.Record) {
			read++
			for _, h := range rec.Headers {
				if h.Key == kafka.EventIDHeader {
					ids[string(h.Value)] = struct{}{}
				}
			}
		})
	}
	return int64(len(ids)), nil
}

func (d *kafkaDest) close() {
	d.cl.Close()
	d.cluster.Close()
}
