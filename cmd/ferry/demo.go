package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// runDemo starts the emulator, opens a change stream through the official
// driver, writes documents (inserts, updates, a delete) and prints every
// change event it receives, then a one-line summary scripts can check.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("n", 5, "number of documents to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("-n must be at least 1, got %d", *n)
	}
	srv, err := mongotest.Start()
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(out, "emulator: %s\n", srv.URI())

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("shop").Collection("orders")

	stream, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		return fmt.Errorf("open change stream: %w", err)
	}
	defer stream.Close(context.Background())

	writes := 0
	for i := 1; i <= *n; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "status", Value: "new"}, {Key: "total", Value: i * 10}}); err != nil {
			return err
		}
		writes++
	}
	for i := 1; i <= *n; i += 2 {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: i}}, bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "paid"}}}}); err != nil {
			return err
		}
		writes++
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: *n}}); err != nil {
		return err
	}
	writes++

	counts := map[string]int{}
	for seen := 0; seen < writes; seen++ {
		if !stream.Next(ctx) {
			if err := stream.Err(); err != nil {
				return err
			}
			return errors.New("change stream ended early")
		}
		var ev struct {
			OperationType string         `bson:"operationType"`
			ClusterTime   bson.Timestamp `bson:"clusterTime"`
			DocumentKey   bson.Raw       `bson:"documentKey"`
			FullDocument  bson.Raw       `bson:"fullDocument"`
		}
		if err := stream.Decode(&ev); err != nil {
			return err
		}
		counts[ev.OperationType]++
		line := fmt.Sprintf("event %-7s t=%d.%d key=%s", ev.OperationType, ev.ClusterTime.T, ev.ClusterTime.I, ev.DocumentKey)
		if ev.FullDocument != nil {
			line += " doc=" + ev.FullDocument.String()
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "demo: written=%d events=%d inserts=%d updates=%d deletes=%d\n",
		writes, counts["insert"]+counts["update"]+counts["delete"], counts["insert"], counts["update"], counts["delete"])
	return nil
}
