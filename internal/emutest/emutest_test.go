package emutest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// No goroutine may outlive the tests: not the exec package's, not the
	// control client's.
	leakcheck.VerifyTestMain(m)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func connect(t *testing.T, uri, app string) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(uri)
	if app != "" {
		o.SetAppName(app)
	}
	c, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// TestClockControls: on a frozen clock, AdvanceClock moves what Now and
// $$NOW read, and nothing else does.
func TestClockControls(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	client, srv := Client(t, FrozenClock(at))
	if srv == nil {
		t.Skipf("needs the emulator; %s points at a real server", EnvURI)
	}
	if got := srv.Now(); !got.Equal(at) {
		t.Fatalf("Now = %v, want the frozen %v", got, at)
	}
	srv.AdvanceClock(90*time.Minute + 250*time.Millisecond)
	want := at.Add(90*time.Minute + 250*time.Millisecond)
	if got := srv.Now(); !got.Equal(want) {
		t.Fatalf("Now after AdvanceClock = %v, want %v", got, want)
	}
	var doc struct {
		Now time.Time `bson:"now"`
	}
	cur, err := client.Database("admin").Aggregate(ctx(t), bson.A{
		bson.D{{Key: "$documents", Value: bson.A{bson.D{}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "now", Value: "$$NOW"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx(t)) {
		t.Fatal(cur.Err())
	}
	if err := cur.Decode(&doc); err != nil || !doc.Now.Equal(want) {
		t.Fatalf("$$NOW = %v (%v), want %v", doc.Now, err, want)
	}
	cur.Close(ctx(t))
}

// TestFailCommand: the fail point hits the named commands of the named
// application only, as many times as asked, with the labels asked; and
// ClearFailPoints turns it off.
func TestFailCommand(t *testing.T) {
	srv := New(t)
	a := connect(t, srv.URI(), "a").Database("d").Collection("c")
	b := connect(t, srv.URI(), "b").Database("d").Collection("c")
	srv.FailCommand(FailPoint{Commands: []string{"insert"}, ErrorCode: 2, ErrorLabels: []string{"TestLabel"}, AppName: "a", Times: 2})
	if _, err := b.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "b"}}); err != nil {
		t.Fatalf("insert by another application: %v; the fail point is a's", err)
	}
	for i := range 2 {
		_, err := a.InsertOne(ctx(t), bson.D{{Key: "_id", Value: i}})
		var we mongo.WriteException
		var ce mongo.CommandError
		code := int32(0)
		switch {
		case errors.As(err, &ce):
			code = ce.Code
			if len(ce.Labels) != 1 || ce.Labels[0] != "TestLabel" {
				t.Fatalf("labels %v, want the fail point's [TestLabel]", ce.Labels)
			}
		case errors.As(err, &we):
			t.Fatalf("insert %d: a write exception %v, want the fail point's command error", i, we)
		}
		if code != 2 {
			t.Fatalf("insert %d by a: %v; want the fail point's BadValue (2)", i, err)
		}
	}
	if _, err := a.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("third insert by a: %v; the fail point fires twice", err)
	}
	srv.FailCommand(FailPoint{Commands: []string{"find"}, ErrorCode: 2})
	if err := b.FindOne(ctx(t), bson.D{}).Err(); err == nil {
		t.Fatal("find under an always-on fail point succeeded")
	}
	srv.ClearFailPoints()
	if err := b.FindOne(ctx(t), bson.D{}).Err(); err != nil {
		t.Fatalf("find after ClearFailPoints: %v", err)
	}
}

// TestFailRetryableWrites: the write is applied, its reply lost; the
// driver's retry gets the first attempt's result and nothing is written
// twice.
func TestFailRetryableWrites(t *testing.T) {
	srv := New(t)
	var mu sync.Mutex
	var failed []string
	mon := &event.CommandMonitor{Failed: func(_ context.Context, ev *event.CommandFailedEvent) {
		mu.Lock()
		failed = append(failed, ev.CommandName)
		mu.Unlock()
	}}
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	coll := c.Database("d").Collection("c")
	srv.FailRetryableWrites(RetryableWriteFailPoint{Times: 1})
	res, err := coll.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		t.Fatalf("update whose reply was lost: %v; the driver retries it", err)
	}
	mu.Lock()
	nFailed := len(failed)
	mu.Unlock()
	if nFailed != 1 || res.UpsertedCount != 1 {
		t.Fatalf("%d failed attempts, upserted %d; want 1 lost reply and the first attempt's upsert", nFailed, res.UpsertedCount)
	}
	var doc struct{ N int }
	if err := coll.FindOne(ctx(t), bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.N != 1 {
		t.Fatalf("n = %d (%v), want 1: the retry must not apply the write again", doc.N, err)
	}
}

// TestOptions: the options reach the emulator (the oplog bound loses a
// change stream's history), and a bad one fails with the emulator's
// message naming its flag.
func TestOptions(t *testing.T) {
	srv := New(t, OplogMaxEntries(3), ServerVersion("8.2.1"))
	c := connect(t, srv.URI(), "")
	var bi struct{ Version string }
	if err := c.Database("admin").RunCommand(ctx(t), bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil || bi.Version != "8.2.1" {
		t.Fatalf("buildInfo version %q (%v), want 8.2.1", bi.Version, err)
	}
	coll := c.Database("d").Collection("c")
	cs, err := coll.Watch(ctx(t), mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx(t)) {
		t.Fatal(cs.Err())
	}
	token := cs.ResumeToken()
	cs.Close(ctx(t))
	for i := 1; i < 10; i++ {
		if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err = coll.Watch(ctx(t), mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token))
	if err == nil {
		cs.Next(ctx(t))
		err = cs.Err()
		cs.Close(ctx(t))
	}
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 286 {
		t.Fatalf("resume past a 3-entry oplog: %v; want ChangeStreamHistoryLost (286)", err)
	}

	_, err = start(t, []Option{ServerVersion("4.2.0")})
	if err == nil || !strings.Contains(err.Error(), "-server-version") {
		t.Fatalf("start with ServerVersion 4.2.0: %v; want the emulator's error naming -server-version", err)
	}
}

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCrashFailsTheTest: an emulator that exits before its test ends
// fails the test, with what it printed; one killed at the end does not.
func TestCrashFailsTheTest(t *testing.T) {
	rec := &recorder{TB: t}
	srv, err := start(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if len(rec.errors) != 0 {
		t.Fatalf("Close of a running emulator reported %q", rec.errors)
	}

	srv, err = start(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil { // it exits, status 0
		t.Fatal(err)
	}
	// Its stdout ends when it has exited.
	_ = srv.stdout.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(srv.stdout); err != nil {
		t.Fatalf("the emulator did not exit after SIGTERM: %v", err)
	}
	srv.Close()
	srv.Close() // a second Close does nothing
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "exited by itself") {
		t.Fatalf("Close of an emulator that exited: reported %q; want one error saying it exited by itself", rec.errors)
	}
}

// TestURIFromEnvironment: with $FERRY_TEST_MONGODB_URI set, URI and
// Client use it and start no emulator.
func TestURIFromEnvironment(t *testing.T) {
	srv := New(t)
	t.Setenv(EnvURI, srv.URI()+"&appName=fromenv")
	uri, s := URI(t)
	if s != nil || uri != srv.URI()+"&appName=fromenv" {
		t.Fatalf("URI = %q, %v; want $%s and no emulator", uri, s, EnvURI)
	}
	c, s := Client(t)
	if s != nil {
		t.Fatal("Client started an emulator although $" + EnvURI + " is set")
	}
	if err := c.Ping(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStartup is what a test pays for its own emulator: start it,
// connect, one command, disconnect, kill and reap it.
func BenchmarkStartup(b *testing.B) {
	if _, err := binary(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		srv, err := start(b, nil)
		if err != nil {
			b.Fatal(err)
		}
		c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Ping(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		_ = c.Disconnect(context.Background())
		srv.Close()
	}
}
