package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/deadletter"
	"github.com/ferry-io/ferry/internal/childproc"
	"github.com/ferry-io/ferry/internal/poll"
)

// The crash tests run the consumer in a child process (this test binary,
// re-executed) and kill it with SIGKILL at a chosen point of the data path.

const childEnv = "FERRY_FAULT_CHILD"

// maybeChild runs the child consumer when this binary was started as one
// (and exits); otherwise it reports false.
func maybeChild() bool {
	childproc.RunIfChild(childEnv, func(spec string) error {
		// spec: uri|bolt path|db|mode|target _id|start T|start I
		parts := strings.Split(spec, "|")
		var start bson.Timestamp
		fmt.Sscan(parts[5], &start.T)
		fmt.Sscan(parts[6], &start.I)
		return runChild(parts[0], parts[1], parts[2], parts[3], parts[4], start)
	})
	return false
}

func runChild(uri, boltPath, dbName, mode, target string, start bson.Timestamp) error {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	store, err := boltstore.Open(boltPath)
	if err != nil {
		return err
	}
	db := client.Database(dbName)
	effects := db.Collection("effects")
	handler := func(ctx context.Context, ev *ferry.Event) error {
		id := fmt.Sprint(ev.DocumentKey.Lookup("_id").Int32())
		if mode == "between-fragments" || mode == "split-restart" {
			_, err := effects.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "doc", Value: id},
				{Key: "op", Value: ev.OperationType}, {Key: "bytes", Value: len(ev.Raw)},
				{Key: "whole", Value: ev.FullDocument != nil && ev.FullDocumentBeforeChange != nil && ev.Raw.Lookup("updateDescription").Type != 0}})
			return err
		}
		if id == target && mode == "before-effect" {
			fmt.Println("READY")
			select {} // killed here, before the effect
		}
		if _, err := effects.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "doc", Value: id}}); err != nil {
			return err
		}
		if id == target && mode == "after-effect" {
			fmt.Println("READY")
			select {} // killed here, after the effect, before the checkpoint
		}
		return nil
	}
	opts := []ferry.Option{ferry.Stream("s"), ferry.WatchCollection(dbName, "c"), ferry.Checkpoints(store),
		ferry.DeadLetters(deadletter.NewMongo(db, "dlq")), ferry.CommitEvery(1, 10*time.Millisecond),
		ferry.MaxAwaitTime(50 * time.Millisecond), ferry.Concurrency(1), ferry.StartAt(ferry.StartAtTime(start))}
	if mode == "between-fragments" || mode == "split-restart" {
		// Large events: images make an update split into fragments.
		opts = append(opts, ferry.FullDocument("updateLookup"), ferry.FullDocumentBeforeChange("whenAvailable"))
	}
	if mode == "between-fragments" {
		// The process stops (to be killed) once it has read fragment 2.
		client, err = mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(&event.CommandMonitor{
			Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
				if e.CommandName == "getMore" && fragmentIn(e.Reply) == 2 {
					fmt.Println("READY")
					select {} // killed here, between fragments 2 and 3
				}
			},
		}))
		if err != nil {
			return err
		}
	}
	c, err := ferry.NewConsumer(client, handler, opts...)
	if err != nil {
		return err
	}
	fmt.Println("STARTED")
	return c.Run(context.Background())
}

// child starts a consumer process.
func child(t *testing.T, uri, boltPath, db, mode, target string, start bson.Timestamp) *childproc.Child {
	t.Helper()
	return childproc.Start(t, childEnv, strings.Join([]string{uri, boltPath, db, mode, target,
		fmt.Sprint(start.T), fmt.Sprint(start.I)}, "|"))
}

// countEffects waits until the last event (_id 5) has its effect, then
// returns how many effects concern doc.
func countEffects(t *testing.T, db *mongo.Database, doc string) int {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		n, err := db.Collection("effects").CountDocuments(context.Background(), bson.D{{Key: "doc", Value: "5"}})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return errors.New("the last event was never applied after the restart")
		}
		return nil
	})
	m, err := db.Collection("effects").CountDocuments(context.Background(), bson.D{{Key: "doc", Value: doc}})
	if err != nil {
		t.Fatal(err)
	}
	return int(m)
}

func crashTest(t *testing.T, mode string, wantTarget int) {
	e := newEnv(t)
	boltPath := filepath.Join(t.TempDir(), "child.db")
	c := e.db.Collection("c")
	// The children start at the cluster time before the writes.
	sess, err := e.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := e.db.RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	startAt := *sess.OperationTime()
	for i := 1; i <= 5; i++ {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	const targetID = "3"
	srvURI := os.Getenv("FERRY_TEST_MONGODB_URI")
	if e.srv != nil {
		srvURI = e.srv.URI()
	}
	first := child(t, srvURI, boltPath, e.db.Name(), mode, targetID, startAt)
	first.WaitLine("READY", 30*time.Second)
	first.Signal(syscall.SIGKILL)
	_ = first.Wait()
	child(t, srvURI, boltPath, e.db.Name(), "normal", targetID, startAt).WaitLine("STARTED", 30*time.Second)
	// The second process applies events in order (one lane): once event 5
	// has its effect, event 3 has been dealt with.
	if got := countEffects(t, e.db, targetID); got != wantTarget {
		t.Fatalf("effects for the event in flight at the crash: %d, want %d", got, wantTarget)
	}
	for i := 4; i <= 5; i++ {
		if n, _ := e.db.Collection("effects").CountDocuments(context.Background(), bson.D{{Key: "doc", Value: fmt.Sprint(i)}}); n < 1 {
			t.Fatalf("event %d was lost across the crash", i)
		}
	}
}

// TestCrashAfterEffectBeforeCheckpoint: the process dies after the handler's
// effect and before the checkpoint: the event is applied again on restart
// (at-least-once; idempotent and transactional modes absorb the replay).
func TestCrashAfterEffectBeforeCheckpoint(t *testing.T) { crashTest(t, "after-effect", 2) }

// TestCrashBeforeEffect: the process dies before the effect: the event is
// applied, once, on restart.
func TestCrashBeforeEffect(t *testing.T) { crashTest(t, "before-effect", 1) }

// fragmentIn returns the fragment number of the first split event in a
// getMore reply's batch (0: none).
func fragmentIn(reply bson.Raw) int64 {
	batch, ok := reply.Lookup("cursor", "nextBatch").ArrayOK()
	if !ok {
		return 0
	}
	vals, _ := batch.Values()
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			if n, ok := d.Lookup("splitEvent", "fragment").AsInt64OK(); ok {
				return n
			}
		}
	}
	return 0
}
