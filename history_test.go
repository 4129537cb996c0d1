package ferry_test

import (
	"context"
	"errors"
	"math/bits"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/mongoerr"
)

// TestOldestReachable: the search finds the first reachable second for
// windows from one second to years, with and without a hint, in about
// 2·log2(window) probes (2 with a hint that is still the answer), and when
// our clock is behind the server's.
func TestOldestReachable(t *testing.T) {
	const now = int64(1_800_000_000)
	for _, tc := range []struct {
		name        string
		start, hint int64
		maxProbes   int
	}{
		{"window of 1 s", now, 0, 3},
		{"window of a day", now - 86_400, 0, 2*bits.Len64(86_400) + 2},
		{"window of 3 years", now - 94_608_000, 0, 2*bits.Len64(94_608_000) + 2},
		{"start at second 1", 1, 0, 2*bits.Len64(uint64(now)) + 2},
		{"hint still right", now - 86_400, now - 86_400, 2},
		{"hint moved on", now - 86_000, now - 86_400, 2*bits.Len64(400) + 1},
		{"hint in the future", now - 100, now + 50, 2*bits.Len64(100) + 2},
		{"our clock behind the server's", now + 30, 0, 2*bits.Len64(64) + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes := 0
			reaches := func(s int64) (bool, error) { probes++; return s >= tc.start, nil }
			got, err := ferry.OldestReachable(reaches, now, tc.hint)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.start {
				t.Errorf("start %d, want %d", got, tc.start)
			}
			if probes > tc.maxProbes {
				t.Errorf("%d probes, want at most %d", probes, tc.maxProbes)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := ferry.OldestReachable(func(int64) (bool, error) { return false, boom }, now, 0); !errors.Is(err, boom) {
		t.Errorf("a failing probe: err %v, want it returned", err)
	}
}

// TestOplogStartIsExact: the search finds the oldest entry's cluster time
// to the increment; with that answer as hint it takes 2 probes.
func TestOplogStartIsExact(t *testing.T) {
	const now = int64(1_800_000_000)
	first := bson.Timestamp{T: uint32(now - 3600), I: 17}
	probes := 0
	reaches := func(at bson.Timestamp) (bool, error) {
		probes++
		return at.After(first) || at.Equal(first), nil
	}
	for _, hint := range []bson.Timestamp{{}, first, {T: first.T - 60, I: 3}, {T: first.T, I: 16}, {T: first.T, I: 18}} {
		probes = 0
		got, err := ferry.OplogStartOf(reaches, now, hint)
		if err != nil || got != first {
			t.Errorf("hint %v: start %v, %v; want %v", hint, got, err, first)
		}
		if hint == first && probes != 2 {
			t.Errorf("hint = the start: %d probes, want 2", probes)
		}
		if probes > 2*bits.Len64(3600)+2+34 {
			t.Errorf("hint %v: %d probes", hint, probes)
		}
	}
}

// TestOplogStart: after the oplog rolled, OplogStart is the second of the
// oldest entry it holds: a stream opens there and not a second before.
// With the emulator (a settable clock, a 12-entry oplog) that second is
// known: writes five a second, ten seconds apart, keep the last two groups
// and two entries of the group before.
func TestOplogStart(t *testing.T) {
	e := newEnv(t, emutest.OplogMaxEntries(12))
	c := e.db.Collection("c")
	ctx := context.Background()
	var groupAt []int64
	if e.srv != nil {
		for g := range 6 {
			e.srv.AdvanceClock(10 * time.Second)
			groupAt = append(groupAt, e.srv.Now().Unix())
			for i := range 5 {
				insert(t, c, bson.D{{Key: "_id", Value: g*10 + i}})
			}
		}
	} else {
		insert(t, c, bson.D{{Key: "_id", Value: 1}})
	}
	cons, err := ferry.NewConsumer(e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	start, err := cons.OplogStart(ctx, bson.Timestamp{})
	if err != nil {
		t.Fatal(err)
	}
	if e.srv != nil && int64(start.T) != groupAt[3] {
		t.Errorf("OplogStart %v, want the fourth group's second %d (groups at %v)", start, groupAt[3], groupAt)
	}
	opens := func(at bson.Timestamp) error {
		cs, err := c.Watch(ctx, []bson.D{}, options.ChangeStream().SetStartAtOperationTime(&at).SetBatchSize(1))
		if err != nil {
			return err
		}
		defer cs.Close(ctx)
		cs.TryNext(ctx)
		return cs.Err()
	}
	if err := opens(start); err != nil {
		t.Errorf("a stream at OplogStart %v: %v", start, err)
	}
	if err := opens(bson.Timestamp{T: start.T, I: start.I - 1}); !mongoerr.IsHistoryLost(err) {
		t.Errorf("a stream just before OplogStart %v: %v, want ChangeStreamHistoryLost", start, err)
	}
	// The first event the stream returns from there is the oldest entry.
	cs, err := c.Watch(ctx, []bson.D{}, options.ChangeStream().SetStartAtOperationTime(&start))
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	if ts, i := cs.Current.Lookup("clusterTime").Timestamp(); e.srv != nil && (bson.Timestamp{T: ts, I: i}) != start {
		t.Errorf("first event at %d.%d, want the oldest entry, at %v", ts, i, start)
	}
	cs.Close(ctx)
	// With the answer as hint the answer is the same.
	again, err := cons.OplogStart(ctx, start)
	if err != nil || again != start {
		t.Errorf("OplogStart with its own answer as hint: %v, %v; want %v", again, err, start)
	}
}
