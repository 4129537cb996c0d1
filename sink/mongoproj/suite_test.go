package mongoproj_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// receiver observes the target server through command monitoring: every
// update command on the target collection that the server acknowledged is
// one delivery, rebuilt from the command the sink sent.
type receiver struct {
	t      *testing.T
	target *mongo.Collection

	mu      sync.Mutex
	started map[int64]bson.Raw
	got     []sinktest.Delivery
	fail    map[string]sinktest.Fault
}

// collName returns a collection name unique to the test.
func collName(t *testing.T) string {
	n := "p_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(n) > 60 {
		n = n[:60]
	}
	return n
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{t: t, started: map[int64]bson.Raw{}, fail: map[string]sinktest.Fault{}}
	uri, _ := emutest.URI(t)
	name := collName(t)
	mon := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName != "update" {
				return
			}
			if c, ok := e.Command.Lookup("update").StringValueOK(); !ok || c != name {
				return
			}
			r.mu.Lock()
			r.started[e.RequestID] = append(bson.Raw(nil), e.Command...)
			r.mu.Unlock()
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			cmd, ok := r.started[e.RequestID]
			if !ok {
				return
			}
			delete(r.started, e.RequestID)
			ds, err := deliveriesOf(cmd)
			if err != nil {
				t.Errorf("receiver: %v", err)
				return
			}
			// An ordered update stops at its first write error: the
			// statements before it were applied, the rest were not.
			if we, err := e.Reply.LookupErr("writeErrors"); err == nil {
				var errs []struct {
					Index int `bson:"index"`
				}
				if err := we.Unmarshal(&errs); err != nil || len(errs) == 0 {
					t.Errorf("receiver: writeErrors %s: %v", we, err)
					return
				}
				ds = ds[:min(errs[0].Index, len(ds))]
			}
			r.got = append(r.got, ds...)
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			r.mu.Lock()
			delete(r.started, e.RequestID)
			r.mu.Unlock()
		},
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	r.target = client.Database("mongoproj_test").Collection(name)
	_ = r.target.Drop(context.Background())
	return r
}

// deliveriesOf rebuilds the deliveries from an update command the sink
// sent, one per statement: updates[i].u[0].$replaceWith is the guarded
// ($cond.then) or unguarded $mergeObjects of the literal document and the
// stamp.
func deliveriesOf(cmd bson.Raw) ([]sinktest.Delivery, error) {
	var c struct {
		Updates []struct {
			U []bson.D `bson:"u"`
		} `bson:"updates"`
	}
	if err := bson.Unmarshal(cmd, &c); err != nil {
		return nil, err
	}
	var out []sinktest.Delivery
	for _, u := range c.Updates {
		if len(u.U) != 1 {
			return nil, fmt.Errorf("update command %s: want one pipeline stage per statement", cmd)
		}
		d, err := deliveryOf(u.U[0])
		if err != nil {
			return nil, fmt.Errorf("update command %s: %w", cmd, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// deliveryOf rebuilds the delivery of one update statement's pipeline stage.
func deliveryOf(stage bson.D) (sinktest.Delivery, error) {
	repl, _ := lookupD(stage, "$replaceWith").(bson.D)
	if cond, ok := lookupD(repl, "$cond").(bson.D); ok {
		repl, _ = lookupD(cond, "then").(bson.D)
	}
	merge, _ := lookupD(repl, "$mergeObjects").(bson.A)
	if len(merge) != 2 {
		return sinktest.Delivery{}, errors.New("no $mergeObjects of a document and its stamp")
	}
	doc, _ := lookupD(merge[0].(bson.D), "$literal").(bson.D)
	st, _ := lookupD(merge[1].(bson.D), mongoproj.Field).(bson.D)
	lit := func(v any) any {
		if d, ok := v.(bson.D); ok {
			return lookupD(d, "$literal")
		}
		return v
	}
	id, _ := lookupD(st, "id").(string)
	epoch, _ := lookupD(st, "epoch").(int64)
	body, err := bson.MarshalExtJSON(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: lit(lookupD(st, "tok"))}}},
		{Key: "operationType", Value: lit(lookupD(st, "op"))},
		{Key: "fullDocument", Value: doc},
	}, true, false)
	if err != nil {
		return sinktest.Delivery{}, err
	}
	return sinktest.Delivery{EventID: id, IdempotencyKey: id, Epoch: epoch, Body: body}, nil
}

func lookupD(d bson.D, key string) any {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

func (r *receiver) Received() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sinktest.Delivery(nil), r.got...)
}

func (r *receiver) Fail(id string, f sinktest.Fault) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[id] = f
	return true
}

func (r *receiver) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.fail)
}

// fault fails events the way the server would: a write conflict
// (retryable) or a document validation failure (permanent).
func (r *receiver) fault(ev *ferry.Event) error {
	r.mu.Lock()
	f := r.fail[ev.ID()]
	r.mu.Unlock()
	switch f {
	case sinktest.FaultRetryable:
		return mongo.CommandError{Code: 112, Name: "WriteConflict", Message: "write conflict", Labels: []string{"TransientTransactionError"}}
	case sinktest.FaultPermanent:
		return mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 121, Message: "Document failed validation"}}}
	}
	return nil
}

func (r *receiver) NewSink(t *testing.T) sink.Sink {
	s, err := mongoproj.New(r.target, mongoproj.WithFault(r.fault))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Receiver) {
		r := newReceiver(t)
		return r.NewSink(t), r
	})
}
