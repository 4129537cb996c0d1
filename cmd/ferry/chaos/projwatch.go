package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/sink/mongoproj"
)

// projWatch records the mongodb sink's effects: every write to the
// projection, read from the projection collection's own change stream with
// post-images, becomes a delivery (the event id, operation, epoch and
// backfill mark from the sink's stamp, the version from the document).
// A replay the version guard turns into a no-op writes nothing, so each
// delivery here is an effect: the checker's duplicate effects are changes
// written twice.
type projWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	deliveries []delivery
	err        error
}

// projReopenFor is how long the projection's stream keeps reopening
// after an error before the error stands: a shard's primary stepping
// down (sharded runs) fails the stream, and the driver's one resume, for
// as long as it has no primary.
const projReopenFor = 30 * time.Second

// watchProjection starts recording; the stream is open when it returns.
// A failed stream is reopened after the last token it returned, for up
// to projReopenFor; an error that says the token is gone (the tiny oplog
// of a history-loss run) stands at once.
func watchProjection(ctx context.Context, target *mongo.Collection) (*projWatch, error) {
	opts := options.ChangeStream().SetFullDocument(options.Required)
	cs, err := target.Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &projWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var failing time.Time // since when the stream fails
		for {
			for cs.Next(ctx) {
				failing = time.Time{}
				d, ok := projDelivery(cs.Current)
				if !ok {
					continue
				}
				d.At = time.Now()
				w.mu.Lock()
				w.deliveries = append(w.deliveries, d)
				w.mu.Unlock()
			}
			err := cs.Err()
			if err == nil {
				err = errors.New("the change stream ended")
			}
			token := cs.ResumeToken()
			_ = cs.Close(context.Background())
			if ctx.Err() != nil {
				return
			}
			if failing.IsZero() {
				failing = time.Now()
			}
			for err != nil && !historyGone(err) && time.Since(failing) < projReopenFor {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if cs, err = target.Watch(ctx, mongo.Pipeline{}, opts.SetResumeAfter(token)); err == nil {
					break
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					w.mu.Lock()
					w.err = err
					w.mu.Unlock()
				}
				return
			}
		}
	}()
	return w, nil
}

// historyGone reports a change stream that cannot resume: its token is
// no longer in the oplog (286) or not in the stream (280).
func historyGone(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && (se.HasErrorCode(286) || se.HasErrorCode(280))
}

// projDelivery turns a change of the projection into a delivery; deletes
// (tombstone purges, sweeps) are not effects of source changes.
func projDelivery(ev bson.Raw) (delivery, bool) {
	switch op, _ := ev.Lookup("operationType").StringValueOK(); op {
	case "insert", "update", "replace":
	default:
		return delivery{}, false
	}
	doc, ok := ev.Lookup("fullDocument").DocumentOK()
	if !ok {
		return delivery{}, false
	}
	// The target _id is the source's, or on a collection sharded on other
	// fields the whole documentKey ({k, _id}: package mongoproj, "Keys").
	id, ok := doc.Lookup("_id").StringValueOK()
	if !ok {
		id, _ = doc.Lookup("_id", "_id").StringValueOK()
	}
	st, _ := doc.Lookup(mongoproj.Field).DocumentOK()
	d := delivery{Doc: id, V: version(doc.Lookup("v")), Code: 200}
	d.ID, _ = st.Lookup("id").StringValueOK()
	d.Op, _ = st.Lookup("op").StringValueOK()
	d.Epoch, _ = st.Lookup("epoch").AsInt64OK()
	if del, _ := st.Lookup("del").BooleanOK(); del {
		d.Op, d.V = "delete", -1
	}
	if bf, _ := st.Lookup("bf").BooleanOK(); bf {
		d.Op, d.Backfill = "backfill", true
	}
	return d, true
}

// snapshot returns the effects so far, in order, and the stream's error.
func (w *projWatch) snapshot() ([]delivery, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]delivery(nil), w.deliveries...), w.err
}

func (w *projWatch) stop() {
	w.cancel()
	<-w.done
}
