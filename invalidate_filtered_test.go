package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestInvalidateFilteredOut: a pipeline that keeps only inserts filters out
// the invalidate event too, and MongoDB then closes the stream without one
// (the server's own test, change_stream_check_resumability.js: the
// cursor is exhausted, its last resume token the invalidate's). Ferry
// must treat the closed stream as the invalidation it is: stop with
// ErrInvalidated, or, with InvalidateRestart, continue after it on the
// re-created collection. Before, the reader saw an empty read, read the
// closed cursor again and again, and Run never stopped.
func TestInvalidateFilteredOut(t *testing.T) {
	insertsOnly := ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}})
	t.Run("stop", func(t *testing.T) {
		e := newEnv(t)
		at := clusterTime(t, e.client)
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
		if err := e.db.Collection("c").Drop(context.Background()); err != nil {
			t.Fatal(err)
		}
		h, delivered := collectIDs()
		r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), insertsOnly)...)
		err := r.wait(t)
		if !errors.Is(err, ferry.ErrInvalidated) {
			t.Fatalf("Run = %v; want ErrInvalidated once the server closed the stream", err)
		}
		if got := delivered(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("delivered %v; want the insert before the drop", got)
		}
	})
	// The drop while the consumer waits: the server closes the cursor in an
	// empty batch, whose postBatchResumeToken (the invalidate's) the Go
	// driver does not hand on; Ferry finds the invalidate after the last
	// event it read.
	t.Run("stop while reading", func(t *testing.T) {
		e := newEnv(t)
		at := clusterTime(t, e.client)
		delivered := make(chan int32, 4)
		h := func(ctx context.Context, ev *ferry.Event) error {
			delivered <- ev.DocumentKey.Lookup("_id").Int32()
			return nil
		}
		r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), insertsOnly)...)
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
		select {
		case id := <-delivered:
			if id != 1 {
				t.Fatalf("delivered %d, want 1", id)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the insert was not delivered")
		}
		if err := e.db.Collection("c").Drop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); !errors.Is(err, ferry.ErrInvalidated) {
			t.Fatalf("Run = %v; want ErrInvalidated once the server closed the stream", err)
		}
	})
	t.Run("restart", func(t *testing.T) {
		e := newEnv(t)
		at := clusterTime(t, e.client)
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
		if err := e.db.Collection("c").Drop(context.Background()); err != nil {
			t.Fatal(err)
		}
		h, delivered := collectIDs()
		start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), insertsOnly, ferry.OnInvalidate(ferry.InvalidateRestart))...)
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 2}}) // the collection again
		poll.Until(t, 20*time.Second, func() error {
			if got := delivered(); len(got) != 2 || got[1] != 2 {
				return fmt.Errorf("delivered %v; want 1, then 2 from the re-created collection", got)
			}
			return nil
		})
	})
}

// collectIDs returns a handler recording the _id of each event's document
// and a function returning those recorded so far.
func collectIDs() (ferry.Handler, func() []int32) {
	var mu sync.Mutex
	var got []int32
	h := func(ctx context.Context, ev *ferry.Event) error {
		mu.Lock()
		got = append(got, ev.DocumentKey.Lookup("_id").Int32())
		mu.Unlock()
		return nil
	}
	return h, func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int32(nil), got...)
	}
}
