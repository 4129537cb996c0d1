package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/ledger"
	"github.com/ferry-io/ferry/mongoerr"
)

// fixture is a ledger and an "effects" collection in one fresh database,
// both created outside transactions (required before MongoDB 4.4).
type fixture struct {
	client  *mongo.Client
	srv     *emutest.Server
	ledger  *ledger.Store
	effects *mongo.Collection
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	client, srv := emutest.Client(t)
	return fixtureOn(t, client, srv)
}

func fixtureOn(t *testing.T, client *mongo.Client, srv *emutest.Server) *fixture {
	t.Helper()
	db := freshDB(t, client)
	if err := db.CreateCollection(t.Context(), "effects"); err != nil {
		t.Fatal(err)
	}
	return &fixture{client: client, srv: srv, ledger: newStore(t, db), effects: db.Collection("effects")}
}

// apply is the transactional mode's body for one event: record it, and
// make the effect only if this transaction inserted the entry.
func (f *fixture) apply(sctx context.Context, id string) (applied bool, err error) {
	inserted, err := f.ledger.RecordNew(sctx, "orders", id, 0, 1)
	if err != nil || !inserted {
		return false, err
	}
	if _, err := f.effects.InsertOne(sctx, bson.D{{Key: "event", Value: id}}); err != nil {
		return false, err
	}
	return true, nil
}

func (f *fixture) effectCount(t *testing.T, id string) int64 {
	t.Helper()
	n, err := f.effects.CountDocuments(t.Context(), bson.D{{Key: "event", Value: id}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) seen(t *testing.T, id string) bool {
	t.Helper()
	seen, err := f.ledger.Seen(t.Context(), "orders", id)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

func TestTransactionCommitIsVisibleTogether(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	id := eventID("e1")
	err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		applied, err := f.apply(sctx, id)
		if err != nil || !applied {
			return fmt.Errorf("apply = %v, %v", applied, err)
		}
		// Inside: the transaction sees its own entry; outside: nothing yet.
		if seen, err := f.ledger.Seen(sctx, "orders", id); err != nil || !seen {
			return fmt.Errorf("Seen inside the transaction = %v, %v", seen, err)
		}
		if f.seen(t, id) || f.effectCount(t, id) != 0 {
			return errors.New("uncommitted writes visible outside the transaction")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !f.seen(t, id) || f.effectCount(t, id) != 1 {
		t.Fatalf("after commit: seen %v, effects %d; want both", f.seen(t, id), f.effectCount(t, id))
	}
	// A replay finds the entry and makes no effect.
	err = ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		applied, err := f.apply(sctx, id)
		if applied {
			return errors.New("the replay applied the event again")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.effectCount(t, id); n != 1 {
		t.Fatalf("effects after a replay = %d, want 1", n)
	}
}

func TestTransactionAbortLeavesNothing(t *testing.T) {
	f := newFixture(t)
	id := eventID("e1")
	boom := errors.New("handler failed")
	calls := 0
	err := ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		calls++
		if applied, err := f.apply(sctx, id); err != nil || !applied {
			return fmt.Errorf("apply = %v, %v", applied, err)
		}
		return boom
	})
	if err != boom {
		t.Fatalf("RunTransaction returned %v, want fn's error itself", err)
	}
	if calls != 1 {
		t.Fatalf("fn ran %d times for a non-transient error, want 1", calls)
	}
	if f.seen(t, id) || f.effectCount(t, id) != 0 {
		t.Fatalf("aborted transaction left seen=%v, effects=%d", f.seen(t, id), f.effectCount(t, id))
	}
}

// TestDuplicateKeepsTransactionOpen: RecordNew reporting a duplicate does
// not abort the transaction, so the consumer can still commit its other
// writes (the checkpoint) in it.
func TestDuplicateKeepsTransactionOpen(t *testing.T) {
	f := newFixture(t)
	id := eventID("e1")
	if err := f.ledger.Record(t.Context(), "orders", id, 0, 1); err != nil {
		t.Fatal(err)
	}
	err := ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		inserted, err := f.ledger.RecordNew(sctx, "orders", id, 0, 2)
		if err != nil || inserted {
			return fmt.Errorf("RecordNew of a recorded event = %v, %v", inserted, err)
		}
		_, err = f.effects.InsertOne(sctx, bson.D{{Key: "event", Value: "checkpoint"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.effectCount(t, "checkpoint"); n != 1 {
		t.Fatalf("the write after a duplicate did not commit (%d)", n)
	}
	if e, _ := f.ledger.Get(t.Context(), "orders", id); e.Epoch != 1 {
		t.Fatalf("the duplicate RecordNew changed the entry: %+v", e)
	}
}

// TestConcurrentSameEventUncommitted: T2 records the event while T1's
// entry is written but not committed. T2 gets WriteConflict, is retried
// after T1 commits, sees the entry and makes no effect.
func TestConcurrentSameEventUncommitted(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	id := eventID("contended")
	t1Written, t1Go, t1Done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		t1Done <- ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
			applied, err := f.apply(sctx, id)
			if err != nil || !applied {
				return fmt.Errorf("T1 apply = %v, %v", applied, err)
			}
			close(t1Written)
			<-t1Go
			return nil
		}, ledger.MaxAttempts(1))
	}()
	<-t1Written

	var attempts int
	var firstErr, t1Err error
	err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		attempts++
		applied, err := f.apply(sctx, id)
		if attempts == 1 {
			firstErr = err
			close(t1Go)
			t1Err = <-t1Done
			if err == nil {
				return errors.New("T2's first RecordNew did not conflict")
			}
			return err
		}
		if applied {
			return errors.New("T2 applied the event after T1 committed it")
		}
		return err
	}, ledger.Backoff(0, 0))
	if t1Err != nil {
		t.Fatalf("T1: %v", t1Err)
	}
	if !mongoerr.IsTransientTransactionError(firstErr) {
		t.Fatalf("T2's first RecordNew failed with %v, want WriteConflict", firstErr)
	}
	if err != nil {
		t.Fatalf("T2: %v", err)
	}
	if attempts != 2 {
		t.Fatalf("T2 ran %d times, want 2", attempts)
	}
	if n := f.effectCount(t, id); n != 1 {
		t.Fatalf("effects = %d, want exactly 1", n)
	}
}

// TestConcurrentSameEventAfterSnapshot: T2's snapshot predates T1's
// commit, so T2 does not see T1's entry; inserting it anyway conflicts,
// and the retry (a new snapshot) sees it.
func TestConcurrentSameEventAfterSnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	id := eventID("snapshot")
	var attempts int
	var firstErr error
	err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		attempts++
		// The first read fixes the snapshot.
		seen, err := f.ledger.Seen(sctx, "orders", id)
		if err != nil {
			return err
		}
		if attempts == 1 {
			if seen {
				return errors.New("entry seen before anyone recorded it")
			}
			// T1 commits the event now, after T2's snapshot.
			if err := ledger.RunTransaction(ctx, f.client, func(s1 context.Context) error {
				_, err := f.apply(s1, id)
				return err
			}); err != nil {
				return fmt.Errorf("T1: %w", err)
			}
			if seen, _ := f.ledger.Seen(sctx, "orders", id); seen {
				return errors.New("T2's snapshot shows an entry committed after it")
			}
			_, err = f.apply(sctx, id)
			firstErr = err
			if err == nil {
				return errors.New("T2 inserted an entry committed after its snapshot")
			}
			return err
		}
		if !seen {
			return errors.New("retried T2 does not see T1's entry")
		}
		applied, err := f.apply(sctx, id)
		if applied {
			return errors.New("retried T2 applied the event again")
		}
		return err
	}, ledger.Backoff(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !mongoerr.IsTransientTransactionError(firstErr) {
		t.Fatalf("T2's insert after T1's commit failed with %v, want WriteConflict", firstErr)
	}
	if attempts != 2 || f.effectCount(t, id) != 1 {
		t.Fatalf("attempts %d, effects %d; want 2 and 1", attempts, f.effectCount(t, id))
	}
}

// TestConcurrentSameEventRace: unsynchronised transactions applying one
// event; whatever the interleaving, exactly one effect commits and every
// caller succeeds.
func TestConcurrentSameEventRace(t *testing.T) {
	f := newFixture(t)
	id := eventID("race")
	const n = 6
	var applied atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
				ok, err := f.apply(sctx, id)
				if ok && err == nil {
					applied.Add(1) // counts attempts that made the effect, committed or not
				}
				return err
			}, ledger.MaxAttempts(100), ledger.Backoff(time.Millisecond, 20*time.Millisecond))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.effectCount(t, id); got != 1 {
		t.Fatalf("committed effects = %d, want exactly 1 (attempts that made one: %d)", got, applied.Load())
	}
}

// TestRunTransactionRetriesWriteConflict provokes a WriteConflict with a
// second session holding an uncommitted write to the same document.
func TestRunTransactionRetriesWriteConflict(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.effects.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	other, err := f.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer other.EndSession(context.Background())
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}

	var attempts int
	var retried []error
	err = ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		attempts++
		if attempts == 1 {
			if err := other.StartTransaction(); err != nil {
				return err
			}
			octx := mongo.NewSessionContext(ctx, other)
			if _, err := f.effects.UpdateByID(octx, "x", inc); err != nil {
				return fmt.Errorf("other session: %w", err)
			}
			_, err := f.effects.UpdateByID(sctx, "x", inc)
			if err == nil {
				return errors.New("no WriteConflict on a document another transaction wrote")
			}
			if err := other.CommitTransaction(ctx); err != nil {
				return fmt.Errorf("other session commit: %w", err)
			}
			return err
		}
		_, err := f.effects.UpdateByID(sctx, "x", inc)
		return err
	}, ledger.OnRetry(func(attempt int, err error) {
		if attempt != len(retried)+1 {
			t.Errorf("OnRetry attempt %d after %d retries", attempt, len(retried))
		}
		retried = append(retried, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || len(retried) != 1 {
		t.Fatalf("fn ran %d times, OnRetry called %d times; want 2 and 1", attempts, len(retried))
	}
	var se mongo.ServerError
	if !errors.As(retried[0], &se) || !se.HasErrorCode(mongoerr.CodeWriteConflict) {
		t.Fatalf("retried error = %v, want WriteConflict", retried[0])
	}
	var doc struct{ N int }
	if err := f.effects.FindOne(ctx, bson.D{{Key: "_id", Value: "x"}}).Decode(&doc); err != nil || doc.N != 2 {
		t.Fatalf("x.n = %d, %v; want 2 (both increments)", doc.N, err)
	}
}

type handlerError struct{ code int }

func (e *handlerError) Error() string { return fmt.Sprintf("handler error %d", e.code) }

func TestRunTransactionReturnsFnErrorUnchanged(t *testing.T) {
	f := newFixture(t)
	sentinel := errors.New("sentinel")
	for _, want := range []error{
		sentinel,
		fmt.Errorf("wrapped: %w", sentinel),
		&handlerError{code: 7},
		context.Canceled,
	} {
		calls := 0
		got := ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
			calls++
			if _, err := f.effects.InsertOne(sctx, bson.D{{Key: "event", Value: "doomed"}}); err != nil {
				return err
			}
			return want
		})
		if got != want || calls != 1 {
			t.Errorf("fn returned %v: RunTransaction returned %v after %d calls, want the same error after 1", want, got, calls)
		}
	}
	if n := f.effectCount(t, "doomed"); n != 0 {
		t.Fatalf("%d writes of failed transactions committed", n)
	}
}

func TestRunTransactionMaxAttempts(t *testing.T) {
	f := newFixture(t)
	transient := mongo.CommandError{Code: 112, Name: "WriteConflict", Labels: []string{"TransientTransactionError"}}
	calls := 0
	err := ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		calls++
		if _, err := f.effects.InsertOne(sctx, bson.D{{Key: "event", Value: "never"}}); err != nil {
			return err
		}
		return transient
	}, ledger.MaxAttempts(3), ledger.Backoff(0, 0))
	if calls != 3 {
		t.Fatalf("fn ran %d times with MaxAttempts(3)", calls)
	}
	var ce mongo.CommandError
	if !errors.Is(err, ledger.ErrRetriesExhausted) || !errors.As(err, &ce) || ce.Code != 112 {
		t.Fatalf("err = %v, want ErrRetriesExhausted wrapping the WriteConflict", err)
	}
	if n := f.effectCount(t, "never"); n != 0 {
		t.Fatalf("%d writes of failed attempts committed", n)
	}
	// The same when fn fails before sending anything (the driver then has
	// no transaction to abort on the server).
	calls = 0
	err = ledger.RunTransaction(t.Context(), f.client, func(context.Context) error {
		calls++
		return transient
	}, ledger.MaxAttempts(2), ledger.Backoff(0, 0))
	if calls != 2 || !errors.Is(err, ledger.ErrRetriesExhausted) {
		t.Fatalf("fn sending nothing: %d calls, err = %v; want 2 and ErrRetriesExhausted", calls, err)
	}
}

// TestRunTransactionCancelledDuringBackoff: ctx ending between attempts
// stops the retries at once.
func TestRunTransactionCancelledDuringBackoff(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	transient := mongo.CommandError{Code: 112, Labels: []string{"TransientTransactionError"}}
	calls := 0
	err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
		calls++
		cancel()
		return transient
	}, ledger.Backoff(time.Hour, time.Hour))
	if calls != 1 || !errors.Is(err, context.Canceled) || !errors.As(err, new(mongo.CommandError)) {
		t.Fatalf("after %d calls err = %v; want 1 call and context.Canceled wrapping the last error", calls, err)
	}
	// fn succeeding while ctx is done commits nothing.
	ctx2, cancel2 := context.WithCancel(t.Context())
	err = ledger.RunTransaction(ctx2, f.client, func(sctx context.Context) error {
		_, err := f.effects.InsertOne(sctx, bson.D{{Key: "event", Value: "late"}})
		cancel2()
		return err
	})
	if !errors.Is(err, context.Canceled) || f.effectCount(t, "late") != 0 {
		t.Fatalf("fn done after cancel: err = %v, effects %d; want Canceled and none", err, f.effectCount(t, "late"))
	}
}

// commitCounter counts commitTransaction commands a client sends.
type commitCounter struct{ n atomic.Int32 }

func (c *commitCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "commitTransaction" {
			c.n.Add(1)
		}
	}}
}

func TestRunTransactionRetriesUnknownCommitResult(t *testing.T) {
	uri, srv := emutest.URI(t)
	if srv == nil {
		t.Skip("needs the emulator's fail points")
	}
	var commits commitCounter
	f := fixtureOn(t, connectURI(t, uri, commits.monitor()), srv)
	id := eventID("e1")
	srv.FailCommand(emutest.FailPoint{
		Commands: []string{"commitTransaction"}, Times: 2, ErrorCode: 8,
		ErrorLabels: []string{"UnknownTransactionCommitResult"},
	})
	calls := 0
	err := ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		calls++
		_, err := f.apply(sctx, id)
		return err
	}, ledger.Backoff(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || commits.n.Load() != 3 {
		t.Fatalf("fn ran %d times, %d commits sent; want 1 run and 3 commits", calls, commits.n.Load())
	}
	if !f.seen(t, id) || f.effectCount(t, id) != 1 {
		t.Fatal("the transaction did not commit")
	}

	// Still unknown after MaxAttempts tries: ErrCommitUnknown, and fn is
	// not run again.
	srv.FailCommand(emutest.FailPoint{
		Commands: []string{"commitTransaction"}, ErrorCode: 8,
		ErrorLabels: []string{"UnknownTransactionCommitResult"},
	})
	defer srv.ClearFailPoints()
	commits.n.Store(0)
	calls = 0
	err = ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		calls++
		_, err := f.apply(sctx, eventID("e2"))
		return err
	}, ledger.MaxAttempts(3), ledger.Backoff(0, 0))
	if !errors.Is(err, ledger.ErrCommitUnknown) || calls != 1 || commits.n.Load() != 3 {
		t.Fatalf("err = %v after %d runs and %d commits; want ErrCommitUnknown, 1 run, 3 commits", err, calls, commits.n.Load())
	}
}

func TestRunTransactionInvalid(t *testing.T) {
	f := newFixture(t)
	noop := func(context.Context) error { return nil }
	if err := ledger.RunTransaction(t.Context(), nil, noop); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("nil client: %v", err)
	}
	if err := ledger.RunTransaction(t.Context(), f.client, nil); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("nil fn: %v", err)
	}
	for name, opt := range map[string]ledger.TxnOption{
		"MaxAttempts(0)":       ledger.MaxAttempts(0),
		"Backoff(-1, 0)":       ledger.Backoff(-1, 0),
		"Backoff(2, 1)":        ledger.Backoff(2, 1),
		"CommitTimeout(0)":     ledger.CommitTimeout(0),
		"TransactionOptions()": ledger.TransactionOptions(nil),
		"nil option":           nil,
	} {
		if err := ledger.RunTransaction(t.Context(), f.client, noop, opt); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	err := ledger.RunTransaction(t.Context(), nil, nil, ledger.MaxAttempts(0), ledger.CommitTimeout(-1))
	if want := "ledger: invalid argument: client: nil client; fn: nil function; MaxAttempts: must be at least 1, got 0; " +
		"CommitTimeout: must be positive, got -1ns"; err == nil || err.Error() != want {
		t.Errorf("RunTransaction = %v, want %q", err, want)
	}
	// Nested: fn's context already carries the outer session.
	err = ledger.RunTransaction(t.Context(), f.client, func(sctx context.Context) error {
		return ledger.RunTransaction(sctx, f.client, noop)
	})
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("nested RunTransaction: err = %v, want ErrInvalid", err)
	}
}

// TestWithCheckpointFencing runs the transactional mode's full body (ledger,
// effect, checkpoint compare-and-set of checkpoint/mongostore) and checks
// that a fenced-off owner's transaction leaves neither effect nor entry.
func TestWithCheckpointFencing(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	db := f.effects.Database()
	if err := db.CreateCollection(ctx, mongostore.DefaultCollection); err != nil {
		t.Fatal(err)
	}
	cps, err := mongostore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	token := func(n int) bson.Raw {
		raw, _ := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("%04d", n)}})
		return raw
	}
	// body applies event n under cp's lease and returns the saved checkpoint.
	body := func(cp checkpoint.Checkpoint, n int) (checkpoint.Checkpoint, error) {
		var saved checkpoint.Checkpoint
		err := ledger.RunTransaction(ctx, f.client, func(sctx context.Context) error {
			if _, err := f.apply(sctx, eventID(fmt.Sprint(n))); err != nil {
				return err
			}
			next := cp
			next.Token = token(n)
			var err error
			saved, err = cps.Save(sctx, next)
			return err
		})
		return saved, err
	}
	owner := checkpoint.Checkpoint{Stream: "orders", Partition: 0, Epoch: 1}
	cp1, err := body(owner, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A new owner (epoch 2) applies event 2.
	newOwner := cp1
	newOwner.Epoch = 2
	if _, err := body(newOwner, 2); err != nil {
		t.Fatal(err)
	}
	// The zombie (epoch 1, stale version) tries event 3: fenced, nothing of
	// its transaction remains.
	_, err = body(cp1, 3)
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("zombie transaction: err = %v, want ErrFenced (returned unchanged)", err)
	}
	id3 := eventID("3")
	if f.seen(t, id3) || f.effectCount(t, id3) != 0 {
		t.Fatalf("the fenced transaction left seen=%v, effects=%d", f.seen(t, id3), f.effectCount(t, id3))
	}
	for _, n := range []string{"1", "2"} {
		if id := eventID(n); !f.seen(t, id) || f.effectCount(t, id) != 1 {
			t.Fatalf("event %s: seen=%v, effects=%d; want recorded once", n, f.seen(t, id), f.effectCount(t, id))
		}
	}
}

// TestFailedCommitLeavesNoTransactionOpen: commitTransaction failing
// (ShutdownInProgress, on every try of the commit) used to leave
// the transaction open on the server, its documents locked until
// transactionLifetimeLimitSeconds (60 s): the next transaction on them met
// WriteConflict until its retries ran out. After a failed commit the
// transaction is aborted (its session killed), so the next one succeeds
// at once.
func TestFailedCommitLeavesNoTransactionOpen(t *testing.T) {
	f := newFixture(t)
	if f.srv == nil {
		t.Skip("needs the emulator's fail points on commitTransaction")
	}
	ctx := t.Context()
	if _, err := f.effects.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	err := f.client.Database("admin").RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}}, {Key: "errorCode", Value: 91}}},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
	// ShutdownInProgress marks the server unknown in the driver; a fast
	// heartbeat finds it again quickly.
	client := connectURI(t, f.srv.URI()+"&heartbeatFrequencyMS=500")
	effects := client.Database(f.effects.Database().Name()).Collection(f.effects.Name())
	bump := func(sctx context.Context) error {
		_, err := effects.UpdateOne(sctx, bson.D{{Key: "_id", Value: "x"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		return err
	}
	first := time.Now()
	if err := ledger.RunTransaction(ctx, client, bump, ledger.MaxAttempts(2), ledger.Backoff(time.Millisecond, 2*time.Millisecond), ledger.CommitTimeout(time.Second)); err == nil {
		t.Fatal("a transaction whose every commit failed returned nil")
	}
	t.Logf("the failing transaction took %v", time.Since(first).Round(time.Millisecond))
	_ = f.client.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
	// Another process (another client: another pool of sessions, as another
	// member or lane would use) changes the same document.
	other := connectURI(t, f.srv.URI())
	otherEffects := other.Database(f.effects.Database().Name()).Collection(f.effects.Name())
	bumpOther := func(sctx context.Context) error {
		_, err := otherEffects.UpdateOne(sctx, bson.D{{Key: "_id", Value: "x"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		return err
	}
	var conflicts atomic.Int64
	start := time.Now()
	err = ledger.RunTransaction(ctx, other, bumpOther, ledger.MaxAttempts(3), ledger.Backoff(10*time.Millisecond, 20*time.Millisecond),
		ledger.OnRetry(func(int, error) { conflicts.Add(1) }))
	if err != nil {
		t.Fatalf("the next transaction on the same document: %v (after %d write conflicts, %v): the failed one was left open",
			err, conflicts.Load(), time.Since(start).Round(time.Millisecond))
	}
}
