package unified

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Change streams and cursors: creating them and iterating them.

func init() {
	register(kindClient, "createChangeStream", opCreateChangeStream)
	register(kindDatabase, "createChangeStream", opCreateChangeStream)
	register(kindCollection, "createChangeStream", opCreateChangeStream)
	for _, kind := range []string{kindChangeStream, kindCursor} {
		register(kind, "iterateUntilDocumentOrError", opIterateUntilDocumentOrError)
		register(kind, "iterateOnce", opIterateOnce)
		register(kind, "close", opCloseCursor)
	}
}

// changeStreamOptions reads the arguments of createChangeStream other than
// pipeline and session.
func changeStreamOptions(a *fields) *options.ChangeStreamOptionsBuilder {
	o := options.ChangeStream()
	if n := a.int64Ptr("batchSize"); n != nil {
		o.SetBatchSize(int32(*n))
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if s := a.str("fullDocument"); s != "" {
		o.SetFullDocument(options.FullDocument(s))
	}
	if s := a.str("fullDocumentBeforeChange"); s != "" {
		o.SetFullDocumentBeforeChange(options.FullDocument(s))
	}
	if n := a.int64Ptr("maxAwaitTimeMS"); n != nil {
		o.SetMaxAwaitTime(time.Duration(*n) * time.Millisecond)
	}
	if d := a.doc("resumeAfter"); d != nil {
		o.SetResumeAfter(d)
	}
	if d := a.doc("startAfter"); d != nil {
		o.SetStartAfter(d)
	}
	if v, ok := a.value("startAtOperationTime"); ok {
		t, i, ok := v.TimestampOK()
		if !ok {
			a.fail("startAtOperationTime must be a timestamp, not %s", v.Type)
		} else {
			o.SetStartAtOperationTime(&bson.Timestamp{T: t, I: i})
		}
	}
	if b := a.boolPtr("showExpandedEvents"); b != nil {
		o.SetShowExpandedEvents(*b)
	}
	return o
}

// opCreateChangeStream opens a change stream on a client, database or
// collection. The driver runs the aggregate at once, as the format requires.
func opCreateChangeStream(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	pipeline := pipelineArg(a, "pipeline")
	if !a.has("pipeline") {
		a.fail("pipeline is required")
	}
	o := changeStreamOptions(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	var cs *mongo.ChangeStream
	var err error
	switch e.kind {
	case kindClient:
		cs, err = e.client.client.Watch(ctx, pipeline, o)
	case kindDatabase:
		cs, err = e.db.Watch(ctx, pipeline, o)
	default:
		cs, err = e.coll.Watch(ctx, pipeline, o)
	}
	if err != nil {
		return opResult{}, err
	}
	return opResult{ent: &entity{kind: kindChangeStream, stream: cs}}, nil
}

// opIterateUntilDocumentOrError waits for the next document or error,
// bounded by the iteration timeout (the operation's context).
func opIterateUntilDocumentOrError(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if e.kind == kindChangeStream {
		if e.stream.Next(ctx) {
			return docResult(append(bson.Raw(nil), e.stream.Current...)), nil
		}
		if err := e.stream.Err(); err != nil {
			return opResult{}, err
		}
		return opResult{}, fmt.Errorf("change stream closed without a document (cursor id %d)", e.stream.ID())
	}
	if e.cursor.Next(ctx) {
		return docResult(append(bson.Raw(nil), e.cursor.Current...)), nil
	}
	if err := e.cursor.Err(); err != nil {
		return opResult{}, err
	}
	return opResult{}, fmt.Errorf("cursor exhausted without a document")
}

// opIterateOnce performs one iteration: at most one getMore.
func opIterateOnce(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if e.kind == kindChangeStream {
		if e.stream.TryNext(ctx) {
			return docResult(append(bson.Raw(nil), e.stream.Current...)), nil
		}
		return opResult{}, e.stream.Err()
	}
	if e.cursor.TryNext(ctx) {
		return docResult(append(bson.Raw(nil), e.cursor.Current...)), nil
	}
	return opResult{}, e.cursor.Err()
}

// opCloseCursor closes a change stream or cursor; errors are suppressed as
// the format requires.
func opCloseCursor(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if e.kind == kindChangeStream {
		_ = e.stream.Close(ctx)
	} else {
		_ = e.cursor.Close(ctx)
	}
	return opResult{}, nil
}
