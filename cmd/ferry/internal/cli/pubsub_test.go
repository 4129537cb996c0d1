package cli

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink/pubsub"
)

// TestRunPubSub runs the daemon with the pubsub sink against pstest: the
// topic ends up holding one message per change, each carrying its event
// id, epoch and operation, ordered by its document's key.
func TestRunPubSub(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	ctx := context.Background()
	if _, err := ps.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/ferry-test/topics/orders"}); err != nil {
		t.Fatal(err)
	}
	srv, client := emulator(t)
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    group: {partitions: 2}
    delivery: {mode: idempotent}
    sink: {pubsub: {project: ferry-test, topic: orders, emulator: "`+ps.Addr+`"}}
`)
	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry", 2)
	orders := client.Database("shop").Collection("orders")
	const inserts, updates, deletes = 20, 8, 4
	for i := range inserts {
		if _, err := orders.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range updates {
		if _, err := orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range deletes {
		if _, err := orders.DeleteOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	const changes = inserts + updates + deletes
	poll.Until(t, 30*time.Second, func() error {
		run.alive(t)
		if n := len(ps.Messages()); n < changes {
			return fmt.Errorf("%d messages published, want %d", n, changes)
		}
		return nil
	})
	run.stop(t)
	msgs := ps.Messages()
	if len(msgs) != changes {
		t.Fatalf("the topic holds %d messages, want %d", len(msgs), changes)
	}
	ids := map[string]bool{}
	ops := map[string][]string{} // ordering key -> operations in topic order
	for _, m := range msgs {
		id := m.Attributes[pubsub.EventIDAttribute]
		if len(id) != 64 || ids[id] {
			t.Errorf("message %s: event id %q (missing or repeated)", m.ID, id)
		}
		ids[id] = true
		if e, err := strconv.ParseInt(m.Attributes[pubsub.EpochAttribute], 10, 64); err != nil || e < 1 {
			t.Errorf("message %s: epoch %q", m.ID, m.Attributes[pubsub.EpochAttribute])
		}
		if ns := m.Attributes[pubsub.NamespaceAttribute]; ns != "shop.orders" {
			t.Errorf("message %s: namespace %q", m.ID, ns)
		}
		ops[m.OrderingKey] = append(ops[m.OrderingKey], m.Attributes[pubsub.OperationAttribute])
	}
	for i := range inserts {
		key := fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, i)
		want := []string{"insert"}
		if i < updates {
			want = append(want, "update")
		}
		if i < deletes {
			want = append(want, "delete")
		}
		if fmt.Sprint(ops[key]) != fmt.Sprint(want) {
			t.Errorf("document %d: operations %v under ordering key %s, want %v", i, ops[key], key, want)
		}
	}
}
