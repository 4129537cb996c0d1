package unified

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// The special testRunner operations.

func init() {
	specialOps["failPoint"] = opFailPoint
	specialOps["createEntities"] = opCreateEntities
	specialOps["assertCollectionExists"] = opAssertCollection(true)
	specialOps["assertCollectionNotExists"] = opAssertCollection(false)
	specialOps["assertIndexExists"] = opAssertIndex(true)
	specialOps["assertIndexNotExists"] = opAssertIndex(false)
}

// opFailPoint runs configureFailPoint through the given client with a
// primary read preference, and records the fail point so that it is turned
// off after the test.
func opFailPoint(tr *testRun, ctx context.Context, a *fields) error {
	clientID := a.reqStr("client")
	fp := a.reqDoc("failPoint")
	if err := a.ready(); err != nil {
		return err
	}
	ce, err := tr.ents.get(clientID, kindClient)
	if err != nil {
		return asRunnerError(err)
	}
	name := lookupString(fp, "configureFailPoint")
	if name == "" {
		return rerr("failPoint: the document has no configureFailPoint name")
	}
	err = ce.client.client.Database("admin").RunCommand(ctx, fp, options.RunCmd().SetReadPreference(readpref.Primary())).Err()
	if err != nil {
		return fmt.Errorf("configureFailPoint %s: %w", name, err)
	}
	tr.failPoints = append(tr.failPoints, failPointRecord{client: ce.client, name: name})
	return nil
}

func opCreateEntities(tr *testRun, _ context.Context, a *fields) error {
	defs := a.docs("entities")
	if err := a.ready(); err != nil {
		return err
	}
	for i, d := range defs {
		e, err := parseEntityDef(d, fmt.Sprintf("entities[%d]", i))
		if err != nil {
			return asRunnerError(err)
		}
		if err := tr.createEntity(e); err != nil {
			return err
		}
		if e.Kind == kindClient {
			ce, _ := tr.ents.get(e.ID, kindClient)
			ce.client.log.start()
		}
	}
	return nil
}

func opAssertCollection(exists bool) func(*testRun, context.Context, *fields) error {
	return func(tr *testRun, ctx context.Context, a *fields) error {
		db, coll := a.reqStr("databaseName"), a.reqStr("collectionName")
		if err := a.ready(); err != nil {
			return err
		}
		names, err := tr.internal.Database(db).ListCollectionNames(ctx, bson.D{{Key: "name", Value: coll}})
		if err != nil {
			return fmt.Errorf("listCollections: %w", err)
		}
		if got := len(names) > 0; got != exists {
			return fmt.Errorf("collection %s.%s: expected exists=%v, got %v", db, coll, exists, got)
		}
		return nil
	}
}

func opAssertIndex(exists bool) func(*testRun, context.Context, *fields) error {
	return func(tr *testRun, ctx context.Context, a *fields) error {
		db, coll, index := a.reqStr("databaseName"), a.reqStr("collectionName"), a.reqStr("indexName")
		if err := a.ready(); err != nil {
			return err
		}
		specs, err := tr.internal.Database(db).Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			return fmt.Errorf("listIndexes: %w", err)
		}
		got := false
		for _, s := range specs {
			got = got || s.Name == index
		}
		if got != exists {
			return fmt.Errorf("index %s on %s.%s: expected exists=%v, got %v", index, db, coll, exists, got)
		}
		return nil
	}
}
