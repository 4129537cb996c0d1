package unified

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Database and client operations.

func init() {
	register(kindDatabase, "runCommand", opRunCommand)
	register(kindDatabase, "createCollection", opCreateCollection)
	register(kindDatabase, "dropCollection", opDropCollection)
	register(kindDatabase, "listCollections", opListCollections)
	register(kindDatabase, "listCollectionNames", opListCollectionNames)
	register(kindDatabase, "aggregate", opDBAggregate)
	register(kindClient, "close", opCloseClient)
	register(kindClient, "listDatabases", opListDatabases)
	register(kindClient, "listDatabaseNames", opListDatabaseNames)
}

func opRunCommand(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	cmd := a.reqDoc("command")
	a.str("commandName") // informational: the command document names the command
	o := options.RunCmd()
	if d := a.doc("readPreference"); d != nil {
		rp, err := parseReadPreference(d, "runCommand readPreference")
		if err != nil {
			return opResult{}, asRunnerError(err)
		}
		o.SetReadPreference(rp)
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	reply, err := e.db.RunCommand(ctx, cmd, o).Raw()
	if err != nil {
		return opResult{}, err
	}
	return docResult(reply), nil
}

// opCreateCollection creates a collection, or a view when viewOn is given.
func opCreateCollection(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	name := a.reqStr("collection")
	viewOn := a.str("viewOn")
	var pipeline []bson.Raw
	if a.has("pipeline") {
		pipeline = pipelineArg(a, "pipeline")
	}
	o := options.CreateCollection()
	if d := a.doc("changeStreamPreAndPostImages"); d != nil {
		o.SetChangeStreamPreAndPostImages(d)
	}
	if b := a.boolPtr("capped"); b != nil {
		o.SetCapped(*b)
	}
	if n := a.int64Ptr("size"); n != nil {
		o.SetSizeInBytes(*n)
	}
	if n := a.int64Ptr("max"); n != nil {
		o.SetMaxDocuments(*n)
	}
	if d := a.doc("validator"); d != nil {
		o.SetValidator(d)
	}
	if s := a.str("validationLevel"); s != "" {
		o.SetValidationLevel(s)
	}
	if s := a.str("validationAction"); s != "" {
		o.SetValidationAction(s)
	}
	if n := a.int64Ptr("expireAfterSeconds"); n != nil {
		o.SetExpireAfterSeconds(*n)
	}
	if d := a.doc("clusteredIndex"); d != nil {
		o.SetClusteredIndex(d)
	}
	if d := a.doc("storageEngine"); d != nil {
		o.SetStorageEngine(d)
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if viewOn != "" {
		if pipeline == nil {
			pipeline = []bson.Raw{}
		}
		return opResult{}, e.db.CreateView(ctx, name, viewOn, pipeline)
	}
	if pipeline != nil {
		return opResult{}, rerr("unified runner: createCollection: pipeline without viewOn")
	}
	return opResult{}, e.db.CreateCollection(ctx, name, o)
}

func opDropCollection(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	name := a.reqStr("collection")
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.db.Collection(name).Drop(ctx)
}

func listCollectionsArgs(a *fields) (bson.Raw, *options.ListCollectionsOptionsBuilder) {
	filter := filterArg(a, false)
	o := options.ListCollections()
	if n := a.int64Ptr("batchSize"); n != nil {
		o.SetBatchSize(int32(*n))
	}
	if b := a.boolPtr("nameOnly"); b != nil {
		o.SetNameOnly(*b)
	}
	if b := a.boolPtr("authorizedCollections"); b != nil {
		o.SetAuthorizedCollections(*b)
	}
	return filter, o
}

func opListCollections(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter, o := listCollectionsArgs(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.db.ListCollections(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return drain(ctx, cur)
}

func opListCollectionNames(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter, o := listCollectionsArgs(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	names, err := e.db.ListCollectionNames(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return valueResult(names)
}

func opDBAggregate(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	pipeline := pipelineArg(a, "pipeline")
	o := aggregateOptions(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.db.Aggregate(ctx, pipeline, o)
	if err != nil {
		return opResult{}, err
	}
	return drain(ctx, cur)
}

func opCloseClient(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if !e.client.closed {
		e.client.closed = true
		_ = e.client.client.Disconnect(ctx)
	}
	return opResult{}, nil
}

func listDatabasesArgs(a *fields) (bson.Raw, *options.ListDatabasesOptionsBuilder) {
	filter := filterArg(a, false)
	o := options.ListDatabases()
	if b := a.boolPtr("nameOnly"); b != nil {
		o.SetNameOnly(*b)
	}
	if b := a.boolPtr("authorizedDatabases"); b != nil {
		o.SetAuthorizedDatabases(*b)
	}
	return filter, o
}

func opListDatabases(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter, o := listDatabasesArgs(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	res, err := e.client.client.ListDatabases(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	var docs []bson.Raw
	for _, d := range res.Databases {
		raw, err := bson.Marshal(bson.D{{Key: "name", Value: d.Name}, {Key: "sizeOnDisk", Value: d.SizeOnDisk}, {Key: "empty", Value: d.Empty}})
		if err != nil {
			return opResult{}, rerr("unified runner: converting result: %v", err)
		}
		docs = append(docs, raw)
	}
	return docsResult(docs)
}

func opListDatabaseNames(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter, o := listDatabasesArgs(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	names, err := e.client.client.ListDatabaseNames(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return valueResult(names)
}
