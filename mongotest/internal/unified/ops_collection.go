package unified

import (
	"context"
	"errors"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// Collection operations (CRUD and index management).

func init() {
	register(kindCollection, "insertOne", opInsertOne)
	register(kindCollection, "insertMany", opInsertMany)
	register(kindCollection, "updateOne", opUpdate(false))
	register(kindCollection, "updateMany", opUpdate(true))
	register(kindCollection, "replaceOne", opReplaceOne)
	register(kindCollection, "deleteOne", opDelete(false))
	register(kindCollection, "deleteMany", opDelete(true))
	register(kindCollection, "find", opFind)
	register(kindCollection, "createFindCursor", opCreateFindCursor)
	register(kindCollection, "aggregate", opCollAggregate)
	register(kindCollection, "countDocuments", opCountDocuments)
	register(kindCollection, "estimatedDocumentCount", opEstimatedCount)
	register(kindCollection, "distinct", opDistinct)
	register(kindCollection, "findOneAndUpdate", opFindOneAndModify("update"))
	register(kindCollection, "findOneAndReplace", opFindOneAndModify("replace"))
	register(kindCollection, "findOneAndDelete", opFindOneAndModify("delete"))
	register(kindCollection, "createIndex", opCreateIndex)
	register(kindCollection, "dropIndex", opDropIndex)
	register(kindCollection, "dropIndexes", opDropIndexes)
	register(kindCollection, "listIndexes", opListIndexes)
	register(kindCollection, "rename", opRename)
	register(kindCollection, "drop", opCollDrop)
}

// rawArg returns an argument as a raw value (for comment, let and the
// like), or nil when absent, so absent options stay unset.
func rawArg(a *fields, key string) any {
	v, ok := a.value(key)
	if !ok {
		return nil
	}
	return v
}

// pipelineArg returns an array of stages.
func pipelineArg(a *fields, key string) []bson.Raw {
	d := a.docs(key)
	if d == nil {
		d = []bson.Raw{}
	}
	return d
}

// updateArg returns an update document or an update pipeline.
func updateArg(a *fields, key string) any {
	v, ok := a.value(key)
	if !ok {
		a.fail("%s is required", key)
		return nil
	}
	if d, ok := v.DocumentOK(); ok {
		return d
	}
	if v.Type == bson.TypeArray {
		return pipelineArg(a, key)
	}
	a.fail("%s must be a document or a pipeline, not %s", key, v.Type)
	return nil
}

// hintArg returns a hint (an index name or a key pattern), or nil.
func hintArg(a *fields) any {
	v, ok := a.value("hint")
	if !ok {
		return nil
	}
	if s, ok := v.StringValueOK(); ok {
		return s
	}
	if d, ok := v.DocumentOK(); ok {
		return d
	}
	a.fail("hint must be a string or a document")
	return nil
}

func filterArg(a *fields, required bool) bson.Raw {
	if required {
		return a.reqDoc("filter")
	}
	if d := a.doc("filter"); d != nil {
		return d
	}
	return bson.Raw(bsonEmptyDoc)
}

// bsonEmptyDoc is the encoding of {}.
var bsonEmptyDoc = []byte{5, 0, 0, 0, 0}

func opInsertOne(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	doc := a.reqDoc("document")
	o := options.InsertOne()
	var in internalArgs
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
		in.bypassFalse(*b)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalInsertOneOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	res, err := e.coll.InsertOne(ctx, doc, o)
	if err != nil {
		return opResult{}, err
	}
	return valueResult(bson.D{{Key: "insertedId", Value: res.InsertedID}})
}

func opInsertMany(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	docs := a.docs("documents")
	if !a.has("documents") {
		a.fail("documents is required")
	}
	o := options.InsertMany()
	var in internalArgs
	if b := a.boolPtr("ordered"); b != nil {
		o.SetOrdered(*b)
	}
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
		in.bypassFalse(*b)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalInsertManyOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	docsIn := make([]any, len(docs))
	for i, d := range docs {
		docsIn[i] = d
	}
	res, err := e.coll.InsertMany(ctx, docsIn, o)
	if err != nil {
		if res != nil {
			// A failed insertMany reports a partial BulkWriteResult.
			r, rerr := bulkWriteResult(&mongo.BulkWriteResult{InsertedCount: int64(len(res.InsertedIDs))})
			if rerr != nil {
				return opResult{}, rerr
			}
			return r, err
		}
		return opResult{}, err
	}
	ids := bson.D{}
	for i, id := range res.InsertedIDs {
		ids = append(ids, bson.E{Key: strconv.Itoa(i), Value: id})
	}
	return valueResult(bson.D{{Key: "insertedIds", Value: ids}})
}

func updateResult(res *mongo.UpdateResult) (opResult, error) {
	d := bson.D{
		{Key: "matchedCount", Value: res.MatchedCount},
		{Key: "modifiedCount", Value: res.ModifiedCount},
		{Key: "upsertedCount", Value: res.UpsertedCount},
	}
	if res.UpsertedID != nil {
		d = append(d, bson.E{Key: "upsertedId", Value: res.UpsertedID})
	}
	return valueResult(d)
}

func opUpdate(many bool) handler {
	return func(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
		filter := filterArg(a, true)
		update := updateArg(a, "update")
		upsert := a.boolPtr("upsert")
		bypass := a.boolPtr("bypassDocumentValidation")
		comment, let, hint := rawArg(a, "comment"), letArg(a), hintArg(a)
		collation := collationArg(a)
		var in internalArgs
		if bypass != nil {
			in.bypassFalse(*bypass)
		}
		in.read(a)
		var arrayFilters []any
		for _, f := range a.docs("arrayFilters") {
			arrayFilters = append(arrayFilters, f)
		}
		var sort any
		if !many {
			if s := a.doc("sort"); s != nil {
				sort = s
			}
		}
		if err := a.ready(); err != nil {
			return opResult{}, err
		}
		var res *mongo.UpdateResult
		var err error
		if many {
			o := options.UpdateMany()
			if upsert != nil {
				o.SetUpsert(*upsert)
			}
			if bypass != nil {
				o.SetBypassDocumentValidation(*bypass)
			}
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if arrayFilters != nil {
				o.SetArrayFilters(arrayFilters)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalUpdateManyOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			res, err = e.coll.UpdateMany(ctx, filter, update, o)
		} else {
			o := options.UpdateOne()
			if upsert != nil {
				o.SetUpsert(*upsert)
			}
			if bypass != nil {
				o.SetBypassDocumentValidation(*bypass)
			}
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if arrayFilters != nil {
				o.SetArrayFilters(arrayFilters)
			}
			if sort != nil {
				o.SetSort(sort)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalUpdateOneOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			res, err = e.coll.UpdateOne(ctx, filter, update, o)
		}
		if err != nil {
			return opResult{}, err
		}
		return updateResult(res)
	}
}

func opReplaceOne(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, true)
	repl := a.reqDoc("replacement")
	o := options.Replace()
	var in internalArgs
	if b := a.boolPtr("upsert"); b != nil {
		o.SetUpsert(*b)
	}
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
		in.bypassFalse(*b)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	in.read(a)
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if l := letArg(a); l != nil {
		o.SetLet(l)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if s := a.doc("sort"); s != nil {
		o.SetSort(s)
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalReplaceOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	res, err := e.coll.ReplaceOne(ctx, filter, repl, o)
	if err != nil {
		return opResult{}, err
	}
	return updateResult(res)
}

func opDelete(many bool) handler {
	return func(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
		filter := filterArg(a, true)
		comment, let, hint := rawArg(a, "comment"), letArg(a), hintArg(a)
		collation := collationArg(a)
		var in internalArgs
		in.read(a)
		if err := a.ready(); err != nil {
			return opResult{}, err
		}
		var res *mongo.DeleteResult
		var err error
		if many {
			o := options.DeleteMany()
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalDeleteManyOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			res, err = e.coll.DeleteMany(ctx, filter, o)
		} else {
			o := options.DeleteOne()
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalDeleteOneOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			res, err = e.coll.DeleteOne(ctx, filter, o)
		}
		if err != nil {
			return opResult{}, err
		}
		return valueResult(bson.D{{Key: "deletedCount", Value: res.DeletedCount}})
	}
}

// findOptions reads the arguments of find and createFindCursor.
func findOptions(a *fields) *options.FindOptionsBuilder {
	o := options.Find()
	if s := a.doc("sort"); s != nil {
		o.SetSort(s)
	}
	if p := a.doc("projection"); p != nil {
		o.SetProjection(p)
	}
	if n := a.int64Ptr("skip"); n != nil {
		o.SetSkip(*n)
	}
	if n := a.int64Ptr("limit"); n != nil {
		o.SetLimit(*n)
	}
	if n := a.int64Ptr("batchSize"); n != nil {
		o.SetBatchSize(int32(*n))
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if l := letArg(a); l != nil {
		o.SetLet(l)
	}
	if b := a.boolPtr("allowDiskUse"); b != nil {
		o.SetAllowDiskUse(*b)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	if b := a.boolPtr("rawData"); b != nil && a.err == nil {
		if err := xoptions.SetInternalFindOptions(o, "rawData", *b); err != nil {
			a.fail("rawData: %v", err)
		}
	}
	return o
}

func opFind(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, false)
	o := findOptions(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.coll.Find(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return drain(ctx, cur)
}

func opCreateFindCursor(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, false)
	o := findOptions(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.coll.Find(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return opResult{ent: &entity{kind: kindCursor, cursor: cur}}, nil
}

// drain reads a whole cursor into an array result.
func drain(ctx context.Context, cur *mongo.Cursor) (opResult, error) {
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var docs []bson.Raw
	for cur.Next(ctx) {
		docs = append(docs, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		return opResult{}, err
	}
	return docsResult(docs)
}

func aggregateOptions(a *fields) *options.AggregateOptionsBuilder {
	o := options.Aggregate()
	if n := a.int64Ptr("batchSize"); n != nil {
		o.SetBatchSize(int32(*n))
	}
	if b := a.boolPtr("allowDiskUse"); b != nil {
		o.SetAllowDiskUse(*b)
	}
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if l := letArg(a); l != nil {
		o.SetLet(l)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	var in internalArgs
	if b, ok := a.value("bypassDocumentValidation"); ok && b.Type == bson.TypeBoolean {
		in.bypassFalse(b.Boolean())
	}
	in.read(a)
	if len(in.fields) > 0 {
		// The driver takes extra aggregate command fields as Custom (its
		// internal addCommandFields is not one of aggregate's).
		custom := bson.M{}
		for _, f := range in.fields {
			custom[f.Key] = f.Value
		}
		o.SetCustom(custom)
		in.fields = nil
	}
	if a.err == nil {
		if err := in.apply(func(k string, v any) error { return xoptions.SetInternalAggregateOptions(o, k, v) }); err != nil {
			a.fail("%v", err)
		}
	}
	return o
}

func opCollAggregate(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	pipeline := pipelineArg(a, "pipeline")
	o := aggregateOptions(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.coll.Aggregate(ctx, pipeline, o)
	if err != nil {
		return opResult{}, err
	}
	return drain(ctx, cur)
}

func opCountDocuments(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, true)
	o := options.Count()
	if n := a.int64Ptr("skip"); n != nil {
		o.SetSkip(*n)
	}
	if n := a.int64Ptr("limit"); n != nil {
		o.SetLimit(*n)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	var in internalArgs
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalCountOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	n, err := e.coll.CountDocuments(ctx, filter, o)
	if err != nil {
		return opResult{}, err
	}
	return valueResult(n)
}

func opEstimatedCount(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	o := options.EstimatedDocumentCount()
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	var in internalArgs
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalEstimatedDocumentCountOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	n, err := e.coll.EstimatedDocumentCount(ctx, o)
	if err != nil {
		return opResult{}, err
	}
	return valueResult(n)
}

func opDistinct(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	field := a.reqStr("fieldName")
	filter := filterArg(a, true)
	o := options.Distinct()
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	var in internalArgs
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalDistinctOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	arr, err := e.coll.Distinct(ctx, field, filter, o).Raw()
	if err != nil {
		return opResult{}, err
	}
	return opResult{value: bson.RawValue{Type: bson.TypeArray, Value: arr}}, nil
}

func opFindOneAndModify(kind string) handler {
	return func(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
		filter := filterArg(a, true)
		var update any
		switch kind {
		case "update":
			update = updateArg(a, "update")
		case "replace":
			update = a.reqDoc("replacement")
		}
		after := false
		if rd := a.str("returnDocument"); rd != "" {
			switch rd {
			case "Before", "before":
			case "After", "after":
				after = true
			default:
				a.fail("returnDocument must be Before or After, not %q", rd)
			}
		}
		upsert := a.boolPtr("upsert")
		projection, sort := a.doc("projection"), a.doc("sort")
		comment, let, hint := rawArg(a, "comment"), letArg(a), hintArg(a)
		collation := collationArg(a)
		var bypass *bool
		if kind != "delete" {
			bypass = a.boolPtr("bypassDocumentValidation")
		}
		var in internalArgs
		if bypass != nil {
			in.bypassFalse(*bypass)
		}
		in.read(a)
		var arrayFilters []any
		if kind == "update" {
			for _, f := range a.docs("arrayFilters") {
				arrayFilters = append(arrayFilters, f)
			}
		}
		if err := a.ready(); err != nil {
			return opResult{}, err
		}
		rd := options.Before
		if after {
			rd = options.After
		}
		var sr *mongo.SingleResult
		switch kind {
		case "update":
			o := options.FindOneAndUpdate().SetReturnDocument(rd)
			if upsert != nil {
				o.SetUpsert(*upsert)
			}
			if projection != nil {
				o.SetProjection(projection)
			}
			if sort != nil {
				o.SetSort(sort)
			}
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if arrayFilters != nil {
				o.SetArrayFilters(arrayFilters)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if bypass != nil && *bypass {
				o.SetBypassDocumentValidation(true)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalFindOneAndUpdateOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			sr = e.coll.FindOneAndUpdate(ctx, filter, update, o)
		case "replace":
			o := options.FindOneAndReplace().SetReturnDocument(rd)
			if upsert != nil {
				o.SetUpsert(*upsert)
			}
			if projection != nil {
				o.SetProjection(projection)
			}
			if sort != nil {
				o.SetSort(sort)
			}
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if bypass != nil && *bypass {
				o.SetBypassDocumentValidation(true)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalFindOneAndReplaceOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			sr = e.coll.FindOneAndReplace(ctx, filter, update, o)
		default:
			o := options.FindOneAndDelete()
			if projection != nil {
				o.SetProjection(projection)
			}
			if sort != nil {
				o.SetSort(sort)
			}
			if comment != nil {
				o.SetComment(comment)
			}
			if let != nil {
				o.SetLet(let)
			}
			if hint != nil {
				o.SetHint(hint)
			}
			if collation != nil {
				o.SetCollation(collation)
			}
			if err := in.apply(func(k string, v any) error { return xoptions.SetInternalFindOneAndDeleteOptions(o, k, v) }); err != nil {
				return opResult{}, err
			}
			sr = e.coll.FindOneAndDelete(ctx, filter, o)
		}
		doc, err := sr.Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return opResult{value: bson.RawValue{Type: bson.TypeNull}}, nil
		}
		if err != nil {
			return opResult{}, err
		}
		return docResult(doc), nil
	}
}

func opCreateIndex(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	keys := a.reqDoc("keys")
	o := options.Index()
	if s := a.str("name"); s != "" {
		o.SetName(s)
	}
	if b := a.boolPtr("unique"); b != nil {
		o.SetUnique(*b)
	}
	if b := a.boolPtr("sparse"); b != nil {
		o.SetSparse(*b)
	}
	if n := a.int64Ptr("expireAfterSeconds"); n != nil {
		o.SetExpireAfterSeconds(int32(*n))
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	name, err := e.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys, Options: o})
	if err != nil {
		return opResult{}, err
	}
	return valueResult(name)
}

func opDropIndex(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	name := a.reqStr("name")
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.coll.Indexes().DropOne(ctx, name)
}

func opDropIndexes(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.coll.Indexes().DropAll(ctx)
}

func opListIndexes(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	o := options.ListIndexes()
	if n := a.int64Ptr("batchSize"); n != nil {
		o.SetBatchSize(int32(*n))
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	cur, err := e.coll.Indexes().List(ctx, o)
	if err != nil {
		return opResult{}, err
	}
	return drain(ctx, cur)
}

// opRename runs renameCollection on the admin database of the collection's
// client; the Go driver has no rename helper.
func opRename(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	to := a.reqStr("to")
	dropTarget := a.boolPtr("dropTarget")
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	db := e.coll.Database()
	cmd := bson.D{
		{Key: "renameCollection", Value: db.Name() + "." + e.coll.Name()},
		{Key: "to", Value: db.Name() + "." + to},
	}
	if dropTarget != nil {
		cmd = append(cmd, bson.E{Key: "dropTarget", Value: *dropTarget})
	}
	var reply bson.Raw
	if err := db.Client().Database("admin").RunCommand(ctx, cmd).Decode(&reply); err != nil {
		return opResult{}, err
	}
	return docResult(reply), nil
}

func opCollDrop(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.coll.Drop(ctx)
}
