package ferry_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/poll"
)

// bigUpdate prepares collection c with pre- and post-images and a ~9 MB
// document, and returns a function making the update whose change event
// (updateDescription, fullDocument and fullDocumentBeforeChange of ~9 MB
// each) is ~27 MB: three fragments through $changeStreamSplitLargeEvent.
func bigUpdate(t *testing.T, e *env) func() {
	t.Helper()
	ctx := context.Background()
	if err := e.db.CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := e.db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: strings.Repeat("x", 9<<20)}})
	return func() {
		if _, err := e.db.Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: strings.Repeat("y", 9<<20)}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// tokenStore records every token saved.
type tokenStore struct {
	checkpoint.Store
	saved chan bson.Raw
}

func (s *tokenStore) Save(ctx context.Context, cp checkpoint.Checkpoint) (checkpoint.Checkpoint, error) {
	out, err := s.Store.Save(ctx, cp)
	if err == nil && cp.Token != nil {
		select {
		case s.saved <- cp.Token:
		default:
		}
	}
	return out, err
}

// TestSplitEventDeliveredWhole: a ~27 MB update event arrives as three
// fragments; the handler sees one whole event (every field of every
// fragment), once, with the first fragment's event id, and no checkpoint
// ever stops between fragments.
func TestSplitEventDeliveredWhole(t *testing.T) {
	e := newEnv(t)
	if e.srv == nil {
		t.Skip("needs the emulator (a real server needs 7.0+ and ~30 MB of images)")
	}
	update := bigUpdate(t, e)
	store := &tokenStore{Store: e.store, saved: make(chan bson.Raw, 1000)}
	e.store = store
	rec := newRecorder()
	start(t, e.client, rec.handle, e.opts(ferry.FullDocument("updateLookup"), ferry.FullDocumentBeforeChange("whenAvailable"))...)
	waitStarted(t, store.Store)
	// The fragments, as the server sends them to any stream.
	cs, err := e.db.Collection("c").Watch(context.Background(), mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}},
		options.ChangeStream().SetFullDocument(options.UpdateLookup).SetFullDocumentBeforeChange(options.WhenAvailable))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	update()
	var frags []bson.Raw
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(frags) < 3 && cs.Next(ctx) {
		frags = append(frags, append(bson.Raw(nil), cs.Current...))
	}
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3: %v", len(frags), cs.Err())
	}
	evs := rec.waitFor(t, 1)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 2}}) // a later event: the checkpoint moves past
	evs = rec.waitFor(t, 2)
	ev := evs[0]
	if ev.OperationType != "update" || ev.FullDocument == nil || ev.FullDocumentBeforeChange == nil ||
		ev.Raw.Lookup("updateDescription").Type == 0 || ev.Raw.Lookup("splitEvent").Type != 0 || len(ev.Raw) < 27<<20 {
		t.Fatalf("the handler got %s of %d bytes: want the whole update (updateDescription, fullDocument, fullDocumentBeforeChange, no splitEvent)", ev.OperationType, len(ev.Raw))
	}
	if want := ferry.EventID(frags[0].Lookup("_id").Document()); ev.ID() != want {
		t.Fatalf("event id %s, want the first fragment's %s", ev.ID()[:16], want[:16])
	}
	if n := len(evs); n != 2 {
		t.Fatalf("%d events, want the split update once and the insert", n)
	}
	mid := map[string]bool{string(frags[0].Lookup("_id").Document()): true, string(frags[1].Lookup("_id").Document()): true}
	for {
		select {
		case tok := <-store.saved:
			if mid[string(tok)] {
				t.Fatal("a checkpoint was written between the fragments of an event")
			}
			continue
		default:
		}
		break
	}
}

// TestSplitEventAfterKillBetweenFragments: the consumer process is killed
// (SIGKILL) after reading fragment 2 of 3; on restart the event is
// delivered whole, once.
func TestSplitEventAfterKillBetweenFragments(t *testing.T) {
	e := newEnv(t)
	if e.srv == nil {
		t.Skip("needs the emulator (a real server needs 7.0+ and ~30 MB of images)")
	}
	update := bigUpdate(t, e)
	boltPath := filepath.Join(t.TempDir(), "child.db")
	sess, err := e.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := e.db.RunCommand(mongo.NewSessionContext(context.Background(), sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	startAt := *sess.OperationTime()
	update()
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 5}})
	first := child(t, e.srv.URI(), boltPath, e.db.Name(), "between-fragments", "", startAt)
	first.WaitLine("READY", 30*time.Second)
	first.Signal(syscall.SIGKILL)
	_ = first.Wait()
	if n, _ := e.db.Collection("effects").CountDocuments(context.Background(), bson.D{{Key: "op", Value: "update"}}); n != 0 {
		t.Fatalf("%d update effects before the kill, want none (the event was in the middle of its fragments)", n)
	}
	child(t, e.srv.URI(), boltPath, e.db.Name(), "split-restart", "", startAt).WaitLine("STARTED", 30*time.Second)
	poll.Until(t, 30*time.Second, func() error {
		n, err := e.db.Collection("effects").CountDocuments(context.Background(), bson.D{{Key: "doc", Value: "5"}})
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the events were not delivered after the restart")
		}
		return nil
	})
	var got []struct {
		Op    string `bson:"op"`
		Whole bool   `bson:"whole"`
		Bytes int    `bson:"bytes"`
	}
	cur, err := e.db.Collection("effects").Find(context.Background(), bson.D{{Key: "doc", Value: "1"}, {Key: "op", Value: "update"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Op != "update" || !got[0].Whole || got[0].Bytes < 27<<20 {
		t.Fatalf("after the restart the split update was delivered as %+v: want once, whole", got)
	}
}
