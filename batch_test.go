package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/sink"
)

// Tests of the batch path: NewBatchConsumer and BatchHandler.

// clusterTime returns the server's current operation time: a start
// position before the writes that follow.
func clusterTime(t *testing.T, client *mongo.Client) bson.Timestamp {
	t.Helper()
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := client.Database("admin").RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	return *sess.OperationTime()
}

// startBatch runs a batch consumer in the background.
func startBatch(t *testing.T, client *mongo.Client, h ferry.BatchHandler, opts ...ferry.Option) (*ferry.Consumer, *running) {
	t.Helper()
	c, err := ferry.NewBatchConsumer(client, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, runInBackground(t, c)
}

// gate holds every handler call until it is opened, so that a backlog is
// read into the lanes first and the calls after it get full batches.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) wait(ctx context.Context) {
	select {
	case <-g.ch:
	case <-ctx.Done():
	}
}

// openWhenQueued opens the gate once the consumer holds n events read and
// not finished (the gated calls' and those waiting behind them).
func (g *gate) openWhenQueued(t *testing.T, c *ferry.Consumer, n int) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() error {
		if !(c.Status().QueueEvents >= n) {
			return fmt.Errorf("%d events queued, want %d", c.Status().QueueEvents, n)
		}
		return nil
	})
	g.once.Do(func() { close(g.ch) })
}

func idOf(ev *ferry.Event) int32 { return ev.DocumentKey.Lookup("_id").Int32() }

// call is one handler call: the events' _ids and what became of each.
type call struct {
	ids  []int32
	errs []error
}

// callLog records every call of a batch handler.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

func (l *callLog) add(evs []*ferry.Event, errs []error) {
	c := call{errs: errs}
	for _, ev := range evs {
		c.ids = append(c.ids, idOf(ev))
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *callLog) snapshot() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// applied counts the calls that applied each _id.
func (l *callLog) applied() map[int32]int {
	out := map[int32]int{}
	for _, c := range l.snapshot() {
		for i, id := range c.ids {
			if c.errs[i] == nil {
				out[id]++
			}
		}
	}
	return out
}

// handed counts the calls each _id was handed to.
func (l *callLog) handed() map[int32]int {
	out := map[int32]int{}
	for _, c := range l.snapshot() {
		for _, id := range c.ids {
			out[id]++
		}
	}
	return out
}

func (l *callLog) waitApplied(t *testing.T, ids ...int32) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() error {
		a := l.applied()
		for _, id := range ids {
			if a[id] == 0 {
				return fmt.Errorf("applied %v, want every one of %v", a, ids)
			}
		}
		return nil
	})
}

// TestBatchMixedResults: a batch whose handler applies some events and
// fails others (a *BatchError) finishes the applied ones at once and
// retries only the failed ones, each alone and in batch order; every event
// is applied exactly once and the checkpoint passes them all.
func TestBatchMixedResults(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	const n = 30
	for i := range int32(n) {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: i}})
	}
	g := newGate()
	log := &callLog{}
	h := func(ctx context.Context, batch []*ferry.Event) error {
		g.wait(ctx)
		be := ferry.NewBatchError(len(batch))
		for i, ev := range batch {
			if idOf(ev)%5 == 2 && ev.Attempt == 1 {
				be.Set(i, errors.New("flaky"))
			}
		}
		log.add(batch, ferry.EventErrors(be.Err(), len(batch)))
		return be.Err()
	}
	c, _ := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(1), ferry.BatchSize(50))...)
	g.openWhenQueued(t, c, n)
	log.waitApplied(t, seq[int32](0, n)...)

	handed, applied := log.handed(), log.applied()
	for id := range int32(n) {
		want := 1
		if id%5 == 2 {
			want = 2
		}
		if applied[id] != 1 || handed[id] != want {
			t.Errorf("event %d: handed over %d times, applied %d; want %d and 1", id, handed[id], applied[id], want)
		}
	}
	mixed := false
	var retried []int32
	for _, cl := range log.snapshot() {
		failed := slices.ContainsFunc(cl.errs, func(err error) bool { return err != nil })
		ok := slices.ContainsFunc(cl.errs, func(err error) bool { return err == nil })
		mixed = mixed || failed && ok && len(cl.ids) > 2
		if cl.ids[0]%5 == 2 && cl.errs[0] == nil && len(cl.ids) != 1 {
			t.Errorf("retry of event %d came in a call of %d events, want alone", cl.ids[0], len(cl.ids))
		}
		if len(cl.ids) == 1 && cl.ids[0]%5 == 2 && cl.errs[0] == nil {
			retried = append(retried, cl.ids[0])
		}
	}
	if !mixed {
		t.Fatalf("no call had applied and failed events together: the batch path was not exercised (%v)", log.snapshot())
	}
	if !slices.IsSorted(retried) {
		t.Errorf("failed events were retried in the order %v, want batch order", retried)
	}
	// The checkpoint passes every event once they are all applied.
	last := lastToken(t, e, at, n)
	poll.Until(t, 10*time.Second, func() error {
		cp, err := e.store.Load(context.Background(), "s", 0)
		if err != nil || cp.Token.Lookup("_data").StringValue() != last {
			return fmt.Errorf("checkpoint not at the last event (load: %v)", err)
		}
		return nil
	})
}

func optsStartAt(at bson.Timestamp) *options.ChangeStreamOptionsBuilder {
	return options.ChangeStream().SetStartAtOperationTime(&at)
}

// lastToken returns the _data of the nth change event after at.
func lastToken(t *testing.T, e *env, at bson.Timestamp, n int) string {
	t.Helper()
	cs, err := e.db.Collection("c").Watch(context.Background(), mongo.Pipeline{}, optsStartAt(at))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	var last string
	for range n {
		if !cs.Next(context.Background()) {
			t.Fatal(cs.Err())
		}
		last = cs.Current.Lookup("_id", "_data").StringValue()
	}
	return last
}

// TestBatchKeepsDocumentOrderAcrossAFailure: one document's ten events in
// one batch, the fourth failing once: the sink (sink.EachInOrder) skips
// the document's later events, ferry retries them after the failed one,
// and the document's events are applied once each, in order.
func TestBatchKeepsDocumentOrderAcrossAFailure(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	c := e.db.Collection("c")
	insert(t, c, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}})
	for v := 1; v < 10; v++ {
		if _, err := c.ReplaceOne(context.Background(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "v", Value: v}}); err != nil {
			t.Fatal(err)
		}
		insert(t, c, bson.D{{Key: "_id", Value: 100 + v}, {Key: "v", Value: 0}})
	}
	const n = 19
	g := newGate()
	var mu sync.Mutex
	var order []int32 // v of document 1, as applied
	var failedOnce, skipped atomic.Bool
	h := func(ctx context.Context, batch []*ferry.Event) error {
		g.wait(ctx)
		err := sink.EachInOrder(ctx, batch, func(_ context.Context, ev *ferry.Event) error {
			if idOf(ev) != 1 {
				return nil
			}
			v := ev.FullDocument.Lookup("v").Int32()
			if v == 3 && failedOnce.CompareAndSwap(false, true) {
				return errors.New("flaky")
			}
			mu.Lock()
			order = append(order, v)
			mu.Unlock()
			return nil
		}, nil)
		for _, e := range sink.Errors(err, len(batch)) {
			if errors.Is(e, sink.ErrSkipped) {
				skipped.Store(true)
			}
		}
		return err
	}
	cons, _ := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(1))...)
	g.openWhenQueued(t, cons, n)
	poll.Until(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(order) < 10 {
			return fmt.Errorf("document 1 applied %v, want v 0..9", order)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(order) != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("document 1 applied in the order %v, want [0 1 2 3 4 5 6 7 8 9]", order)
	}
	if !failedOnce.Load() || !skipped.Load() {
		t.Fatalf("failed %v, skipped %v: the failure inside a batch was not exercised", failedOnce.Load(), skipped.Load())
	}
	if entries, _ := e.dlq.List(context.Background(), "s", 0); len(entries) != 0 {
		t.Fatalf("%d dead letters, want none", len(entries))
	}
}

// TestBatchPoisonIsDeadLetteredAlone: an event that always fails, in a
// batch with others, is dead-lettered alone; the others are applied once
// each, whether the handler reports the failure for the event (a
// *BatchError), for the whole batch (an error, as an aborted transaction
// would), or panics; with MaxAttempts 1 too, where counting a failure of
// the whole batch against each of its events would dead-letter them all.
func TestBatchPoisonIsDeadLetteredAlone(t *testing.T) {
	for _, tc := range []struct {
		how      string
		attempts int
	}{{"event", 3}, {"batch", 3}, {"panic", 3}, {"event", 1}, {"batch", 1}} {
		how := tc.how
		t.Run(fmt.Sprintf("%s/attempts=%d", how, tc.attempts), func(t *testing.T) {
			e := newEnv(t)
			at := clusterTime(t, e.client)
			const n = 100
			docs := make([]any, n)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: int32(i)}}
			}
			if _, err := e.db.Collection("c").InsertMany(context.Background(), docs); err != nil {
				t.Fatal(err)
			}
			// The poison event is the second of the first batch of several
			// events after the gate opens (so that it comes with others):
			// from then on it always fails.
			var poison atomic.Int32
			poison.Store(-1)
			g := newGate()
			log := &callLog{}
			h := func(ctx context.Context, batch []*ferry.Event) error {
				g.wait(ctx)
				if len(batch) > 1 {
					poison.CompareAndSwap(-1, idOf(batch[1]))
				}
				be := ferry.NewBatchError(len(batch))
				for i, ev := range batch {
					if idOf(ev) == poison.Load() {
						be.Set(i, errors.New("always fails"))
					}
				}
				err := be.Err()
				if err != nil && how != "event" {
					err = errors.New("the batch failed")
				}
				log.add(batch, ferry.EventErrors(err, len(batch)))
				if err != nil && how == "panic" {
					panic("handler bug")
				}
				return err
			}
			c, _ := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)),
				ferry.Retry(tc.attempts, time.Millisecond, 5*time.Millisecond))...)
			g.openWhenQueued(t, c, n)
			// Other events keep succeeding: the failures count (see
			// health), so the poison event is told from an outage.
			stopWriting := keepWriting(t, e.db.Collection("c"), 1000)
			var entries []deadLetterOf
			poll.Until(t, 20*time.Second, func() error {
				if entries = deadLetters(t, e); len(entries) < 1 {
					return fmt.Errorf("%d dead letters, want 1", len(entries))
				}
				return nil
			})
			written := stopWriting()
			want := append(seq[int32](0, n), seq(1000, 1000+int32(written))...)
			want = slices.DeleteFunc(want, func(id int32) bool { return id == poison.Load() })
			log.waitApplied(t, want...)
			entries = deadLetters(t, e)
			if len(entries) != 1 || entries[0].id != poison.Load() || entries[0].attempts < tc.attempts {
				t.Fatalf("dead letters %+v, want event %d alone after at least %d attempts", entries, poison.Load(), tc.attempts)
			}
			for id, k := range log.applied() {
				if k != 1 {
					t.Errorf("event %d applied %d times, want once", id, k)
				}
			}
		})
	}
}

type deadLetterOf struct {
	id       int32
	attempts int
}

func deadLetters(t *testing.T, e *env) []deadLetterOf {
	t.Helper()
	list, err := e.dlq.List(context.Background(), "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []deadLetterOf
	for _, en := range list {
		out = append(out, deadLetterOf{id: en.Event.Lookup("documentKey", "_id").Int32(), attempts: en.Attempts})
	}
	return out
}

// TestBatchOutageDeadLettersNothing: while every delivery of every batch
// fails (the sink is down), nothing is dead-lettered however often the
// events are tried; once the sink is back every event is applied once.
func TestBatchOutageDeadLettersNothing(t *testing.T) {
	for _, how := range []string{"event", "batch"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			var down atomic.Bool
			down.Store(true)
			var attempts atomic.Int64
			log := &callLog{}
			h := func(_ context.Context, batch []*ferry.Event) error {
				attempts.Add(int64(len(batch)))
				var err error
				if down.Load() {
					be := ferry.NewBatchError(len(batch))
					for i := range batch {
						be.Set(i, ferry.Transient(errors.New("503 Service Unavailable"))) // the sink's, as package sink marks it
					}
					err = be
					if how == "batch" {
						err = ferry.Transient(errors.New("503 Service Unavailable"))
					}
				}
				log.add(batch, ferry.EventErrors(err, len(batch)))
				return err
			}
			states := &stateLog{}
			startBatch(t, e.client, h, e.opts(ferry.WithHooks(states))...)
			waitStarted(t, e.store)
			docs := make([]any, 50)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: int32(i)}}
			}
			if _, err := e.db.Collection("c").InsertMany(context.Background(), docs); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 20*time.Second, func() error {
				if !(attempts.Load() > 150 && states.last() == ferry.StateWaitingForSink) {
					return fmt.Errorf("%d attempts, state %q; want > 150 attempts and waiting-for-sink", attempts.Load(), states.last())
				}
				return nil
			})
			down.Store(false)
			log.waitApplied(t, seq[int32](0, 50)...)
			if entries := deadLetters(t, e); len(entries) != 0 {
				t.Fatalf("%d events dead-lettered during an outage, want none", len(entries))
			}
			for id, k := range log.applied() {
				if k != 1 {
					t.Errorf("event %d applied %d times, want once", id, k)
				}
			}
			poll.Until(t, 5*time.Second, func() error {
				if !(states.last() == ferry.StateRunning) {
					return errors.New("state " + string(states.last()) + ", want running")
				}
				return nil
			})
		})
	}
}

// TestBatchBounds: a batch holds at most BatchSize events and BatchBytes
// bytes of raw events, and batches fill up from a backlog.
func TestBatchBounds(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	const n = 60
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: strings.Repeat("x", 1000)}}
	}
	if _, err := e.db.Collection("c").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	log := &callLog{}
	var mu sync.Mutex
	var sizes [][2]int // events, bytes per call
	h := func(ctx context.Context, batch []*ferry.Event) error {
		g.wait(ctx)
		b := 0
		for _, ev := range batch {
			b += len(ev.Raw)
		}
		mu.Lock()
		sizes = append(sizes, [2]int{len(batch), b})
		mu.Unlock()
		log.add(batch, make([]error, len(batch)))
		return nil
	}
	const maxBytes = 5000 // four 1 KiB events, not five
	c, _ := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(2),
		ferry.BatchSize(7), ferry.BatchBytes(maxBytes))...)
	g.openWhenQueued(t, c, n)
	log.waitApplied(t, seq[int32](0, n)...)
	mu.Lock()
	full := 0
	for _, s := range sizes {
		if s[0] > 7 || s[1] > maxBytes {
			t.Errorf("a call of %d events, %d bytes: over the bounds (7 events, %d bytes)", s[0], s[1], maxBytes)
		}
		if s[1]+s[1]/s[0] > maxBytes { // one more event would not fit
			full++
		}
	}
	mu.Unlock()
	if full < 5 {
		t.Fatalf("only %d calls filled up to the byte bound, sizes %v: batches did not form", full, sizes)
	}

	// Bounded by the count alone.
	e2 := newEnv(t)
	at = clusterTime(t, e2.client)
	if _, err := e2.db.Collection("c").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	g, log = newGate(), &callLog{}
	mu.Lock()
	sizes = nil
	mu.Unlock()
	c, _ = startBatch(t, e2.client, h, e2.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(1), ferry.BatchSize(7))...)
	g.openWhenQueued(t, c, n)
	log.waitApplied(t, seq[int32](0, n)...)
	mu.Lock()
	defer mu.Unlock()
	sevens := 0
	for _, s := range sizes {
		if s[0] > 7 {
			t.Errorf("a call of %d events, over BatchSize 7", s[0])
		}
		if s[0] == 7 {
			sevens++
		}
	}
	if sevens < (n-7)/7 {
		t.Fatalf("%d calls of 7 events, want at least %d: sizes %v", sevens, (n-7)/7, sizes)
	}
}

// TestBatchLinger: with a linger, a lane waits for more events before it
// hands over a batch that is not full: three events written one after the
// other, each once the one before was read, come in one call.
func TestBatchLinger(t *testing.T) {
	e := newEnv(t)
	log := &callLog{}
	h := func(_ context.Context, batch []*ferry.Event) error {
		log.add(batch, make([]error, len(batch)))
		return nil
	}
	c, _ := startBatch(t, e.client, h, e.opts(ferry.Concurrency(1), ferry.BatchSize(3), ferry.BatchLinger(time.Hour))...)
	waitStarted(t, e.store)
	for i := range 3 {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: int32(i)}})
		if i == 2 {
			break // the batch is full: it goes
		}
		poll.Until(t, 20*time.Second, func() error {
			if !(c.Status().QueueEvents >= i+1) {
				return fmt.Errorf("%d events queued, want %d", c.Status().QueueEvents, i+1)
			}
			return nil
		})
	}
	log.waitApplied(t, 0, 1, 2)
	if calls := log.snapshot(); len(calls) != 1 || len(calls[0].ids) != 3 {
		t.Fatalf("calls %v, want one call of the three events", calls)
	}
}

// TestBatchStopPartition: ErrStopPartition for one event of a batch stops
// the partition: the events before it are applied, the checkpoint stays
// before it.
func TestBatchStopPartition(t *testing.T) {
	e := newEnv(t)
	at := clusterTime(t, e.client)
	const n = 10
	for i := range int32(n) {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: i}})
	}
	g := newGate()
	log := &callLog{}
	h := func(ctx context.Context, batch []*ferry.Event) error {
		g.wait(ctx)
		be := ferry.NewBatchError(len(batch))
		for i, ev := range batch {
			if idOf(ev) >= 5 {
				be.Set(i, ferry.StopPartition(errors.New("lease lost")))
			}
		}
		log.add(batch, ferry.EventErrors(be.Err(), len(batch)))
		return be.Err()
	}
	c, r := startBatch(t, e.client, h, e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.Concurrency(1))...)
	g.openWhenQueued(t, c, n)
	if err := r.wait(t); !errors.Is(err, ferry.ErrStopPartition) {
		t.Fatalf("Run = %v, want ErrStopPartition", err)
	}
	applied := log.applied()
	for id := range int32(n) {
		if want := map[bool]int{true: 1, false: 0}[id < 5]; applied[id] != want {
			t.Errorf("event %d applied %d times, want %d", id, applied[id], want)
		}
	}
	cp, err := e.store.Load(context.Background(), "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cp.Token.Lookup("_data").StringValue(), lastToken(t, e, at, 5); got > want {
		t.Fatalf("checkpoint %s passes event 5 (event 4 is %s)", got, want)
	}
}

// TestBatchOptions: the batch options belong to NewBatchConsumer, and
// each bad value is named.
func TestBatchOptions(t *testing.T) {
	problems := configProblems(t, ferry.BatchSize(10), ferry.BatchLinger(time.Millisecond))
	for _, want := range []string{"BatchSize: applies to a BatchHandler (NewBatchConsumer)", "BatchLinger: applies to a BatchHandler"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("NewConsumer problems %q: want one starting %q", problems, want)
		}
	}
	_, err := ferry.NewBatchConsumer(nil, nil, ferry.BatchSize(0), ferry.BatchBytes(0), ferry.BatchLinger(-time.Second))
	var ce *ferry.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("NewBatchConsumer = %v, want a *ConfigError", err)
	}
	for _, want := range []string{"handler: a BatchHandler is required", "BatchSize: must be at least 1, got 0",
		"BatchBytes: must be positive, got 0", "BatchLinger: must not be negative"} {
		if !slices.ContainsFunc(ce.Problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("NewBatchConsumer problems %q: want one starting %q", ce.Problems, want)
		}
	}
}
