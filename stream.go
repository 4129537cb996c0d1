package ferry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/resumetoken"
)

// position is where the stream (re)opens.
type position struct {
	resumeAfter bson.Raw
	startAfter  bson.Raw
	startAt     *bson.Timestamp
}

// open opens the change stream at pos.
func (r *runner) open(ctx context.Context, pos position) (*mongo.ChangeStream, error) {
	return r.c.open(ctx, pos, r.mode)
}

// Watch opens the consumer's change stream as Run does — its scope,
// pipeline, options and partition filter — from cluster time from
// (startAtOperationTime), for tools that re-read a window of the stream,
// such as reconciliation (package verify). It reads and writes no
// checkpoint and takes no lease; the caller closes the stream.
//
// With SplitLargeEvents, an event over 16 MB arrives as fragments (each
// with splitEvent {fragment, of}); its event id as Run delivers it is the
// first fragment's (EventID of its token).
func (c *Consumer) Watch(ctx context.Context, from bson.Timestamp) (*mongo.ChangeStream, error) {
	if err := c.checkSplit(ctx); err != nil {
		return nil, err
	}
	return c.open(ctx, position{startAt: &from})
}

// open opens the change stream at pos.
func (c *Consumer) open(ctx context.Context, pos position, mode ...openMode) (*mongo.ChangeStream, error) {
	cfg := &c.cfg
	var m openMode
	if len(mode) > 0 {
		m = mode[0]
	}
	opts := options.ChangeStream().SetMaxAwaitTime(cfg.maxAwait)
	if m.batchOne {
		opts.SetBatchSize(1)
	} else {
		opts.SetBatchSize(serverBatch(cfg.maxEvents))
	}
	switch cfg.fullDocument {
	case "updateLookup":
		opts.SetFullDocument(options.UpdateLookup)
	case "whenAvailable":
		opts.SetFullDocument(options.WhenAvailable)
	case "required":
		opts.SetFullDocument(options.Required)
	}
	switch cfg.fullDocBefore {
	case "whenAvailable":
		opts.SetFullDocumentBeforeChange(options.WhenAvailable)
	case "required":
		opts.SetFullDocumentBeforeChange(options.Required)
	}
	if cfg.showExpanded {
		opts.SetShowExpandedEvents(true)
	}
	switch {
	case pos.resumeAfter != nil:
		opts.SetResumeAfter(pos.resumeAfter)
	case pos.startAfter != nil:
		opts.SetStartAfter(pos.startAfter)
	case pos.startAt != nil:
		opts.SetStartAtOperationTime(pos.startAt)
	}
	pipeline := c.watchPipeline(m.drop)
	switch {
	case cfg.scope.DB == "":
		return c.client.Watch(ctx, pipeline, opts)
	case cfg.scope.Coll == "":
		return c.client.Database(cfg.scope.DB).Watch(ctx, pipeline, opts)
	}
	return c.client.Database(cfg.scope.DB).Collection(cfg.scope.Coll).Watch(ctx, pipeline, opts)
}

// findInvalidate returns the token of the invalidate event that ended the
// stream after the resume token after, when the user's pipeline filtered it
// out: MongoDB then closes the cursor without it, and the Go driver does not
// hand on the last batch's postBatchResumeToken, which is the invalidate's.
// It reads the scope again from after, keeping only invalidate events (the
// entry is in the oplog already), for at most a few seconds.
func (c *Consumer) findInvalidate(ctx context.Context, after bson.Raw) (bson.Raw, error) {
	if tok, err := resumetoken.Parse(after); err == nil && tok.FromInvalidate {
		return after, nil // the close came with events, after which the driver kept the batch's token: the invalidate's
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := options.ChangeStream().SetStartAfter(after).SetMaxAwaitTime(c.cfg.maxAwait)
	pipeline := []bson.D{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "invalidate"}}}}}
	var cs *mongo.ChangeStream
	var err error
	switch scope := c.cfg.scope; {
	case scope.DB == "":
		cs, err = c.client.Watch(ctx, pipeline, opts)
	case scope.Coll == "":
		cs, err = c.client.Database(scope.DB).Watch(ctx, pipeline, opts)
	default:
		cs, err = c.client.Database(scope.DB).Collection(scope.Coll).Watch(ctx, pipeline, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("ferry: the server closed the change stream without an invalidate event; finding it: %w", err)
	}
	defer cs.Close(context.WithoutCancel(ctx))
	if !cs.Next(ctx) {
		return nil, fmt.Errorf("ferry: the server closed the change stream without an invalidate event, and none follows its last position: %w", errors.Join(cs.Err(), ctx.Err()))
	}
	return append(bson.Raw(nil), cs.Current.Lookup("_id").Document()...), nil
}

// watchPipeline is the user pipeline plus, for partition p of n > 1, the
// partition filter (see partitionStage and doc.go).
func (c *Consumer) watchPipeline(drop ...int) []bson.D {
	out := append([]bson.D(nil), c.cfg.pipeline...)
	if c.cfg.partitions > 1 {
		out = append(out, c.partitionStage())
	}
	switch d := append(drop, dropNone)[0]; d {
	case dropImages:
		out = append(out, bson.D{{Key: "$unset", Value: bson.A{"fullDocument", "fullDocumentBeforeChange"}}})
	case dropAll:
		out = append(out, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}, {Key: "operationType", Value: 1},
			{Key: "clusterTime", Value: 1}, {Key: "ns", Value: 1}, {Key: "documentKey", Value: 1}, {Key: "splitEvent", Value: 1}}}})
	}
	if c.split.Load() == 1 {
		// It must be the last stage.
		out = append(out, bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}})
	}
	return out
}

// partitionStage is the partition filter (PartitionMatch on
// documentKey._id under the partitioning in effect), widened to let
// events without a documentKey (drop, rename, dropDatabase, invalidate)
// reach every partition: each partition must see the invalidate that ends
// its cursor. Only partition 0 hands such control events to the handler.
func (c *Consumer) partitionStage() bson.D {
	return bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "documentKey", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$expr", Value: c.partitionExpr("$documentKey._id")}},
	}}}}}
}

// checkSplit decides once whether the stream splits large events: when
// SplitLargeEvents is on (the default) and the server has
// $changeStreamSplitLargeEvent (MongoDB 7.0+, or 6.0.9+ of 6.0).
func (c *Consumer) checkSplit(ctx context.Context) error {
	if c.split.Load() != 0 {
		return nil
	}
	if c.cfg.noSplit {
		c.split.Store(2)
		return nil
	}
	var info struct {
		VersionArray []int32 `bson:"versionArray"`
	}
	if err := c.client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return fmt.Errorf("ferry: read the server's version (buildInfo): %w", err)
	}
	v := append(info.VersionArray, 0, 0, 0)
	if v[0] >= 7 || v[0] == 6 && v[1] == 0 && v[2] >= 9 {
		c.split.Store(1)
	} else {
		c.split.Store(2)
	}
	return nil
}

// serverBatch is the batch size the stream asks the server for (the
// aggregate's first batch and each getMore's): a quarter of the queue's
// event limit. The driver reads a whole batch's reply into one buffer
// before the fetcher takes any event of it, and the events alias it
// (aliasReplies), so a reply stays in memory while any of its events is
// in the queue; left to the server, a batch is up to 16 MiB whatever the
// queue's bounds. With a quarter of the queue per batch, the fetcher takes
// a whole batch while the lanes finish the ones before, so the next
// getMore is not held up by the queue, and a reply held while a lane
// finishes its last events is a small part of the queue. (Measured in one
// session, ferry bench alternating: stdout's peak RSS at 100k and 250k
// events 81-86 MiB with quarter batches against 87-91 with half batches,
// and its -rss-sweep ratio 1.07-1.15 against 1.23-1.27; Ferry CPU per
// event of the library row the same within the noise; eighth batches
// held no less and cost 0.5-1 µs more per event.)
func serverBatch(maxEvents int) int32 {
	return int32(max(1, min(maxEvents/4, math.MaxInt32)))
}
