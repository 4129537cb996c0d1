package ferry_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
)

// checkpointAuditor is a HookCheckpoint that, after every checkpoint write,
// checks that every event at or before the checkpointed token has finished.
type checkpointAuditor struct {
	t        *testing.T
	e        *env
	mu       sync.Mutex
	all      []string        // _data of every event of the stream, in order
	finished map[string]bool // _data of events whose handler returned nil
	checks   int
	failures []string
}

func (a *checkpointAuditor) OnCheckpoint(info ferry.CheckpointInfo) {
	if info.Err != nil {
		return
	}
	cp, err := a.e.store.Load(context.Background(), "s", 0)
	if err != nil {
		return
	}
	at := cp.Token.Lookup("_data").StringValue()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks++
	for _, d := range a.all {
		if d <= at && !a.finished[d] {
			a.failures = append(a.failures, "checkpoint at "+at+" passes unfinished event "+d)
		}
	}
}

// TestCheckpointNeverPassesUnfinishedEvent runs a consumer whose handler
// takes random times across lanes (and fails some first attempts) and
// audits every checkpoint it writes; then the same with a batch handler
// that fails some events of its batches.
func TestCheckpointNeverPassesUnfinishedEvent(t *testing.T) {
	t.Run("handler", func(t *testing.T) { testCheckpointNeverPassesUnfinished(t, false) })
	t.Run("batch", func(t *testing.T) { testCheckpointNeverPassesUnfinished(t, true) })
}

func testCheckpointNeverPassesUnfinished(t *testing.T, batches bool) {
	e := newEnv(t)
	c := e.db.Collection("c")
	sess, err := e.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	at := *sess.OperationTime()
	sess.EndSession(context.Background())
	const n = 300
	for i := range n {
		// Few keys, many updates: lanes hold several events of one key.
		if _, err := c.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: i % 37}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			t.Fatal(err)
		}
	}
	aud := &checkpointAuditor{t: t, e: e, finished: map[string]bool{}}
	cs, err := c.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if !cs.Next(context.Background()) {
			t.Fatal(cs.Err())
		}
		aud.all = append(aud.all, cs.Current.Lookup("_id", "_data").StringValue())
	}
	cs.Close(context.Background())

	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	rec := newRecorder()
	rec.fn = func(ctx context.Context, ev *ferry.Event) error {
		rngMu.Lock()
		d := time.Duration(rng.IntN(2000)) * time.Microsecond
		fail := rng.IntN(10) == 0 && ev.Attempt == 1
		rngMu.Unlock()
		time.Sleep(d)
		if fail {
			return context.DeadlineExceeded // retried
		}
		aud.mu.Lock()
		aud.finished[ev.Token.Lookup("_data").StringValue()] = true
		aud.mu.Unlock()
		return nil
	}
	opts := e.opts(ferry.StartAt(ferry.StartAtTime(at)), ferry.CommitEvery(5, 2*time.Millisecond),
		ferry.Concurrency(6), ferry.WithHooks(aud))
	if !batches {
		start(t, e.client, rec.handle, opts...)
	} else {
		startBatch(t, e.client, func(ctx context.Context, batch []*ferry.Event) error {
			be := ferry.NewBatchError(len(batch))
			for i, ev := range batch {
				be.Set(i, rec.handle(ctx, ev))
			}
			return be.Err()
		}, append(opts, ferry.BatchSize(8))...)
	}
	rec.waitFor(t, n)
	aud.mu.Lock()
	defer aud.mu.Unlock()
	if len(aud.failures) > 0 {
		t.Fatalf("%d violations, first: %s", len(aud.failures), aud.failures[0])
	}
	if aud.checks < 5 {
		t.Fatalf("only %d checkpoints audited; the test did not exercise the committer", aud.checks)
	}
	t.Logf("%d checkpoints audited, none passed an unfinished event", aud.checks)
}
