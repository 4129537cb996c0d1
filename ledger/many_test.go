package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/ledger"
	"github.com/ferry-io/ferry/mongoerr"
)

// commandCounter counts the commands sent to one database.
type commandCounter struct {
	mu   sync.Mutex
	db   string
	seen map[string]int
}

func (c *commandCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.db != "" && e.DatabaseName == c.db {
			c.seen[e.CommandName]++
		}
	}}
}

// take returns the counts since the last take.
func (c *commandCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = map[string]int{}
	return out
}

// TestRecordManyInBulk: a batch's entries cost one insert; recording
// them again (with more) is not an error and keeps the first entries;
// SeenMany answers for the whole batch in one find.
func TestRecordManyInBulk(t *testing.T) {
	uri, _ := emutest.URI(t)
	cc := &commandCounter{seen: map[string]int{}}
	client := connectURI(t, uri, cc.monitor())
	db := freshDB(t, client)
	s := newStore(t, db)
	ctx := t.Context()
	var ids []string
	for i := range 150 {
		ids = append(ids, eventID(fmt.Sprint("e", i)))
	}
	cc.mu.Lock()
	cc.db = db.Name()
	cc.mu.Unlock()
	cc.take()

	if err := s.RecordMany(ctx, "orders", ids[:100], 1, 4); err != nil {
		t.Fatal(err)
	}
	if got := cc.take(); fmt.Sprint(got) != "map[insert:1]" {
		t.Fatalf("RecordMany of 100 events sent %v, want one insert", got)
	}
	// A replay of the batch with more events: the first 100 are
	// duplicates, not errors.
	if err := s.RecordMany(ctx, "orders", ids, 2, 5); err != nil {
		t.Fatalf("RecordMany over recorded events: %v", err)
	}
	if got := cc.take(); fmt.Sprint(got) != "map[insert:1]" {
		t.Fatalf("RecordMany of 150 events sent %v, want one insert", got)
	}
	first, err := s.Get(ctx, "orders", ids[0])
	if err != nil || first.Partition != 1 || first.Epoch != 4 || first.AppliedAt.IsZero() {
		t.Fatalf("Get of an event recorded twice = %+v, %v; want the first entry (partition 1, epoch 4)", first, err)
	}
	if later, err := s.Get(ctx, "orders", ids[120]); err != nil || later.Partition != 2 || later.Epoch != 5 {
		t.Fatalf("Get of an event recorded once = %+v, %v; want partition 2, epoch 5", later, err)
	}
	if n, err := s.Count(ctx, "orders"); err != nil || n != 150 {
		t.Fatalf("Count = %d, %v; want 150", n, err)
	}
	cc.take()
	absent := []string{eventID("x1"), eventID("x2")}
	seen, err := s.SeenMany(ctx, "orders", append(append([]string{}, ids...), absent...))
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.take(); fmt.Sprint(got) != "map[find:1]" {
		t.Fatalf("SeenMany of 152 events sent %v, want one find (no getMore)", got)
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("SeenMany: recorded event %s not seen", id[:8])
		}
	}
	if seen[absent[0]] || seen[absent[1]] || len(seen) != 152 {
		t.Fatalf("SeenMany = %d answers, absent ones %v %v; want 152, false", len(seen), seen[absent[0]], seen[absent[1]])
	}
	// An id twice in one call is recorded once.
	dup := eventID("dup")
	if err := s.RecordMany(ctx, "orders", []string{dup, dup}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count(ctx, "orders"); n != 151 {
		t.Fatalf("Count = %d after recording one new event twice in one call, want 151", n)
	}
	for _, bad := range []struct {
		stream string
		ids    []string
		part   int
		epoch  int64
	}{{"", ids[:1], 0, 0}, {"orders", []string{"a/b"}, 0, 0}, {"orders", ids[:1], -1, 0}, {"orders", ids[:1], 0, -1}} {
		if err := s.RecordMany(ctx, bad.stream, bad.ids, bad.part, bad.epoch); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("RecordMany(%q, %q, %d, %d) = %v, want ErrInvalid", bad.stream, bad.ids, bad.part, bad.epoch, err)
		}
	}
	if err := s.RecordMany(ctx, "orders", nil, 0, 0); err != nil {
		t.Errorf("RecordMany of no events = %v, want nil", err)
	}
}

// TestRecordManyInTransactionAfterSnapshot: the batch form of the
// transactional mode (SeenMany, then RecordMany of the absent ones, in
// one transaction): an entry another transaction commits after this
// one's snapshot makes RecordMany fail with a transient error, and the
// retried transaction sees it and records only the rest.
func TestRecordManyInTransactionAfterSnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	batch := []string{eventID("b0"), eventID("b1"), eventID("b2")}
	var attempts int
	var firstErr error
	var recorded [][]string
	err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		attempts++
		seen, err := f.ledger.SeenMany(sctx, "orders", batch)
		if err != nil {
			return err
		}
		var fresh []string
		for _, id := range batch {
			if !seen[id] {
				fresh = append(fresh, id)
			}
		}
		if attempts == 1 {
			// Another transaction records b1 now, after this snapshot.
			if err := ledger.RunTransaction(ctx, f.client, func(s1 context.Context) error {
				return f.ledger.RecordMany(s1, "orders", batch[1:2], 0, 1)
			}); err != nil {
				return fmt.Errorf("T1: %w", err)
			}
		}
		err = f.ledger.RecordMany(sctx, "orders", fresh, 0, 2)
		if attempts == 1 {
			firstErr = err
			if err == nil {
				return errors.New("RecordMany inserted an entry committed after the snapshot")
			}
		}
		if err == nil {
			recorded = append(recorded, fresh)
		}
		return err
	}, ledger.Backoff(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !mongoerr.IsTransientTransactionError(firstErr) {
		t.Fatalf("RecordMany after another commit failed with %v, want a transient transaction error", firstErr)
	}
	if attempts != 2 || len(recorded) != 1 || fmt.Sprint(recorded[0]) != fmt.Sprint([]string{batch[0], batch[2]}) {
		t.Fatalf("attempts %d, recorded %v; want 2 attempts recording b0 and b2", attempts, recorded)
	}
	if e, err := f.ledger.Get(ctx, "orders", batch[1]); err != nil || e.Epoch != 1 {
		t.Fatalf("b1's entry = %+v, %v; want the other transaction's (epoch 1)", e, err)
	}
}
