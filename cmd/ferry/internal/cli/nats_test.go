package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestRunNATS runs the daemon with the nats sink against an in-process
// nats-server with JetStream: the stream ends up holding one message per
// change.
func TestRunNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FERRY", Subjects: []string{"ferry.>"}, Duplicates: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv, client := emulator(t)
	cfgPath := writeFile(t, `
listen: 127.0.0.1:0
state: {uri: "`+srv.URI()+`"}
streams:
  - name: orders
    source: {uri: "`+srv.URI()+`", scope: {collection: shop.orders}}
    delivery: {mode: idempotent}
    sink: {nats: {url: "`+ns.ClientURL()+`"}}
`)
	run := startRun(t, cfgPath)
	run.waitStarted(t, client, "ferry", 1)
	for i := range 25 {
		if _, err := client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 25 {
			return fmt.Errorf("the stream holds %d messages, want 25", info.State.Msgs)
		}
		return nil
	})
	run.stop(t)
	info, _ := stream.Info(ctx)
	if info.State.Msgs != 25 {
		t.Fatalf("stream holds %d messages, want 25", info.State.Msgs)
	}
}
