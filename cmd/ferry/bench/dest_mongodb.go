package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongoerr"
)

// projCollection is the mongodb sink's target collection.
const projCollection = "events"

// projectionDest watches the mongodb sink's target: it counts the
// projection's documents (one per source document, by _id) with collStats,
// which reads the collection's count without scanning it, every
// pollEvery. Its commands land on the cluster (the emulator's CPU), a
// small cost beside the projection's own writes.
type projectionDest struct {
	client *mongo.Client
	db     *mongo.Database
	coll   string
}

func startProjectionWatch(ctx context.Context, c *counter, _ *ready) (destination, error) {
	db, coll, ok := strings.Cut(os.Getenv(nsEnv), ".")
	if !ok {
		return nil, fmt.Errorf("%s=%q is not database.collection", nsEnv, os.Getenv(nsEnv))
	}
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv(uriEnv)))
	if err != nil {
		return nil, err
	}
	d := &projectionDest{client: client, db: client.Database(db), coll: coll}
	go poll(ctx, c, func(ctx context.Context) (int64, int64, error) {
		n, err := d.count(ctx)
		return n, n, err
	})
	return d, nil
}

func (d *projectionDest) count(ctx context.Context) (int64, error) {
	var out struct {
		Count int64 `bson:"count"`
	}
	err := d.db.RunCommand(ctx, bson.D{{Key: "collStats", Value: d.coll}}).Decode(&out)
	if ce, ok := errors.AsType[mongo.CommandError](err); ok && ce.Code == mongoerr.CodeNamespaceNotFound {
		return 0, nil // nothing projected yet
	}
	return out.Count, err
}

func (d *projectionDest) counts(ctx context.Context, verify bool) (counts, error) {
	if verify {
		n, err := d.db.Collection(d.coll).CountDocuments(ctx, bson.D{})
		if err != nil {
			return counts{}, err
		}
		return counts{Delivered: n, Distinct: n, How: "documents in the projection (one per source _id), counted"}, nil
	}
	n, err := d.count(ctx)
	if err != nil {
		return counts{}, err
	}
	return counts{Delivered: n, Distinct: n, How: "documents in the projection (one per source _id), by collStats"}, nil
}

func (d *projectionDest) close() { _ = d.client.Disconnect(context.Background()) }
