package lease_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/leakcheck"
	"github.com/ferry-io/ferry/lease"
)

func TestMain(m *testing.M) {
	// No goroutine may outlive the tests: not a Held's renewals, not a
	// Member's heartbeats, not the emulator's, not the driver's.
	leakcheck.VerifyTestMain(m)
}

var serverEpoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// env is one test's database: on the emulator (srv != nil) or on the real
// replica set at $FERRY_TEST_MONGODB_URI.
type env struct {
	uri string
	srv *emutest.Server
	db  *mongo.Database
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// The emulator's clock stands still unless a test moves it with
	// AdvanceClock, so real time spent in a test never expires a lease.
	uri, srv := emutest.URI(t, emutest.FrozenClock(serverEpoch))
	e := &env{uri: uri, srv: srv}
	e.db = e.client(t, "", nil).Database("lease_" + sanitize(t.Name()))
	if err := e.db.Drop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return e
}

// needEmulator skips tests that move the server's clock or fail commands
// from Go.
func (e *env) needEmulator(t *testing.T, why string) {
	t.Helper()
	if e.srv == nil {
		t.Skipf("needs the emulator's %s; %s points at a real server", why, emutest.EnvURI)
	}
}

// client connects a new client, with an application name (for fail points
// aimed at one member) and a command monitor when given.
func (e *env) client(t *testing.T, app string, mon *event.CommandMonitor) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(e.uri)
	if app != "" {
		o.SetAppName(app)
	}
	if mon != nil {
		o.SetMonitor(mon)
	}
	c, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// store returns a store on the test's database through a client of its own.
func (e *env) store(t *testing.T, app string, opts ...lease.Option) *lease.Store {
	t.Helper()
	return e.storeOn(t, e.client(t, app, nil), opts...)
}

func (e *env) storeOn(t *testing.T, c *mongo.Client, opts ...lease.Option) *lease.Store {
	t.Helper()
	s, err := lease.New(c.Database(e.db.Name()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func sanitize(name string) string {
	r := strings.NewReplacer("/", "_", " ", "_", ".", "_", "$", "_")
	s := r.Replace(name)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// fakeClock is a manual clock. After registers a waiter that Advance fires;
// changes are broadcast so that a test can wait, without sleeping, until a
// background loop is parked on the clock again.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	changed chan struct{}
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(start time.Time) *fakeClock {
	return &fakeClock{now: start, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	c.broadcast()
	return ch
}

// Advance moves the clock and fires the waiters that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
	c.broadcast()
}

func (c *fakeClock) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// settle waits until a loop is parked on the clock (a pending waiter) or
// done is closed (the loop ended).
func (c *fakeClock) settle(t *testing.T, done <-chan struct{}) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		n, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-changed:
		case <-done:
			return
		case <-timeout:
			t.Fatal("the background loop neither waited on the clock nor ended within 20s")
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
