package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// docBytes is the size of each backlog document's payload: with its _id
// and field names the document is about 1 KiB.
const docBytes = 1000

// loadBacklog inserts n documents {_id: i, payload: 1000 bytes} into coll,
// 1,000 per insertMany, and returns a cluster time before the first: a
// change stream started there reads the backlog's n inserts first. Its
// increment is 0 and its second is later than the oldest oplog entry's,
// so start_at, which takes whole seconds, can start there too (an
// earlier second may lie before a new emulator's oplog: history lost).
func loadBacklog(ctx context.Context, coll *mongo.Collection, n int) (bson.Timestamp, error) {
	at, err := nextSecond(ctx, coll.Database())
	if err != nil {
		return bson.Timestamp{}, err
	}
	payload := strings.Repeat("p", docBytes)
	for i := 0; i < n; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000 && j < n; j++ {
			docs = append(docs, bson.D{{Key: "_id", Value: j}, {Key: "payload", Value: payload}})
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			return bson.Timestamp{}, fmt.Errorf("load the backlog: %w", err)
		}
	}
	return at, nil
}

// nextSecond waits until the cluster time has moved into a later second
// than now's, and returns that second's start. It writes a marker document
// to the database's "marker" collection for the cluster time to move.
func nextSecond(ctx context.Context, db *mongo.Database) (bson.Timestamp, error) {
	now, err := operationTime(ctx, db.Client())
	if err != nil {
		return bson.Timestamp{}, err
	}
	for {
		if d := time.Until(time.Unix(int64(now.T)+1, 0)); d > 0 {
			select {
			case <-time.After(d): // the clock has to tick: nothing to wait on
			case <-ctx.Done():
				return bson.Timestamp{}, ctx.Err()
			}
		}
		sess, err := db.Client().StartSession()
		if err != nil {
			return bson.Timestamp{}, err
		}
		_, err = db.Collection("marker").InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{})
		op := sess.OperationTime()
		sess.EndSession(ctx)
		if err != nil {
			return bson.Timestamp{}, fmt.Errorf("write the marker: %w", err)
		}
		if op != nil && op.T > now.T {
			return bson.Timestamp{T: op.T}, nil
		}
		// The cluster's clock is behind this machine's: try again a little later.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return bson.Timestamp{}, ctx.Err()
		}
	}
}

// operationTime is the cluster's time now, from a ping's operationTime.
func operationTime(ctx context.Context, client *mongo.Client) (bson.Timestamp, error) {
	sess, err := client.StartSession()
	if err != nil {
		return bson.Timestamp{}, err
	}
	defer sess.EndSession(ctx)
	if err := client.Database("admin").RunCommand(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		return bson.Timestamp{}, fmt.Errorf("ping: %w", err)
	}
	if sess.OperationTime() == nil {
		return bson.Timestamp{}, errors.New("the server returned no operationTime: change streams need a replica set or a sharded cluster")
	}
	return *sess.OperationTime(), nil
}

// rawRead reads the n events from at with a plain driver loop, as a user
// without Ferry would, and returns how long that took from the watch.
func rawRead(ctx context.Context, coll *mongo.Collection, at bson.Timestamp, n int) (time.Duration, error) {
	start := time.Now()
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
	if err != nil {
		return 0, fmt.Errorf("watch: %w", err)
	}
	defer cs.Close(context.Background())
	for i := 0; i < n; i++ {
		if !cs.Next(ctx) {
			return 0, fmt.Errorf("raw read: event %d of %d: %v", i+1, n, errors.Join(cs.Err(), ctx.Err()))
		}
	}
	return time.Since(start), nil
}
