package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
)

// truth is the ground truth: every delete on the source, seen by a change
// stream of its own (not Ferry's), opened before the first write. Each
// delete's event id (ferry.EventID of its resume token) is the webhook-id
// Ferry delivers it with, which the receivers record as the effect's id.
type truth struct {
	mu   sync.Mutex
	ids  map[string]string // event id → the deleted document's _id
	err  error
	done chan struct{}
	stop context.CancelFunc
}

// watchDeletes opens the change stream and collects deletes until stop.
func (e *runEnv) watchDeletes(ctx context.Context) (*truth, error) {
	pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "delete"}}}}}
	cs, err := e.source.Watch(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("the ground truth's change stream: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &truth{ids: map[string]string{}, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(t.done)
		defer cs.Close(context.Background())
		for cs.Next(ctx) {
			var ev struct {
				ID          bson.Raw `bson:"_id"`
				DocumentKey struct {
					ID string `bson:"_id"`
				} `bson:"documentKey"`
			}
			if err := cs.Decode(&ev); err != nil {
				t.fail(err)
				return
			}
			t.mu.Lock()
			t.ids[ferry.EventID(ev.ID)] = ev.DocumentKey.ID
			t.mu.Unlock()
		}
		if err := cs.Err(); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			t.fail(err)
		}
	}()
	return t, nil
}

func (t *truth) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err = fmt.Errorf("the ground truth's change stream: %w", err)
}

// count returns how many deletes it saw, or its error.
func (t *truth) count() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids), t.err
}

// snapshot returns a copy of the deletes seen.
func (t *truth) snapshot() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]string, len(t.ids))
	for k, v := range t.ids {
		m[k] = v
	}
	return m
}

// close stops the change stream.
func (t *truth) close() {
	t.stop()
	<-t.done
}
