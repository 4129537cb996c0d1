package main

import (
	"context"
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

// watchProjection starts recording; the stream is open when it returns.
func watchProjection(ctx context.Context, target *mongo.Collection) (*projWatch, error) {
	cs, err := target.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.Required))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &projWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cs.Close(context.Background())
		for cs.Next(ctx) {
			d, ok := projDelivery(cs.Current)
			if !ok {
				continue
			}
			d.At = time.Now()
			w.mu.Lock()
			w.deliveries = append(w.deliveries, d)
			w.mu.Unlock()
		}
		if err := cs.Err(); err != nil && ctx.Err() == nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
		}
	}()
	return w, nil
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
	id, _ := doc.Lookup("_id").StringValueOK()
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
