package mongotest_test

// The numbered prose tests of MongoDB's change-streams specification
// (mongodb/specifications, source/change-streams/tests/README.md, "Prose
// Tests") that apply to a replica set, run through the official Go driver.
// Against the emulator they check that mongotest gives the driver what a
// real server gives it; with FERRY_TEST_MONGODB_URI set they run unchanged
// against a real replica set (fail points need enableTestCommands).
//
// Not implemented: 5, 10, 15 and 16 were removed from the specification;
// 9 and 12 are for servers older than 4.0.7 (the emulator reports 8.0).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/ferry-io/ferry/mongotest"
)

// recorded is one command-monitoring or SDAM event, in the order the driver
// published it.
type recorded struct {
	kind string   // "started", "succeeded", "failed" or "server"
	name string   // the command name; for "server" the new server kind
	body bson.Raw // started: the command; succeeded: the reply
	err  error    // failed: the failure
}

// recorder keeps the events of one client. The driver calls monitors
// synchronously, so an event is recorded before the operation returns.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *recorder) add(ev recorded) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// mark returns a position to pass to since.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// since returns the events from position i on.
func (r *recorder) since(i int) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.events[i:]...)
}

// commands returns the events of one kind for the named commands, from i on.
func (r *recorder) commands(i int, kind string, names ...string) []recorded {
	var out []recorded
	for _, ev := range r.since(i) {
		if ev.kind == kind && inList(names, ev.name) {
			out = append(out, ev)
		}
	}
	return out
}

// lastCursorReply returns the newest aggregate or getMore reply: the reply
// that produced the change stream's current batch.
func (r *recorder) lastCursorReply(t *testing.T) bson.Raw {
	t.Helper()
	got := r.commands(0, "succeeded", "aggregate", "getMore")
	if len(got) == 0 {
		t.Fatal("no aggregate or getMore reply recorded")
	}
	return got[len(got)-1].body
}

func inList(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// proseEnv is a monitored client on the test's server, with an application
// name unique to the test so that fail points hit only this client.
type proseEnv struct {
	client *mongo.Client
	db     *mongo.Database
	coll   *mongo.Collection
	rec    *recorder
	app    string
	srv    *mongotest.Server
}

// newProseEnv connects a monitored client; configure, when non-nil, adjusts
// its options (for example to turn retryable reads off).
func newProseEnv(t *testing.T, configure func(*options.ClientOptions)) *proseEnv {
	t.Helper()
	uri, srv := mongotest.URI(t)
	rec := &recorder{}
	cm := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			rec.add(recorded{kind: "started", name: e.CommandName, body: append(bson.Raw(nil), e.Command...)})
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			rec.add(recorded{kind: "succeeded", name: e.CommandName, body: append(bson.Raw(nil), e.Reply...)})
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			rec.add(recorded{kind: "failed", name: e.CommandName, err: e.Failure})
		},
	}
	sm := &event.ServerMonitor{
		ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			rec.add(recorded{kind: "server", name: e.NewDescription.Kind})
		},
	}
	app := "prose_" + sanitize(t.Name())
	opts := options.Client().ApplyURI(uri).SetAppName(app).SetMonitor(cm).SetServerMonitor(sm)
	if configure != nil {
		configure(opts)
	}
	client := connectClient(t, opts)
	db := testDB(t, client)
	return &proseEnv{client: client, db: db, coll: db.Collection("c"), rec: rec, app: app, srv: srv}
}

// failCommand configures the failCommand fail point for this client's
// commands (data.appName) and turns it off when the test ends.
func (e *proseEnv) failCommand(t *testing.T, times int, data bson.D) {
	t.Helper()
	data = append(bson.D{{Key: "appName", Value: e.app}}, data...)
	e.configureFailPoint(t, "failCommand", bson.D{{Key: "times", Value: int32(times)}}, data)
}

func (e *proseEnv) configureFailPoint(t *testing.T, name string, mode any, data bson.D) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}, {Key: "data", Value: data}}
	if err := e.client.Database("admin").RunCommand(ctx(t), cmd).Err(); err != nil {
		t.Fatalf("configureFailPoint %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		off := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}
		_ = e.client.Database("admin").RunCommand(c, off).Err()
	})
}

// insert inserts documents {_id: id} for each id, one command each.
func (e *proseEnv) insert(t *testing.T, c *mongo.Collection, ids ...any) {
	t.Helper()
	for _, id := range ids {
		if _, err := c.InsertOne(ctx(t), bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
}

// resumableGetMoreError makes this client's next getMore fail with an error
// the driver must resume from: HostUnreachable (6) labelled
// ResumableChangeStreamError. The label is given explicitly because a real
// server does not label failCommand errors on getMore (MONGO-SEMANTICS §5.2).
func (e *proseEnv) resumableGetMoreError(t *testing.T) {
	t.Helper()
	e.failCommand(t, 1, bson.D{
		{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "errorCode", Value: int32(6)},
		{Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}},
	})
}

// cursorBatch returns the documents of an aggregate or getMore reply.
func cursorBatch(t *testing.T, reply bson.Raw) []bson.Raw {
	t.Helper()
	v, err := reply.LookupErr("cursor", "firstBatch")
	if err != nil {
		v, err = reply.LookupErr("cursor", "nextBatch")
	}
	if err != nil {
		t.Fatalf("reply has no cursor batch: %v", reply)
	}
	vals, err := v.Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bson.Raw, len(vals))
	for i, x := range vals {
		out[i] = x.Document()
	}
	return out
}

// cursorPBRT returns a reply's cursor.postBatchResumeToken.
func cursorPBRT(t *testing.T, reply bson.Raw) bson.Raw {
	t.Helper()
	v, err := reply.LookupErr("cursor", "postBatchResumeToken")
	if err != nil {
		t.Fatalf("reply has no postBatchResumeToken: %v", reply)
	}
	return v.Document()
}

func cursorID(t *testing.T, reply bson.Raw) int64 {
	t.Helper()
	id, ok := reply.Lookup("cursor", "id").Int64OK()
	if !ok {
		t.Fatalf("reply has no int64 cursor.id: %v", reply)
	}
	return id
}

// changeStreamSpec returns the $changeStream document of an aggregate.
func changeStreamSpec(t *testing.T, cmd bson.Raw) bson.Raw {
	t.Helper()
	spec, ok := cmd.Lookup("pipeline", "0", "$changeStream").DocumentOK()
	if !ok {
		t.Fatalf("aggregate without a leading $changeStream: %v", cmd)
	}
	return spec
}

// sameFields reports how a differs from b, ignoring the named top-level
// fields and the order of fields; "" when they agree.
func sameFields(a, b bson.Raw, ignore ...string) string {
	fields := func(d bson.Raw) map[string]bson.RawValue {
		m := map[string]bson.RawValue{}
		els, _ := d.Elements()
		for _, el := range els {
			if !inList(ignore, el.Key()) {
				m[el.Key()] = el.Value()
			}
		}
		return m
	}
	fa, fb := fields(a), fields(b)
	var diffs []string
	for k, va := range fa {
		vb, ok := fb[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s missing (was %v)", k, va))
		case !va.Equal(vb):
			diffs = append(diffs, fmt.Sprintf("%s = %v, was %v", k, vb, va))
		}
	}
	for k, vb := range fb {
		if _, ok := fa[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s added (%v)", k, vb))
		}
	}
	return strings.Join(diffs, "; ")
}

// eventID returns a copy of the current event's _id (its resume token).
func eventID(t *testing.T, cs *mongo.ChangeStream) bson.Raw {
	t.Helper()
	id, ok := cs.Current.Lookup("_id").DocumentOK()
	if !ok {
		t.Fatalf("event without a document _id: %v", cs.Current)
	}
	return append(bson.Raw(nil), id...)
}

// eventKey returns the current event's documentKey._id.
func eventKey(cs *mongo.ChangeStream) any {
	var ev struct {
		Key struct {
			ID any `bson:"_id"`
		} `bson:"documentKey"`
	}
	_ = cs.Decode(&ev)
	return ev.Key.ID
}

// nextRaw advances the stream and fails the test when no event arrives in
// time.
func nextRaw(t *testing.T, cs *mongo.ChangeStream) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !cs.Next(c) {
		t.Fatalf("no event: %v", cs.Err())
	}
}

// checkToken asserts the token rule of prose tests 11 and 13 right after
// Next returned an event: while events of the batch remain, the token is the
// event's _id; once the batch is used up, it is the batch's
// postBatchResumeToken.
func checkToken(t *testing.T, cs *mongo.ChangeStream, rec *recorder) {
	t.Helper()
	got := cs.ResumeToken()
	if cs.RemainingBatchLength() > 0 {
		if want := eventID(t, cs); !bytes.Equal(got, want) {
			t.Fatalf("mid-batch resume token = %v, want the event's _id %v", got, want)
		}
		return
	}
	if want := cursorPBRT(t, rec.lastCursorReply(t)); !bytes.Equal(got, want) {
		t.Fatalf("resume token at the end of a batch = %v, want the batch's postBatchResumeToken %v", got, want)
	}
}

func tokenDataOf(tok bson.Raw) string {
	s, _ := tok.Lookup("_data").StringValueOK()
	return s
}

// serverCode reports whether err is a server error with the code.
func serverCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

// opTimeOfInsert inserts {_id: id} in a session and returns the insert's
// operation time, which a startAtOperationTime stream includes.
func (e *proseEnv) opTimeOfInsert(t *testing.T, id any) *bson.Timestamp {
	t.Helper()
	sess, err := e.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if _, err := e.coll.InsertOne(mongo.NewSessionContext(ctx(t), sess), bson.D{{Key: "_id", Value: id}}); err != nil {
		t.Fatal(err)
	}
	ts := sess.OperationTime()
	if ts == nil {
		t.Fatal("no operationTime after an insert")
	}
	return ts
}

// invalidateToken inserts into coll, drops it, and returns the token of the
// invalidate event that a stream on coll reports; coll no longer exists.
func (e *proseEnv) invalidateToken(t *testing.T, coll *mongo.Collection) bson.Raw {
	t.Helper()
	e.insert(t, coll, "before-drop")
	cs := watch(t, ctx(t), coll, mongo.Pipeline{})
	defer cs.Close(context.Background())
	if err := coll.Drop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for {
		nextRaw(t, cs)
		if cs.Current.Lookup("operationType").StringValue() == "invalidate" {
			return eventID(t, cs)
		}
	}
}

// TestProse1TracksLastToken: the change stream keeps the resume token of
// the last event it handed out, so a new stream resumed from it continues
// exactly after that event.
func TestProse1TracksLastToken(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	cs := watch(t, c, env.coll, mongo.Pipeline{})
	defer cs.Close(c)
	prev := cs.ResumeToken()
	for i := 0; i < 3; i++ {
		env.insert(t, env.coll, i)
		nextRaw(t, cs)
		if got := eventKey(cs); got != int32(i) {
			t.Fatalf("event %d is for _id %v", i, got)
		}
		checkToken(t, cs, env.rec)
		tok := cs.ResumeToken()
		if tokenDataOf(tok) <= tokenDataOf(prev) {
			t.Fatalf("resume token did not advance: %v then %v", prev, tok)
		}
		prev = append(bson.Raw(nil), tok...)
	}
	env.insert(t, env.coll, 3)
	resumed := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(prev))
	defer resumed.Close(c)
	nextRaw(t, resumed)
	if got := eventKey(resumed); got != int32(3) {
		t.Fatalf("stream resumed from the tracked token starts at _id %v, want 3", got)
	}
}

// TestProse2MissingTokenIsAnError: an event without its resume token must
// end the stream with an error. From wire version 8 the server raises it:
// projecting _id out fails with ChangeStreamFatalError (280), which is not
// resumable, so the driver must not resume.
func TestProse2MissingTokenIsAnError(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	cs := watch(t, c, env.coll, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}})
	defer cs.Close(c)
	env.insert(t, env.coll, 1)
	nc, cancel := context.WithTimeout(c, 10*time.Second)
	defer cancel()
	if cs.Next(nc) {
		t.Fatalf("got an event without _id: %v", cs.Current)
	}
	var se mongo.ServerError
	if err := cs.Err(); !errors.As(err, &se) || !se.HasErrorCode(280) || !se.HasErrorLabel("NonResumableChangeStreamError") {
		t.Fatalf("error = %v, want server error 280 labelled NonResumableChangeStreamError", cs.Err())
	}
	if n := len(env.rec.commands(0, "started", "aggregate")); n != 1 {
		t.Fatalf("%d aggregates sent; the driver must not resume after 280", n)
	}
}

// TestProse3ResumesOnceWithOriginalPipeline: after it has a resume token,
// a stream hit by a resumable error resumes by itself, once, sending the
// original pipeline and options with only the resume token added.
func TestProse3ResumesOnceWithOriginalPipeline(t *testing.T) {
	cases := []struct {
		name string
		fail func(t *testing.T, env *proseEnv)
	}{
		{"error labelled ResumableChangeStreamError", func(t *testing.T, env *proseEnv) { env.resumableGetMoreError(t) }},
		{"CursorNotFound without labels", func(t *testing.T, env *proseEnv) {
			env.failCommand(t, 1, bson.D{
				{Key: "failCommands", Value: bson.A{"getMore"}},
				{Key: "errorCode", Value: int32(43)},
				{Key: "errorLabels", Value: bson.A{}},
			})
		}},
		{"error labelled by the server", func(t *testing.T, env *proseEnv) {
			// Fires after the cursor is checked out, so the server itself
			// labels HostUnreachable ResumableChangeStreamError.
			env.configureFailPoint(t, "failGetMoreAfterCursorCheckout",
				bson.D{{Key: "times", Value: int32(1)}}, bson.D{{Key: "errorCode", Value: int32(6)}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newProseEnv(t, nil)
			c := ctx(t)
			pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}
			opts := options.ChangeStream().SetFullDocument(options.UpdateLookup).SetBatchSize(5).SetMaxAwaitTime(time.Second)
			cs := watch(t, c, env.coll, pipeline, opts)
			defer cs.Close(c)
			env.insert(t, env.coll, 1)
			nextRaw(t, cs)
			token := append(bson.Raw(nil), cs.ResumeToken()...)

			tc.fail(t, env)
			env.insert(t, env.coll, 2)
			mark := env.rec.mark()
			nextRaw(t, cs)
			if got := eventKey(cs); got != int32(2) {
				t.Fatalf("after the resume: event for _id %v, want 2", got)
			}
			if failed := env.rec.commands(mark, "failed", "getMore"); len(failed) != 1 {
				t.Fatalf("%d failed getMores, want the 1 injected", len(failed))
			}
			aggs := env.rec.commands(0, "started", "aggregate")
			if len(aggs) != 2 {
				t.Fatalf("%d aggregates sent, want the original and one resume", len(aggs))
			}
			orig, again := aggs[0].body, aggs[1].body
			// maxTimeMS follows each call's context deadline, and the
			// driver's session and cluster time move on.
			if d := sameFields(orig, again, "$clusterTime", "pipeline", "lsid", "maxTimeMS"); d != "" {
				t.Fatalf("resumed aggregate differs from the original beyond the pipeline: %s", d)
			}
			origPipe, _ := orig.Lookup("pipeline").Array().Values()
			againPipe, _ := again.Lookup("pipeline").Array().Values()
			if len(origPipe) != len(againPipe) {
				t.Fatalf("resumed pipeline has %d stages, original %d", len(againPipe), len(origPipe))
			}
			for i := 1; i < len(origPipe); i++ {
				if !origPipe[i].Equal(againPipe[i]) {
					t.Fatalf("resumed pipeline stage %d = %v, original %v", i, againPipe[i], origPipe[i])
				}
			}
			if d := sameFields(changeStreamSpec(t, orig), changeStreamSpec(t, again), "resumeAfter"); d != "" {
				t.Fatalf("resumed $changeStream options differ from the original: %s", d)
			}
			ra, ok := changeStreamSpec(t, again).Lookup("resumeAfter").DocumentOK()
			if !ok || !bytes.Equal(ra, token) {
				t.Fatalf("resumed with resumeAfter %v, want the token held before the error %v", ra, token)
			}
		})
	}
}

// TestProse4NoResumeOnAggregateErrors: an error from an aggregate command
// is never resumed, neither when the stream is opened nor when the
// aggregate of a resume fails. The injected error carries the
// ResumableChangeStreamError label (so it would be resumed on getMore) but
// a code that is not a retryable-read code: the Go driver retries a
// retryable aggregate error without limit when the context has a deadline,
// even with retryReads off, and a retry is not a resume.
func TestProse4NoResumeOnAggregateErrors(t *testing.T) {
	noRetry := func(o *options.ClientOptions) { o.SetRetryReads(false) }
	const code = 11601 // Interrupted
	failure := bson.D{
		{Key: "errorCode", Value: int32(code)},
		{Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}},
	}
	t.Run("opening aggregate", func(t *testing.T) {
		env := newProseEnv(t, noRetry)
		env.failCommand(t, 1, append(bson.D{{Key: "failCommands", Value: bson.A{"aggregate"}}}, failure...))
		cs, err := env.coll.Watch(ctx(t), mongo.Pipeline{})
		if err == nil {
			cs.Close(context.Background())
			t.Fatal("Watch succeeded although its aggregate failed")
		}
		if !serverCode(err, code) {
			t.Fatalf("Watch error = %v, want the injected code %d", err, code)
		}
		if n := len(env.rec.commands(0, "started", "aggregate")); n != 1 {
			t.Fatalf("%d aggregates sent, want 1", n)
		}
	})
	t.Run("aggregate of a resume", func(t *testing.T) {
		env := newProseEnv(t, noRetry)
		c := ctx(t)
		cs := watch(t, c, env.coll, mongo.Pipeline{})
		defer cs.Close(c)
		// The getMore fails (a resume starts), then the resume's aggregate.
		env.failCommand(t, 2, append(bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}}, failure...))
		env.insert(t, env.coll, 1)
		nc, cancel := context.WithTimeout(c, 10*time.Second)
		defer cancel()
		if cs.Next(nc) {
			t.Fatal("Next returned an event although the resume's aggregate failed")
		}
		if !serverCode(cs.Err(), code) {
			t.Fatalf("stream error = %v, want the aggregate's code %d", cs.Err(), code)
		}
		if n := len(env.rec.commands(0, "started", "aggregate")); n != 2 {
			t.Fatalf("%d aggregates sent, want the original and the one failed resume", n)
		}
		if n := len(env.rec.commands(0, "started", "getMore")); n != 1 {
			t.Fatalf("%d getMores sent, want 1", n)
		}
	})
}

// TestProse6ServerSelectionBeforeResume: before resuming, the stream selects
// a server again, with its original read preference. A network error on
// getMore marks the server Unknown, so the resume's aggregate can only be
// sent after server selection has found the primary again.
func TestProse6ServerSelectionBeforeResume(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	coll := env.db.Collection("c", options.Collection().SetReadPreference(readpref.PrimaryPreferred()))
	cs := watch(t, c, coll, mongo.Pipeline{})
	defer cs.Close(c)
	env.failCommand(t, 1, bson.D{
		{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "closeConnection", Value: true},
	})
	env.insert(t, env.coll, 1)
	mark := env.rec.mark()
	nextRaw(t, cs)
	if got := eventKey(cs); got != int32(1) {
		t.Fatalf("event for _id %v, want 1", got)
	}
	// Expected order: the getMore's network error marks the server
	// Unknown; monitoring finds the primary again; only then the resume's
	// aggregate is sent.
	evs := env.rec.since(mark)
	index := func(from int, kind, name string) int {
		for i := from; i < len(evs); i++ {
			if evs[i].kind == kind && evs[i].name == name {
				return i
			}
		}
		return -1
	}
	failed := index(0, "failed", "getMore")
	unknown := index(0, "server", "Unknown")
	primary := index(unknown+1, "server", "RSPrimary")
	resume := index(0, "started", "aggregate")
	if failed < 0 || unknown < 0 || primary < 0 || resume < 0 || failed > resume || unknown > primary || primary > resume {
		t.Fatalf("want the getMore failure and the server Unknown, then RSPrimary, then the resume aggregate; events: %v", eventNames(evs))
	}
	aggs := env.rec.commands(0, "started", "aggregate")
	if len(aggs) != 2 {
		t.Fatalf("%d aggregates, want 2", len(aggs))
	}
	for i, a := range aggs {
		mode, _ := a.body.Lookup("$readPreference", "mode").StringValueOK()
		if mode != "primaryPreferred" {
			t.Fatalf("aggregate %d sent $readPreference %v, want mode primaryPreferred", i, a.body.Lookup("$readPreference"))
		}
	}
}

func eventNames(evs []recorded) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.kind + ":" + ev.name
	}
	return out
}

// TestProse7EmptyFirstBatchStaysOpen: a stream whose aggregate returns a
// cursor id with an empty first batch is not closed by the driver: it goes
// on to getMore on that cursor.
func TestProse7EmptyFirstBatchStaysOpen(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	cs := watch(t, c, env.coll, mongo.Pipeline{})
	defer cs.Close(c)
	reply := env.rec.lastCursorReply(t)
	id := cursorID(t, reply)
	if n := len(cursorBatch(t, reply)); n != 0 || id == 0 {
		t.Fatalf("aggregate reply: %d events, cursor id %d; want an empty first batch and a live cursor", n, id)
	}
	if cs.ID() != id {
		t.Fatalf("stream cursor id = %d, want %d", cs.ID(), id)
	}
	env.insert(t, env.coll, 1)
	nextRaw(t, cs)
	if n := len(env.rec.commands(0, "started", "killCursors")); n != 0 {
		t.Fatalf("driver sent %d killCursors", n)
	}
	gm := env.rec.commands(0, "started", "getMore")
	if len(gm) == 0 {
		t.Fatal("no getMore sent")
	}
	if got := gm[0].body.Lookup("getMore").Int64(); got != id {
		t.Fatalf("getMore on cursor %d, want %d", got, id)
	}
}

// TestProse8KillCursorsErrorsIgnored: the killCursors that the resume
// process sends for the old cursor may fail; that must not surface.
func TestProse8KillCursorsErrorsIgnored(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	cs := watch(t, c, env.coll, mongo.Pipeline{})
	defer cs.Close(c)
	env.failCommand(t, 2, bson.D{
		{Key: "failCommands", Value: bson.A{"getMore", "killCursors"}},
		{Key: "errorCode", Value: int32(6)},
		{Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}},
	})
	env.insert(t, env.coll, 1)
	nextRaw(t, cs)
	if got := eventKey(cs); got != int32(1) {
		t.Fatalf("event for _id %v, want 1", got)
	}
	if cs.Err() != nil {
		t.Fatalf("stream error: %v", cs.Err())
	}
	if n := len(env.rec.commands(0, "failed", "killCursors")); n != 1 {
		t.Fatalf("%d failed killCursors, want the 1 injected (was the resume path taken?)", n)
	}
	if n := len(env.rec.commands(0, "started", "aggregate")); n != 2 {
		t.Fatalf("%d aggregates, want the original and one resume", n)
	}
}

// TestProse11TokenIsPBRTAfterBatch: when the batch is empty, or has been
// iterated to its last event, the resume token is the postBatchResumeToken
// of the latest aggregate or getMore reply.
func TestProse11TokenIsPBRTAfterBatch(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	cs := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(20*time.Millisecond))
	defer cs.Close(c)
	agg := env.rec.lastCursorReply(t)
	if len(cursorBatch(t, agg)) != 0 {
		t.Fatal("first batch of a new stream is not empty")
	}
	if want := cursorPBRT(t, agg); !bytes.Equal(cs.ResumeToken(), want) {
		t.Fatalf("token after an empty first batch = %v, want its postBatchResumeToken %v", cs.ResumeToken(), want)
	}

	// Empty getMore batches: a write elsewhere moves the PBRT on.
	start := tokenDataOf(cs.ResumeToken())
	env.insert(t, env.db.Collection("other"), 1)
	for tokenDataOf(cs.ResumeToken()) <= start {
		if cs.TryNext(c) {
			t.Fatalf("stream returned an event for another collection: %v", cs.Current)
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		reply := env.rec.lastCursorReply(t)
		if want := cursorPBRT(t, reply); !bytes.Equal(cs.ResumeToken(), want) {
			t.Fatalf("token after an empty getMore = %v, want its postBatchResumeToken %v", cs.ResumeToken(), want)
		}
	}

	// A batch iterated to its last event.
	env.insert(t, env.coll, 1)
	nextRaw(t, cs)
	if cs.RemainingBatchLength() != 0 {
		t.Fatalf("%d events left in a batch that should hold one", cs.RemainingBatchLength())
	}
	checkToken(t, cs, env.rec)
}

// TestProse13TokenMidBatch: while a batch is being iterated, the resume
// token is the _id of the event last returned. Also checks that the PBRT of
// a batch cut short by batchSize does not run ahead of its last event: a
// stream resumed from it gets the rest.
func TestProse13TokenMidBatch(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	opTime := env.opTimeOfInsert(t, 0)
	env.insert(t, env.coll, 1, 2, 3, 4)
	cs := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(opTime).SetBatchSize(2))
	defer cs.Close(c)
	var afterFirstBatch bson.Raw
	midBatch := 0
	for i := 0; i < 5; i++ {
		nextRaw(t, cs)
		if got := eventKey(cs); got != int32(i) {
			t.Fatalf("event %d is for _id %v", i, got)
		}
		if cs.RemainingBatchLength() > 0 {
			midBatch++
		}
		checkToken(t, cs, env.rec)
		if i == 1 {
			afterFirstBatch = append(bson.Raw(nil), cs.ResumeToken()...)
		}
	}
	if midBatch == 0 {
		t.Fatal("no event was returned mid-batch; batches of 2 expected")
	}
	if n := len(cursorBatch(t, env.rec.commands(0, "succeeded", "aggregate")[0].body)); n != 2 {
		t.Fatalf("first batch holds %d events, want batchSize 2", n)
	}
	resumed := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(afterFirstBatch))
	defer resumed.Close(c)
	for want := int32(2); want < 5; want++ {
		nextRaw(t, resumed)
		if got := eventKey(resumed); got != want {
			t.Fatalf("resumed from the PBRT of the first batch: event for _id %v, want %d", got, want)
		}
	}
}

// TestProse14TokenBeforeIteration: after the aggregate and before any
// iteration, the resume token is the startAfter or resumeAfter the stream
// was opened with, or empty when it had neither; the first batch already
// holds the events after the resume point.
func TestProse14TokenBeforeIteration(t *testing.T) {
	type tc struct {
		name   string
		opts   func(tok bson.Raw, ts *bson.Timestamp) *options.ChangeStreamOptionsBuilder
		first  int32 // _id of the first event expected
		before func(tok bson.Raw) bson.Raw
	}
	cases := []tc{
		{"startAfter", func(tok bson.Raw, _ *bson.Timestamp) *options.ChangeStreamOptionsBuilder {
			return options.ChangeStream().SetStartAfter(tok)
		}, 1, func(tok bson.Raw) bson.Raw { return tok }},
		{"resumeAfter", func(tok bson.Raw, _ *bson.Timestamp) *options.ChangeStreamOptionsBuilder {
			return options.ChangeStream().SetResumeAfter(tok)
		}, 1, func(tok bson.Raw) bson.Raw { return tok }},
		{"neither", func(_ bson.Raw, ts *bson.Timestamp) *options.ChangeStreamOptionsBuilder {
			return options.ChangeStream().SetStartAtOperationTime(ts)
		}, 0, func(bson.Raw) bson.Raw { return nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newProseEnv(t, nil)
			c := ctx(t)
			opTime := env.opTimeOfInsert(t, 0)
			env.insert(t, env.coll, 1, 2, 3, 4)
			// The token of event 0, from a stream that starts at it.
			first := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(opTime))
			nextRaw(t, first)
			tok0 := eventID(t, first)
			first.Close(c)

			mark := env.rec.mark()
			cs := watch(t, c, env.coll, mongo.Pipeline{}, tc.opts(tok0, opTime))
			defer cs.Close(c)
			aggs := env.rec.commands(mark, "succeeded", "aggregate")
			if len(aggs) != 1 {
				t.Fatalf("%d aggregate replies, want 1", len(aggs))
			}
			if n, want := len(cursorBatch(t, aggs[0].body)), int(5-tc.first); n != want {
				t.Fatalf("first batch holds %d events, want the %d after the start point", n, want)
			}
			if got, want := cs.ResumeToken(), tc.before(tok0); !bytes.Equal(got, want) {
				t.Fatalf("token before iteration = %v, want %v", got, want)
			}
			for want := tc.first; want < 5; want++ {
				nextRaw(t, cs)
				if got := eventKey(cs); got != want {
					t.Fatalf("event for _id %v, want %d", got, want)
				}
				checkToken(t, cs, env.rec)
			}
		})
	}
}

// TestProse17StartAfterBeforeFirstResult: a stream opened with startAfter
// that has returned nothing yet must resume with startAfter, not
// resumeAfter: the token may be an invalidate token, which the server
// accepts only as startAfter.
//
// The Go driver deviates (MONGO-SEMANTICS §5.3): it always resumes with
// resumeAfter, here the postBatchResumeToken of the empty first batch,
// which a real server sets to the startAfter token itself. The test
// therefore asserts what the server must do for a conforming driver, and
// only logs what the Go driver sends.
func TestProse17StartAfterBeforeFirstResult(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	invTok := env.invalidateToken(t, env.coll)

	mark := env.rec.mark()
	cs := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invTok))
	defer cs.Close(c)
	agg := env.rec.commands(mark, "succeeded", "aggregate")[0].body
	if n, id := len(cursorBatch(t, agg)), cursorID(t, agg); n != 0 || id == 0 {
		t.Fatalf("startAfter an invalidate: %d events, cursor %d; want an empty first batch and a live cursor", n, id)
	}
	env.insert(t, env.coll, 1) // recreates the collection

	// What a conforming driver's resume sends: the same $changeStream with
	// startAfter. It must succeed and deliver the event after the invalidate.
	var reply bson.Raw
	err := env.db.RunCommand(c, bson.D{
		{Key: "aggregate", Value: env.coll.Name()},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "startAfter", Value: invTok}}}}}},
		{Key: "cursor", Value: bson.D{}},
	}).Decode(&reply)
	if err != nil {
		t.Fatalf("resume with startAfter an invalidate token: %v", err)
	}
	batch := cursorBatch(t, reply)
	if len(batch) != 1 || batch[0].Lookup("documentKey", "_id").Int32() != 1 {
		t.Fatalf("resume with startAfter: first batch %v, want the insert of _id 1", batch)
	}
	if id := cursorID(t, reply); id != 0 {
		_ = env.db.RunCommand(c, bson.D{{Key: "killCursors", Value: env.coll.Name()}, {Key: "cursors", Value: bson.A{id}}}).Err()
	}
	// Why the option matters: resumeAfter refuses an invalidate token.
	err = env.db.RunCommand(c, bson.D{
		{Key: "aggregate", Value: env.coll.Name()},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "resumeAfter", Value: invTok}}}}}},
		{Key: "cursor", Value: bson.D{}},
	}).Err()
	if !serverCode(err, 260) {
		t.Fatalf("resumeAfter an invalidate token: %v, want InvalidResumeToken (260)", err)
	}

	// The Go driver's own resume, observed but not asserted.
	env.resumableGetMoreError(t)
	mark = env.rec.mark()
	nc, cancel := context.WithTimeout(c, 10*time.Second)
	defer cancel()
	ok := cs.Next(nc)
	if resumes := env.rec.commands(mark, "started", "aggregate"); len(resumes) > 0 {
		t.Logf("Go driver resumed a startAfter stream with no results using $changeStream %v; Next = %v, err = %v (spec: startAfter, not resumeAfter)",
			changeStreamSpec(t, resumes[0].body), ok, cs.Err())
	}
}

// TestProse18ResumeAfterOnceResultsSeen: a stream opened with startAfter
// that has returned an event resumes with resumeAfter (the token of what
// it last returned) and without startAfter.
func TestProse18ResumeAfterOnceResultsSeen(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	invTok := env.invalidateToken(t, env.coll)
	cs := watch(t, c, env.coll, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invTok))
	defer cs.Close(c)
	env.insert(t, env.coll, 1) // recreates the collection
	nextRaw(t, cs)
	if got := eventKey(cs); got != int32(1) {
		t.Fatalf("first event for _id %v, want 1", got)
	}
	token := append(bson.Raw(nil), cs.ResumeToken()...)

	env.resumableGetMoreError(t)
	env.insert(t, env.coll, 2)
	mark := env.rec.mark()
	nextRaw(t, cs)
	if got := eventKey(cs); got != int32(2) {
		t.Fatalf("after the resume: event for _id %v, want 2", got)
	}
	aggs := env.rec.commands(mark, "started", "aggregate")
	if len(aggs) != 1 {
		t.Fatalf("%d resume aggregates, want 1", len(aggs))
	}
	spec := changeStreamSpec(t, aggs[0].body)
	if _, err := spec.LookupErr("startAfter"); err == nil {
		t.Fatalf("resume after a result kept startAfter: %v", spec)
	}
	if ra, ok := spec.Lookup("resumeAfter").DocumentOK(); !ok || !bytes.Equal(ra, token) {
		t.Fatalf("resumed with %v, want resumeAfter the last token %v", spec, token)
	}
}

// TestProse19SplitLargeEvent: with $changeStreamSplitLargeEvent, an event
// over 16 MiB (a 10 MiB document with its 10 MiB pre-image) arrives as
// fragments {fragment: 1, of: 2} and {fragment: 2, of: 2}.
func TestProse19SplitLargeEvent(t *testing.T) {
	env := newProseEnv(t, nil)
	c := ctx(t)
	var info struct {
		VersionArray []int32 `bson:"versionArray"`
	}
	if err := env.client.Database("admin").RunCommand(c, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	v := append(info.VersionArray, 0, 0, 0)
	major, minor, patch := v[0], v[1], v[2]
	if !(major >= 7 || major == 6 && minor == 0 && patch >= 9) {
		t.Skipf("server %d.%d.%d: needs >= 6.0.9 < 6.1 or >= 7.0", major, minor, patch)
	}
	err := env.db.CreateCollection(c, "split",
		options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}}))
	if err != nil {
		t.Fatal(err)
	}
	coll := env.db.Collection("split")
	const size = 10 * 1024 * 1024
	if _, err := coll.InsertOne(c, bson.D{{Key: "value", Value: strings.Repeat("q", size)}}); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, c, coll, mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}},
		options.ChangeStream().SetFullDocumentBeforeChange(options.Required))
	defer cs.Close(c)
	if _, err := coll.UpdateOne(c, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: strings.Repeat("z", size)}}}}); err != nil {
		t.Fatal(err)
	}
	for want := int32(1); want <= 2; want++ {
		nextRaw(t, cs)
		frag, _ := cs.Current.Lookup("splitEvent", "fragment").Int32OK()
		of, _ := cs.Current.Lookup("splitEvent", "of").Int32OK()
		if frag != want || of != 2 {
			t.Fatalf("event %d has splitEvent {fragment: %d, of: %d}, want {fragment: %d, of: 2}", want, frag, of, want)
		}
	}
}
