package mongoproj

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/sink"
)

// apply writes one event: one update command (an upsert with an update
// pipeline), so the guard and the write are one atomic server-side step.
func (s *Sink) apply(ctx context.Context, ev *ferry.Event) error {
	w, err := s.update(ev)
	if err != nil || w == nil || s.cfg.noWrite {
		return err
	}
	_, err = s.target.UpdateOne(ctx, w.Filter, w.Update, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return classify(fmt.Errorf("mongoproj: %s of %s in %s: %w", ev.OperationType, shortID(ev), s.ns(), err))
	}
	return nil
}

// update builds the write of one event (nil: the event changes nothing).
func (s *Sink) update(ev *ferry.Event) (*mongo.UpdateOneModel, error) {
	if s.cfg.fault != nil {
		if err := s.cfg.fault(ev); err != nil {
			return nil, classify(err)
		}
	}
	var replacement bson.D
	switch ev.OperationType {
	case "insert", "replace", "update":
		if ev.FullDocument == nil {
			if ev.OperationType == "update" && hasNullFullDocument(ev) {
				return nil, nil // deleted before the lookup: its delete event follows
			}
			return nil, sink.Permanent(fmt.Errorf("mongoproj: %s event without fullDocument: open the change stream with "+
				"ferry.FullDocument(\"updateLookup\") (or post-images: \"required\" with "+
				"changeStreamPreAndPostImages enabled on the source collection)", ev.OperationType))
		}
		st, err := stamp(ev, false)
		if err != nil {
			return nil, err
		}
		replacement = guarded(ev, mergeStamp(ev, ev.FullDocument, st))
	case "delete":
		st, err := stamp(ev, true)
		if err != nil {
			return nil, err
		}
		id, whole, err := targetID(ev)
		if err != nil {
			return nil, err
		}
		if whole {
			st = append(st, bson.E{Key: "key", Value: true})
		}
		replacement = guarded(ev, bson.D{{Key: "_id", Value: bson.D{{Key: "$literal", Value: id}}}, {Key: Field, Value: st}})
	case "backfill":
		if ev.FullDocument == nil {
			return nil, sink.Permanent(errors.New("mongoproj: backfill event without a document"))
		}
		replacement = mergeStamp(ev, ev.FullDocument, backfillStamp(ev))
		if !ev.ScanStarted.IsZero() {
			replacement = scanGuarded(ev, replacement)
		}
	default:
		return nil, nil // drop, rename, invalidate, DDL: no document to project
	}
	id, _, err := targetID(ev)
	if err != nil {
		return nil, err
	}
	return mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: id}}).
		SetUpdate(bson.A{bson.D{{Key: "$replaceWith", Value: replacement}}}).SetUpsert(true), nil
}

// writeBatch applies a batch of more than one event with one ordered bulk
// write: one round trip, each write still one guarded server-side step.
// An event whose write cannot be built fails alone (and the later events
// of its document are not attempted, sink.Submit). If a write fails, the
// server stops there: the events before it are applied, it fails with its
// error's class, and the later ones were not attempted (retryable). Any
// other failure leaves every event of the batch retryable: replaying an
// applied write is a no-op.
func (s *Sink) writeBatch(ctx context.Context, batch []*ferry.Event) error {
	be := sink.NewBatchError(len(batch))
	var models []mongo.WriteModel
	var at []int // batch index of each model
	sink.Submit(ctx, batch, be, func(i int, ev *ferry.Event) error {
		w, err := s.update(ev)
		if err == nil && w != nil {
			models = append(models, w)
			at = append(at, i)
		}
		return err
	})
	if len(models) == 0 || s.cfg.noWrite {
		return be.Err()
	}
	_, err := s.target.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
	if err == nil {
		return be.Err()
	}
	fail := func(m int, err error) {
		ev := batch[at[m]]
		be.Set(at[m], fmt.Errorf("mongoproj: %s of %s in %s: %w", ev.OperationType, shortID(ev), s.ns(), err))
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && len(bwe.WriteErrors) > 0 && bwe.WriteConcernError == nil &&
		bwe.WriteErrors[0].Index >= 0 && bwe.WriteErrors[0].Index < len(models) {
		// Ordered: the writes before the first error applied, the later
		// ones were not attempted.
		k := bwe.WriteErrors[0].Index
		fail(k, classify(err))
		for m := k + 1; m < len(models); m++ {
			fail(m, sink.Retryable(fmt.Errorf("%w: an earlier write of the batch failed: %w", sink.ErrNotAttempted, err)))
		}
		return be.Err()
	}
	for m := range models {
		fail(m, classify(err))
	}
	return be.Err()
}

// guarded returns the expression that evaluates to next when the stored
// document is older than ev, else to the stored document unchanged. Older
// means: no stamp's clusterTime (a document the sink did not write, a
// backfill, or the upsert's empty seed), an earlier clusterTime, or the
// same clusterTime and a smaller resume token.
func guarded(ev *ferry.Event, next any) bson.D {
	tok := tokenData(ev)
	older := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$type", Value: "$" + Field + ".ct"}}, "missing"}}},
		bson.D{{Key: "$lt", Value: bson.A{"$" + Field + ".ct", ev.ClusterTime}}},
		bson.D{{Key: "$and", Value: bson.A{
			bson.D{{Key: "$eq", Value: bson.A{"$" + Field + ".ct", ev.ClusterTime}}},
			bson.D{{Key: "$lt", Value: bson.A{"$" + Field + ".tok", bson.D{{Key: "$literal", Value: tok}}}}},
		}}},
	}}}
	return bson.D{{Key: "$cond", Value: bson.D{
		{Key: "if", Value: older},
		{Key: "then", Value: next},
		{Key: "else", Value: "$$ROOT"},
	}}}
}

// scanGuarded returns the expression that keeps the stored document when
// a streamed event applied since the concurrent scan began wrote it (its
// stamp has a clusterTime at or after the scan's marker and was written at
// or after the scan's start): that change is newer than the scanned copy
// may be. Anything else — no stamp, an older one, a stamp the projection
// held before the scan (for instance one from before a restore of the
// source, with a later clusterTime) — is replaced, as a backfill does.
func scanGuarded(ev *ferry.Event, next any) bson.D {
	streamedSince := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$ne", Value: bson.A{bson.D{{Key: "$type", Value: "$" + Field + ".ct"}}, "missing"}}},
		bson.D{{Key: "$gte", Value: bson.A{"$" + Field + ".ct", ev.ScanMarker}}},
		bson.D{{Key: "$gte", Value: bson.A{"$" + Field + ".at", ev.ScanStarted}}},
	}}}
	return bson.D{{Key: "$cond", Value: bson.D{
		{Key: "if", Value: streamedSince},
		{Key: "then", Value: "$$ROOT"},
		{Key: "else", Value: next},
	}}}
}

// mergeStamp is the expression for doc (taken literally) with the stamp as
// its Field, and, when ev's target _id is its whole documentKey (a sharded
// collection), that documentKey as _id and key: true in the stamp.
func mergeStamp(ev *ferry.Event, doc bson.Raw, st bson.D) bson.D {
	parts := bson.A{bson.D{{Key: "$literal", Value: doc}}}
	if id, whole, err := targetID(ev); err == nil && whole {
		parts = append(parts, bson.D{{Key: "_id", Value: bson.D{{Key: "$literal", Value: id}}}})
		st = append(st, bson.E{Key: "key", Value: true})
	}
	return bson.D{{Key: "$mergeObjects", Value: append(parts, bson.D{{Key: Field, Value: st}})}}
}

// stamp is the expression of the hidden field for a streamed event.
func stamp(ev *ferry.Event, deleted bool) (bson.D, error) {
	tok := tokenData(ev)
	if tok == "" {
		return nil, sink.Permanent(fmt.Errorf("mongoproj: %s event %s has no resume token _data string to order it by", ev.OperationType, shortID(ev)))
	}
	if ev.ClusterTime.IsZero() {
		return nil, sink.Permanent(fmt.Errorf("mongoproj: %s event %s has no clusterTime to order it by", ev.OperationType, shortID(ev)))
	}
	st := bson.D{
		{Key: "ct", Value: ev.ClusterTime},
		{Key: "tok", Value: bson.D{{Key: "$literal", Value: tok}}},
		{Key: "op", Value: bson.D{{Key: "$literal", Value: ev.OperationType}}},
		{Key: "id", Value: ev.ID()},
		{Key: "epoch", Value: ev.Epoch},
		{Key: "at", Value: "$$NOW"},
	}
	if deleted {
		st = append(st, bson.E{Key: "del", Value: true})
	}
	return st, nil
}

// backfillStamp carries no clusterTime, so any streamed event supersedes
// it.
func backfillStamp(ev *ferry.Event) bson.D {
	return bson.D{
		{Key: "op", Value: "backfill"},
		{Key: "id", Value: ev.ID()},
		{Key: "epoch", Value: ev.Epoch},
		{Key: "at", Value: "$$NOW"},
		{Key: "bf", Value: true},
	}
}

// targetID is the _id of ev's document in the target: the whole
// documentKey, as a document, when it has more than _id (the shard key's
// fields on a sharded collection, where _id is unique only per shard; whole
// is then true), else its _id.
func targetID(ev *ferry.Event) (id bson.RawValue, whole bool, err error) {
	if ev.DocumentKey == nil {
		return bson.RawValue{}, false, sink.Permanent(fmt.Errorf("mongoproj: %s event %s has no documentKey", ev.OperationType, shortID(ev)))
	}
	id, whole, err = TargetID(ev.DocumentKey)
	if err != nil {
		return bson.RawValue{}, false, sink.Permanent(fmt.Errorf("mongoproj: %s event %s: %w", ev.OperationType, shortID(ev), err))
	}
	return id, whole, nil
}

// TargetID returns the _id in the target of the document whose
// documentKey is key (see "Keys"): its _id when key is {_id}, else the
// whole key, as a document (whole is then true). A source document's key
// is ferry.DocumentKeyOf's.
func TargetID(key bson.Raw) (id bson.RawValue, whole bool, err error) {
	elems, err := key.Elements()
	if err != nil {
		return bson.RawValue{}, false, fmt.Errorf("documentKey: %w", err)
	}
	if _, err := key.LookupErr("_id"); err != nil {
		return bson.RawValue{}, false, errors.New("documentKey has no _id")
	}
	if len(elems) == 1 {
		return elems[0].Value(), false, nil
	}
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: key}, true, nil
}

func tokenData(ev *ferry.Event) string {
	if ev.Token == nil {
		return ""
	}
	v, err := ev.Token.LookupErr("_data")
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}

// hasNullFullDocument reports whether the raw event says fullDocument: null
// (the stream asked for a lookup but the document was gone) rather than
// leaving the field out (the stream did not ask for it).
func hasNullFullDocument(ev *ferry.Event) bool {
	if ev.Raw == nil {
		return false
	}
	v, err := ev.Raw.LookupErr("fullDocument")
	return err == nil && v.Type == bson.TypeNull
}

func shortID(ev *ferry.Event) string {
	id := ev.ID()
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// permanentCodes are server errors retrying cannot fix: the document is
// rejected as it is.
var permanentCodes = map[int32]bool{
	mongoerr.CodeBadValue:                  true,
	mongoerr.CodeTypeMismatch:              true,
	mongoerr.CodeDollarPrefixedFieldName:   true,
	mongoerr.CodeImmutableField:            true, // _id differs from the documentKey
	mongoerr.CodeDocumentValidationFailure: true,
	mongoerr.CodeBSONObjectTooLarge:        true,
	17419:                                  true, // document too large after the update
	mongoerr.CodeUnauthorized:              true,
}

// classify marks server rejections of the document permanent; everything
// else (network, timeouts, write conflicts, TransientTransactionError,
// duplicate key races between concurrent upserts, not primary) stays
// retryable.
func classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sink.Retryable(err)
	}
	var le mongo.LabeledError
	if errors.As(err, &le) && (le.HasErrorLabel("TransientTransactionError") || le.HasErrorLabel("RetryableWriteError")) {
		return sink.Retryable(err)
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for code := range permanentCodes {
			if se.HasErrorCode(int(code)) {
				return sink.Permanent(err)
			}
		}
	}
	return sink.Retryable(err)
}
