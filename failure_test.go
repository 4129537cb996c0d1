package ferry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/poll"
)

// stateLog is a HookState that records every state change.
type stateLog struct {
	mu     sync.Mutex
	states []ferry.RunState
}

func (s *stateLog) OnState(i ferry.StateInfo) {
	s.mu.Lock()
	s.states = append(s.states, i.State)
	s.mu.Unlock()
}

func (s *stateLog) has(st ferry.RunState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.states {
		if x == st {
			return true
		}
	}
	return false
}

func (s *stateLog) last() ferry.RunState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.states) == 0 {
		return ""
	}
	return s.states[len(s.states)-1]
}

// TestSinkOutageDeadLettersNothing: while the handler fails for every
// event (a receiver's outage), no attempt counts towards MaxAttempts:
// the consumer waits for the sink (StateWaitingForSink), and once the sink
// is back every event is applied, in order per document, none
// dead-lettered — although each was tried far more than MaxAttempts times.
func TestSinkOutageDeadLettersNothing(t *testing.T) {
	e := newEnv(t)
	var down atomic.Bool
	down.Store(true)
	var attempts atomic.Int64
	rec := newRecorder()
	rec.fn = func(context.Context, *ferry.Event) error {
		attempts.Add(1)
		if down.Load() {
			return ferry.Transient(errors.New("503 Service Unavailable")) // the receiver's, as package sink marks it
		}
		return nil
	}
	states := &stateLog{}
	start(t, e.client, rec.handle, e.opts(ferry.WithHooks(states))...)
	waitStarted(t, e.store)
	c := e.db.Collection("c")
	for i := range 20 {
		insert(t, c, bson.D{{Key: "_id", Value: i % 5}, {Key: "v", Value: i}})
		if i%5 == 4 {
			// Updates of the same documents after their inserts.
			_, _ = c.DeleteMany(context.Background(), bson.D{})
		}
	}
	poll.Until(t, 20*time.Second, func() error {
		if n, st := attempts.Load(), states.last(); n <= 20*3 || st != ferry.StateWaitingForSink {
			return fmt.Errorf("%d attempts, state %q; want > 20 attempts and waiting-for-sink", n, st)
		}
		return nil
	})
	down.Store(false)
	rec.waitFor(t, 40) // 20 inserts and 20 deletes
	entries, err := e.dlq.List(context.Background(), "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("%d events dead-lettered during an outage, want none", len(entries))
	}
	poll.Until(t, 5*time.Second, func() error {
		if st := states.last(); st != ferry.StateRunning {
			return fmt.Errorf("state %q, want running", st)
		}
		return nil
	})
	// Per document, the events came in order: insert then delete, v rising.
	last := map[int32]int32{}
	for _, ev := range rec.snapshot() {
		id := ev.DocumentKey.Lookup("_id").Int32()
		if ev.OperationType != "insert" {
			continue
		}
		v := ev.FullDocument.Lookup("v").Int32()
		if prev, ok := last[id]; ok && v < prev {
			t.Fatalf("document %d: v=%d after v=%d", id, v, prev)
		}
		last[id] = v
	}
}

// TestRetryMaxElapsedBoundsAnOutage: with an explicit RetryMaxElapsed, an
// event failing for longer than it goes to the poison policy even while
// the sink is down.
func TestRetryMaxElapsedBoundsAnOutage(t *testing.T) {
	e := newEnv(t)
	start(t, e.client, func(context.Context, *ferry.Event) error { return ferry.Transient(errors.New("connection refused")) },
		e.opts(ferry.RetryMaxElapsed(50*time.Millisecond))...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	poll.Until(t, 20*time.Second, func() error {
		entries, err := e.dlq.List(context.Background(), "s", 0)
		if err != nil {
			return err
		}
		if len(entries) != 1 {
			return fmt.Errorf("%d dead letters, want 1", len(entries))
		}
		if !strings.Contains(entries[0].Error, "longer than the retry bound") {
			return fmt.Errorf("dead-lettered with %q, want the retry bound as the reason", entries[0].Error)
		}
		return nil
	})
}

// TestFatalStopsAreFailures: a pipeline that removes _id stops Run with a
// failure of class id-modified that cannot clear by itself.
func TestFatalStopsAreFailures(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.Pipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}))...)
	waitStarted(t, e.store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	err := r.wait(t)
	f, ok := ferry.AsFailure(err)
	if !ok || f.Class != ferry.FailIDModified || f.Clears || !errors.Is(err, ferry.ErrFatal) {
		t.Fatalf("Run = %v; AsFailure = %+v, %v; want id-modified, not clearing", err, f, ok)
	}
}

// TestImageMissingIsAFailure: full_document_before_change required on a
// collection without pre-images stops Run with an image-missing failure
// that does not clear by itself (the change has no image, whatever is
// enabled later).
func TestImageMissingIsAFailure(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	insert(t, c, bson.D{{Key: "_id", Value: 1}})
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.FullDocumentBeforeChange("required"))...)
	waitStarted(t, e.store)
	if _, err := c.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	err := r.wait(t)
	f, ok := ferry.AsFailure(err)
	if !ok || f.Class != ferry.FailImageMissing || f.Clears {
		t.Fatalf("Run = %v; AsFailure = %+v, %v; want image-missing, not clearing", err, f, ok)
	}
}

// TestAuthFailuresAreFailures: MongoDB refusing the credentials
// (AuthenticationFailed, as in a handshake) or a privilege (Unauthorized)
// is an unauthorized failure that can clear, wherever it was met — not a
// transient error retried at once.
func TestAuthFailuresAreFailures(t *testing.T) {
	for _, code := range []int32{18, 13} {
		err := fmt.Errorf("ferry: read the server's version (buildInfo): %w", mongo.CommandError{Code: code, Message: "Authentication failed."})
		f, ok := ferry.AsFailure(err)
		if !ok || f.Class != ferry.FailUnauthorized || !f.Clears {
			t.Errorf("AsFailure(code %d) = %+v, %v; want unauthorized, clearing", code, f, ok)
		}
	}
}

func TestAsFailureIgnoresHandOffs(t *testing.T) {
	for _, err := range []error{nil, context.Canceled, ferry.ErrFenced, ferry.StopPartition(errors.New("lease lost")),
		fmt.Errorf("ferry: write checkpoint: %w", errors.New("connection reset"))} {
		if f, ok := ferry.AsFailure(err); ok {
			t.Errorf("AsFailure(%v) = %+v, want no failure", err, f)
		}
	}
}

// TestServerErrorsLogShortTokens: when the server refuses a resume and
// quotes the token in its message (280, "the resume token was not
// found"), neither the log nor the failure's detail carries the token in
// full — only its first 12 hex digits.
func TestServerErrorsLogShortTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A token of another collection's event: resuming collection c from it
	// cannot find the event.
	cs, err := e.db.Collection("other").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, e.db.Collection("other"), bson.D{{Key: "_id", Value: 1}})
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	tok := append(bson.Raw(nil), cs.ResumeToken()...)
	cs.Close(ctx)
	data := tok.Lookup("_data").StringValue()
	if _, err := e.store.Save(ctx, checkpoint.Checkpoint{Stream: "s", Partition: 0, Token: tok}); err != nil {
		t.Fatal(err)
	}
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 2}})
	var logs bytes.Buffer
	var mu sync.Mutex
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil },
		e.opts(ferry.Logger(slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))))...)
	err = r.wait(t)
	f, ok := ferry.AsFailure(err)
	if !ok {
		t.Fatalf("Run = %v, want a failure", err)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if !strings.Contains(f.Detail+text, data[:12]) {
		t.Fatalf("the failure does not quote the token's prefix at all; detail %q, logs:\n%s", f.Detail, text)
	}
	if strings.Contains(text, data) || strings.Contains(f.Detail, data) {
		t.Fatalf("the full resume token appears in the logs or the failure:\n%s\ndetail: %s", text, f.Detail)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCorruptCheckpointIsAFailure: a checkpoint record whose token is not
// BSON, or whose token, version and epoch were deleted, stops Run with a
// corrupt-checkpoint failure naming the field — not a transient error
// restarted in a loop (5,257 restarts in 15 s), and not "fenced" (4,280,
// with the wrong diagnosis).
func TestCorruptCheckpointIsAFailure(t *testing.T) {
	badData, _ := bson.Marshal(bson.D{{Key: "_data", Value: "zz-not-hex"}})
	for name, update := range map[string]bson.D{
		"token not BSON": {{Key: "$set", Value: bson.D{{Key: "token", Value: bson.Binary{Data: []byte("garbage, not a document")}}}}},
		"fields deleted": {{Key: "$unset", Value: bson.D{{Key: "token", Value: ""}, {Key: "version", Value: ""}, {Key: "epoch", Value: ""}}}},
		// A document, but no resume token: only the server refuses it.
		"token with a bad _data": {{Key: "$set", Value: bson.D{{Key: "token", Value: bson.Binary{Data: badData}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.useMongoStore()
			r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
			waitStarted(t, e.store)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			coll := e.client.Database(e.db.Name() + "_state").Collection("checkpoints")
			if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "stream", Value: "s"}}, update); err != nil {
				t.Fatal(err)
			}
			r = start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
			err := r.wait(t)
			f, ok := ferry.AsFailure(err)
			record := e.db.Name() + `_state.checkpoints _id "s/0"`
			what := "field"
			if name == "token with a bad _data" {
				what = "resume token"
			}
			if !ok || f.Class != ferry.FailCorruptCheckpoint || f.Clears || !strings.Contains(f.Detail, what) ||
				!strings.Contains(f.Detail, record) {
				t.Fatalf("Run = %v; AsFailure = %+v, %v; want a corrupt-checkpoint failure naming the record (%s) and the %s", err, f, ok, record, what)
			}
		})
	}
}

// lostReplyStore applies a Save and then reports it failed, once: a reply
// lost on the way back (a cancelled context, a dropped connection).
type lostReplyStore struct {
	checkpoint.Store
	mu   sync.Mutex
	lose bool
}

func (s *lostReplyStore) Save(ctx context.Context, cp checkpoint.Checkpoint) (checkpoint.Checkpoint, error) {
	saved, err := s.Store.Save(ctx, cp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lose {
		s.lose = false
		return checkpoint.Checkpoint{}, errors.New("connection reset: the reply was lost")
	}
	return saved, err
}

// TestLostCheckpointReplyIsNotFenced: a checkpoint write that went through
// but whose reply was lost must not make the next write look fenced ("another
// owner took over") — seen as a member stopped right after it started:
// its final checkpoint failed with ErrFenced against its own first write.
func TestLostCheckpointReplyIsNotFenced(t *testing.T) {
	e := newEnv(t)
	store := &lostReplyStore{Store: e.store, lose: true}
	e.store = store
	r := start(t, e.client, func(context.Context, *ferry.Event) error { return nil }, e.opts()...)
	waitStarted(t, store.Store)
	insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	poll.Until(t, 20*time.Second, func() error {
		cp, err := store.Store.Load(context.Background(), "s", 0)
		if err != nil {
			return err
		}
		if cp.Version < 2 {
			return fmt.Errorf("the checkpoint never moved past the first write: version %d", cp.Version)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil: the lost reply was our own write", err)
	}
}

// sinkErrors is a HookState that records the error of every
// waiting-for-sink report.
type sinkErrors struct {
	mu   sync.Mutex
	errs []string
}

func (s *sinkErrors) OnState(i ferry.StateInfo) {
	if i.State != ferry.StateWaitingForSink || i.Err == nil {
		return
	}
	s.mu.Lock()
	s.errs = append(s.errs, i.Err.Error())
	s.mu.Unlock()
}

func (s *sinkErrors) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// TestOutageReportsItsErrorChanging: when the delivery error of an outage
// changes (connection refused, then 503), the consumer reports
// waiting-for-sink again with the new error, so that status shows what
// fails now; the same error for other events is not reported again.
func TestOutageReportsItsErrorChanging(t *testing.T) {
	ferry.SetRenoteEvery(t, 50*time.Millisecond)
	e := newEnv(t)
	var cause atomic.Value
	cause.Store("connection refused")
	var attempts atomic.Int64
	handler := func(_ context.Context, ev *ferry.Event) error {
		attempts.Add(1)
		if c := cause.Load().(string); c != "" {
			return ferry.Transient(fmt.Errorf("event %s: %s", ev.ID(), c)) // the receiver's
		}
		return nil
	}
	errs := &sinkErrors{}
	// The sink stays down: the drain at the end gives up at once.
	start(t, e.client, handler, e.opts(ferry.WithHooks(errs), ferry.DrainTimeout(50*time.Millisecond))...)
	waitStarted(t, e.store)
	for i := range 3 {
		insert(t, e.db.Collection("c"), bson.D{{Key: "_id", Value: i}})
	}
	// One report of the refusals however many attempts fail so.
	poll.Until(t, 20*time.Second, func() error {
		if n := attempts.Load(); n < 12 || len(errs.get()) == 0 {
			return fmt.Errorf("%d attempts, reports %q", n, errs.get())
		}
		return nil
	})
	if got := errs.get(); len(got) != 1 || !strings.HasSuffix(got[0], "connection refused") {
		t.Fatalf("reports %q, want one, of the refusal", got)
	}
	cause.Store("503 Service Unavailable")
	poll.Until(t, 20*time.Second, func() error {
		got := errs.get()
		if len(got) < 2 || !strings.HasSuffix(got[len(got)-1], "503 Service Unavailable") {
			return fmt.Errorf("reports %q, want the 503 last", got)
		}
		return nil
	})
	if got := errs.get(); len(got) != 2 {
		t.Fatalf("reports %q, want the refusal and then the 503 once", got)
	}
}
