package ferry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestHandlerTimeout: a handler call gets a context with the call's
// deadline, which ends with DeadlineExceeded once HandlerTimeout passes.
// The deadline cancels the call; it is no verdict on it: a handler that
// returns the context's error failed and is tried again, one that returns
// nil after the deadline applied its event and is not called again.
func TestHandlerTimeout(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	const timeout = 100 * time.Millisecond
	type try struct {
		attempt  int
		deadline time.Duration // from the call's start
		err      error         // ctx.Err() when the first attempt returned
	}
	var mu sync.Mutex
	tries := map[int32][]try{}
	h := func(ctx context.Context, ev *ferry.Event) error {
		start := time.Now()
		id := ev.DocumentKey.Lookup("_id").Int32()
		dl, ok := ctx.Deadline()
		rec := try{attempt: ev.Attempt, deadline: -1}
		if ok {
			rec.deadline = dl.Sub(start)
		}
		var ret error
		if ev.Attempt == 1 {
			<-ctx.Done()
			rec.err = ctx.Err()
			if id == 1 {
				ret = ctx.Err() // the context's error
			} // id 2 ignores it and reports success, too late
		}
		mu.Lock()
		tries[id] = append(tries[id], rec)
		mu.Unlock()
		return ret
	}
	r := start(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.HandlerTimeout(timeout))...)
	last := lastToken(t, e, at, 2)
	// Both events finished: the checkpoint is past them, so neither is
	// called again.
	poll.Until(t, 20*time.Second, func() error {
		cp, err := e.store.Load(context.Background(), "s", 0)
		if err != nil || cp.Token == nil || cp.Token.Lookup("_data").StringValue() != last {
			return fmt.Errorf("the checkpoint is not past both events (%v)", err)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	poll.Until(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !(len(tries[1]) >= 2 && len(tries[2]) >= 1) {
			return fmt.Errorf("tries %+v, want two of event 1, one of event 2", tries)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for id, ts := range tries {
		first := ts[0]
		if first.attempt != 1 || first.err != context.DeadlineExceeded {
			t.Errorf("event %d: first call ended with %v (attempt %d), want DeadlineExceeded", id, first.err, first.attempt)
		}
		if first.deadline <= 0 || first.deadline > timeout {
			t.Errorf("event %d: the call's deadline was %v after its start, want within the timeout of %v", id, first.deadline, timeout)
		}
		switch {
		case id == 1 && (len(ts) != 2 || ts[1].attempt != 2):
			t.Errorf("event 1: tries %+v, want exactly a second attempt after the one that returned the context's error", ts)
		case id == 2 && len(ts) != 1:
			t.Errorf("event 2: tries %+v, want one: its late nil applied it", ts)
		}
	}
}
