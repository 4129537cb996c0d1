package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink/kafka"
)

const kafkaTestTopic = "ferry.orders"

// startKafka starts an in-process one-broker fake Kafka cluster with the
// test topic seeded with that many partitions.
func startKafka(t *testing.T, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, kafkaTestTopic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// yamlList renders strings as a YAML flow list.
func yamlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// kafkaReader reads the test topic from the start with its own client.
type kafkaReader struct {
	t          *testing.T
	cl         *kgo.Client
	partitions int32
}

func newKafkaReader(t *testing.T, c *kfake.Cluster, partitions int32, opts ...kgo.Opt) *kafkaReader {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumeTopics(kafkaTestTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafkaReader{t: t, cl: cl, partitions: partitions}
}

// read polls the topic until it has read n records in all (or fails the
// test after 30s) and returns them, per partition in offset order.
func (r *kafkaReader) read(n int) []*kgo.Record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.t.Fatalf("read %d of %d records before the deadline", len(got), n)
		}
		fs.EachError(func(_ string, p int32, err error) { r.t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(rec *kgo.Record) { got = append(got, rec) })
	}
	return got
}

// total returns the number of records the topic holds: the sum of its
// partitions' high watermarks (kfake keeps every record from offset 0).
func (r *kafkaReader) total() int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = kafkaTestTopic
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
	var sum int64
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				r.t.Fatalf("ListOffsets partition %d: %v", p.Partition, err)
			}
			sum += p.Offset
		}
	}
	return sum
}

// headers returns a record's headers by name, each with all its values.
func headers(rec *kgo.Record) map[string][]string {
	h := map[string][]string{}
	for _, x := range rec.Headers {
		h[x.Key] = append(h[x.Key], string(x.Value))
	}
	return h
}

// TestRunKafka runs the daemon with the kafka sink against an in-process
// fake Kafka cluster (three partitions): after inserts, updates and
// deletes, the topic holds exactly one record per change, keyed by the
// documentKey in canonical Extended JSON, with the event's id in
// ferry-event-id, each document's changes on one partition in order.
func TestRunKafka(t *testing.T) {
	const partitions = 3
	const inserts, updates, deletes = 20, 10, 5
	const changes = inserts + updates + deletes
	kc := startKafka(t, partitions)
	srv, client := emulator(t)
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    group: {partitions: 2, lease_ttl: 2s}
    delivery: {mode: idempotent}
    sink:
      kafka:
        brokers: `+yamlList(kc.ListenAddrs())+`
        topic: `+kafkaTestTopic+`
        encoding: canonical
        timeout: 5s
        client_id: ferry-e2e
`)
	ctx := context.Background()
	run := startRun(t, cfgPath)
	// Both partitions record their start position before reading.
	run.waitStarted(t, client, "ferry", 2)
	coll := client.Database("shop").Collection("orders")
	for i := range int32(inserts) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int32(updates) {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int32(deletes) {
		if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	r := newKafkaReader(t, kc, partitions)
	recs := r.read(changes)
	run.stop(t)
	// The daemon has stopped (its sink flushed and closed): nothing more
	// can arrive, so the topic's size is final.
	if n := r.total(); n != changes || len(recs) != changes {
		t.Fatalf("the topic holds %d records (%d read), want exactly %d", n, len(recs), changes)
	}

	type change struct {
		op        string
		partition int32
		offset    int64
	}
	perDoc := map[int32][]change{}
	ids := map[string]bool{}
	for _, rec := range recs {
		h := headers(rec)
		if len(h[kafka.EventIDHeader]) != 1 || len(h[kafka.EpochHeader]) != 1 {
			t.Fatalf("record %d/%d: headers %v", rec.Partition, rec.Offset, h)
		}
		id := h[kafka.EventIDHeader][0]
		if ids[id] {
			t.Fatalf("event %s produced twice", id)
		}
		ids[id] = true
		if epoch, err := strconv.ParseInt(h[kafka.EpochHeader][0], 10, 64); err != nil || epoch < 1 {
			t.Fatalf("record %d/%d: %s %q, want a lease epoch", rec.Partition, rec.Offset, kafka.EpochHeader, h[kafka.EpochHeader][0])
		}
		var ev bson.Raw
		if err := bson.UnmarshalExtJSON(rec.Value, true, &ev); err != nil {
			t.Fatalf("record %d/%d: the value is not canonical Extended JSON: %v\n%s", rec.Partition, rec.Offset, err, rec.Value)
		}
		// The header is the event id: hex sha256 of the resume token.
		tok, ok := ev.Lookup("_id").DocumentOK()
		if !ok {
			t.Fatalf("record %d/%d: no resume token in %s", rec.Partition, rec.Offset, rec.Value)
		}
		if want := ferry.EventID(tok); id != want {
			t.Fatalf("record %d/%d: %s %s, want %s (the id of its resume token)", rec.Partition, rec.Offset, kafka.EventIDHeader, id, want)
		}
		dk, ok := ev.Lookup("documentKey").DocumentOK()
		if !ok {
			t.Fatalf("record %d/%d: no documentKey in %s", rec.Partition, rec.Offset, rec.Value)
		}
		docID, ok := dk.Lookup("_id").Int32OK()
		if !ok {
			t.Fatalf("record %d/%d: documentKey %s", rec.Partition, rec.Offset, dk)
		}
		wantKey, err := bson.MarshalExtJSON(dk, true, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Key) != string(wantKey) || string(rec.Key) != fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, docID) {
			t.Fatalf("record %d/%d: key %s, want %s", rec.Partition, rec.Offset, rec.Key, wantKey)
		}
		op := ev.Lookup("operationType").StringValue()
		perDoc[docID] = append(perDoc[docID], change{op, rec.Partition, rec.Offset})
	}
	// Every change is there; a document's changes share a partition and
	// follow each other in the order they were made.
	for i := range int32(inserts) {
		want := []string{"insert"}
		if i < updates {
			want = append(want, "update")
		}
		if i < deletes {
			want = append(want, "delete")
		}
		cs := perDoc[i]
		slices.SortFunc(cs, func(a, b change) int { return int(a.offset - b.offset) })
		var got []string
		for _, c := range cs {
			got = append(got, c.op)
			if c.partition != cs[0].partition {
				t.Errorf("document %d: changes on partitions %d and %d", i, cs[0].partition, c.partition)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("document %d: changes %v, want %v", i, got, want)
		}
	}
	if len(perDoc) != inserts {
		t.Errorf("records for %d documents, want %d", len(perDoc), inserts)
	}
}

// kafkaSASLConfig is a stream with the kafka sink authenticating with
// SASL; the password comes from FERRY_TEST_KAFKA_PASSWORD.
func kafkaSASLConfig(mongoURI string, brokers []string, mechanism string) string {
	return `
listen: 127.0.0.1:0
state: {uri: "` + mongoURI + `"}
streams:
  - name: orders
    source: {uri: "` + mongoURI + `", scope: {collection: shop.orders}}
    sink:
      kafka:
        brokers: ` + yamlList(brokers) + `
        topic: ` + kafkaTestTopic + `
        timeout: 2s
        sasl: {mechanism: ` + mechanism + `, user: ferry, password: "${FERRY_TEST_KAFKA_PASSWORD}"}
`
}

// TestKafkaSASL builds the kafka sink from configurations with each SASL
// mechanism against a fake cluster requiring it: with the right password
// an event is produced and read back; with a wrong one connecting fails,
// and the error shows neither password.
func TestKafkaSASL(t *testing.T) {
	const password = "k4fka-sasl-pw-5521"
	for _, m := range []struct{ config, kfake string }{
		{config.KafkaSASLPlain, "PLAIN"},
		{config.KafkaSASLScramSHA256, "SCRAM-SHA-256"},
		{config.KafkaSASLScramSHA512, "SCRAM-SHA-512"},
	} {
		t.Run(m.config, func(t *testing.T) {
			kc := startKafka(t, 1, kfake.EnableSASL(), kfake.Superuser(m.kfake, "ferry", password))
			ctx := context.Background()
			build := func(pw string) (*kafka.Sink, error) {
				t.Helper()
				cfg, err := config.Parse([]byte(kafkaSASLConfig("mongodb://127.0.0.1:1/?replicaSet=rs0", kc.ListenAddrs(), m.config)),
					func(name string) (string, bool) { return pw, name == "FERRY_TEST_KAFKA_PASSWORD" })
				if err != nil {
					t.Fatal(err)
				}
				s, err := cfg.Streams[0].NewSink(io.Discard, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s.(*kafka.Sink), s.Connect(ctx)
			}

			s, err := build("wrong-" + password)
			if err == nil {
				s.Close(ctx)
				t.Fatal("connected with a wrong password")
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("the error shows the password: %v", err)
			}

			s, err = build(password)
			if err != nil {
				t.Fatalf("connecting with the right password: %v", err)
			}
			defer s.Close(ctx)
			raw, err := bson.Marshal(bson.D{
				{Key: "_id", Value: bson.D{{Key: "_data", Value: "8200000001"}}},
				{Key: "operationType", Value: "insert"},
				{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
				{Key: "documentKey", Value: bson.D{{Key: "_id", Value: "o-1"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := ferry.ParseEvent(raw, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Write(ctx, []*ferry.Event{ev}); err != nil {
				t.Fatalf("write: %v", err)
			}
			r := newKafkaReader(t, kc, 1, kgo.SASL(superuserMechanism(m.config, password)))
			rec := r.read(1)[0]
			if string(rec.Key) != `{"_id":"o-1"}` || headers(rec)[kafka.EventIDHeader][0] != ev.ID() {
				t.Fatalf("record key %s headers %v", rec.Key, headers(rec))
			}
		})
	}
}

// superuserMechanism authenticates the test's reader as the daemon's user.
func superuserMechanism(mechanism, password string) sasl.Mechanism {
	m, err := (&config.KafkaSASL{Mechanism: mechanism, User: "ferry", Password: config.Secret(password)}).SASL()
	if err != nil {
		panic(err)
	}
	return m
}

// TestKafkaSecretsNeverShown: the kafka sink's SASL password never appears
// in ferry's output (validate, run — connecting with a wrong password, and
// with the right one —, status, dlq list).
func TestKafkaSecretsNeverShown(t *testing.T) {
	const password = "k4fka-never-shown-8812"
	kc := startKafka(t, 1, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "ferry", password))
	srv := mongotest.New(t)
	cfgPath := writeFile(t, kafkaSASLConfig(srv.URI(), kc.ListenAddrs(), config.KafkaSASLScramSHA512))
	var all bytes.Buffer

	// A wrong password: the daemon stops with the sink's connection error.
	t.Setenv("FERRY_TEST_KAFKA_PASSWORD", "wrong-"+password)
	var out, errOut bytes.Buffer
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	code := run(rctx, []string{"run", "-c", cfgPath}, &out, &errOut)
	cancel()
	if code != 1 || !strings.Contains(errOut.String(), "streams[0].sink: kafka: connecting to") {
		t.Fatalf("run with a wrong SASL password: exit %d:\n%s", code, errOut.String())
	}
	all.WriteString(out.String() + errOut.String())

	t.Setenv("FERRY_TEST_KAFKA_PASSWORD", password)
	for _, args := range [][]string{{"validate", "-c", cfgPath}, {"status", "-c", cfgPath}, {"dlq", "list", "-c", cfgPath}} {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		run(ctx, args, &out, &errOut)
		cancel()
		all.WriteString(out.String() + errOut.String())
	}
	if !strings.Contains(all.String(), "ok (1 stream(s))") {
		t.Fatalf("validate did not accept the file:\n%s", all.String())
	}

	// The right password: the daemon runs (its sink connected) until stopped.
	d := startRun(t, cfgPath)
	poll.Until(t, 30*time.Second, func() error {
		d.alive(t)
		if !regexp.MustCompile(`"msg":"listening"`).MatchString(d.errOut.String()) {
			return errors.New("ferry run does not log that it listens")
		}
		return nil
	})
	d.stop(t)
	all.WriteString(d.out.String() + d.errOut.String())

	if strings.Contains(all.String(), password) {
		t.Fatalf("the SASL password appeared in ferry's output:\n%s", all.String())
	}
}
