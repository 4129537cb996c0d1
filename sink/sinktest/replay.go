package sinktest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
)

// Replay is what ForcedReplay wrote.
type Replay struct {
	// Events are the distinct events, in change order.
	Events []*ferry.Event
	// Written lists every acknowledged write in order, replays included
	// (ReplayWrites of them).
	Written []*ferry.Event
}

// ByKey groups the ids of the written events by key (the destination's
// notion of a document: a record key, an ordering key, ...), each group in
// write order.
func (r Replay) ByKey(key func(*ferry.Event) string) map[string][]string {
	out := map[string][]string{}
	for _, ev := range r.Written {
		k := key(ev)
		out[k] = append(out[k], ev.ID())
	}
	return out
}

// ReplayWrites is the number of acknowledged writes ForcedReplay makes.
const ReplayWrites = 40 + 50 + 40 + 60

// ForcedReplay simulates crashes between the destination's acknowledgement
// and the checkpoint: it writes 60 events of 7 documents (epoch 3) in four
// sessions, each through a new sink from newSink, connected, written in
// batches of 8 and closed without a checkpoint, each session replaying from
// an earlier point: events 0–39, then 0–49, then 20–59, then 0–59. A
// destination that de-duplicates ends holding 60 events; one that cannot
// holds ReplayWrites deliveries. Every Write must succeed.
func ForcedReplay(t *testing.T, newSink func() sink.Sink) Replay {
	t.Helper()
	ctx := context.Background()
	var r Replay
	for i := range 60 {
		r.Events = append(r.Events, NewEvent(i, fmt.Sprintf("k%d", i%7), 3))
	}
	for _, span := range [][2]int{{0, 40}, {0, 50}, {20, 60}, {0, 60}} {
		batch := r.Events[span[0]:span[1]]
		s := newSink()
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		for len(batch) > 0 {
			n := min(8, len(batch))
			if err := s.Write(ctx, batch[:n]); err != nil {
				t.Fatalf("Write: %v", err)
			}
			r.Written = append(r.Written, batch[:n]...)
			batch = batch[n:]
		}
		if err := s.Close(ctx); err != nil { // the crash: no checkpoint
			t.Fatal(err)
		}
	}
	return r
}
