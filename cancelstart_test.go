package ferry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
)

// cancellingStore cancels Run's context when Run calls the method named
// by at, then answers as a store that honours its context does.
type cancellingStore struct {
	checkpoint.Store
	at     string
	cancel context.CancelFunc
}

func (s *cancellingStore) Load(ctx context.Context, stream string, p int) (checkpoint.Checkpoint, error) {
	if s.at == "Load" {
		s.cancel()
		return checkpoint.Checkpoint{}, fmt.Errorf("load checkpoint: %w", ctx.Err())
	}
	return s.Store.Load(ctx, stream, p)
}

func (s *cancellingStore) Save(ctx context.Context, cp checkpoint.Checkpoint) (checkpoint.Checkpoint, error) {
	if s.at == "Save" {
		s.cancel()
		if err := ctx.Err(); err != nil {
			return checkpoint.Checkpoint{}, fmt.Errorf("save checkpoint: %w", err)
		}
	}
	return s.Store.Save(ctx, cp)
}

// TestCancelledBeforeOrWhileStartingReturnsNil: cancellation returns nil
// whenever it comes. Before, a context cancelled before Run, or while Run
// read the server's version or the checkpoint, made Run return "read the
// server's version (buildInfo): context canceled", while one cancelled a
// little later returned nil, so a shutdown path depended on timing.
func TestCancelledBeforeOrWhileStartingReturnsNil(t *testing.T) {
	e := newEnv(t)
	for _, at := range []string{"before Run", "Load", "Save"} {
		t.Run(at, func(t *testing.T) {
			var calls atomic.Int64
			h := func(context.Context, *ferry.Event) error { calls.Add(1); return nil }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			store := &cancellingStore{Store: e.store, at: at, cancel: cancel}
			c, err := ferry.NewConsumer(e.client, h, e.opts(ferry.Checkpoints(store))...)
			if err != nil {
				t.Fatal(err)
			}
			if at == "before Run" {
				cancel()
			}
			if err := c.Run(ctx); err != nil {
				t.Fatalf("Run with its context cancelled %s = %v, want nil", at, err)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("%d handler calls, want none", n)
			}
			if st := c.Status(); st.Running || st.LastError != "" {
				t.Errorf("status after Run %+v, want not running and no error", st)
			}
		})
	}
}
