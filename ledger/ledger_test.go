package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/ledger"
)

func TestSeenRecordRoundTrip(t *testing.T) {
	client, srv := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	ctx := t.Context()
	id := eventID("e1")

	if seen, err := s.Seen(ctx, "orders", id); err != nil || seen {
		t.Fatalf("Seen before Record = %v, %v; want false", seen, err)
	}
	if err := s.Record(ctx, "orders", id, 3, 7); err != nil {
		t.Fatal(err)
	}
	if seen, err := s.Seen(ctx, "orders", id); err != nil || !seen {
		t.Fatalf("Seen after Record = %v, %v; want true", seen, err)
	}
	// The ledger is per stream.
	if seen, err := s.Seen(ctx, "payments", id); err != nil || seen {
		t.Fatalf("Seen in another stream = %v, %v; want false", seen, err)
	}
	e, err := s.Get(ctx, "orders", id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Stream != "orders" || e.EventID != id || e.Partition != 3 || e.Epoch != 7 || e.AppliedAt.IsZero() {
		t.Fatalf("Get = %+v", e)
	}
	if srv != nil {
		if d := srv.Now().Sub(e.AppliedAt); d < 0 || d > time.Minute {
			t.Fatalf("AppliedAt %v is not the server's clock (%v)", e.AppliedAt, srv.Now())
		}
	}
	if _, err := s.Get(ctx, "orders", eventID("other")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get of an absent entry: err = %v, want ErrNotFound", err)
	}
	if n, err := s.Count(ctx, "orders"); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}

func TestRecordTwiceKeepsFirstEntry(t *testing.T) {
	client, srv := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	ctx := t.Context()
	id := eventID("e1")
	if err := s.Record(ctx, "orders", id, 1, 4); err != nil {
		t.Fatal(err)
	}
	first, err := s.Get(ctx, "orders", id)
	if err != nil {
		t.Fatal(err)
	}
	if srv != nil {
		srv.AdvanceClock(time.Hour)
	}
	// A replay under a later lease records again: not an error.
	if err := s.Record(ctx, "orders", id, 2, 5); err != nil {
		t.Fatalf("second Record: %v", err)
	}
	second, err := s.Get(ctx, "orders", id)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatalf("second Record changed the entry: %+v, was %+v", second, first)
	}
	if n, _ := s.Count(ctx, "orders"); n != 1 {
		t.Fatalf("Count = %d after recording one event twice", n)
	}
}

func TestRecordNewReportsDuplicate(t *testing.T) {
	client, _ := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	ctx := t.Context()
	id := eventID("e1")
	inserted, err := s.RecordNew(ctx, "orders", id, 0, 1)
	if err != nil || !inserted {
		t.Fatalf("first RecordNew = %v, %v; want true", inserted, err)
	}
	inserted, err = s.RecordNew(ctx, "orders", id, 0, 1)
	if err != nil || inserted {
		t.Fatalf("second RecordNew = %v, %v; want false, nil", inserted, err)
	}
	// Record after RecordNew, and RecordNew after Record, agree.
	id2 := eventID("e2")
	if err := s.Record(ctx, "orders", id2, 0, 1); err != nil {
		t.Fatal(err)
	}
	if inserted, err := s.RecordNew(ctx, "orders", id2, 0, 1); err != nil || inserted {
		t.Fatalf("RecordNew after Record = %v, %v; want false, nil", inserted, err)
	}
}

// TestRecordNewConcurrent: many callers recording one event outside
// transactions; exactly one is told it inserted.
func TestRecordNewConcurrent(t *testing.T) {
	client, _ := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	id := eventID("race")
	const n = 8
	var wg sync.WaitGroup
	results := make(chan bool, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inserted, err := s.RecordNew(t.Context(), "orders", id, 0, int64(i))
			if err != nil {
				errs <- err
				return
			}
			results <- inserted
		}()
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	winners := 0
	for inserted := range results {
		if inserted {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d callers were told they inserted, want 1", winners)
	}
}

// TestDocumentLayout pins the stored layout operators read: no token, no
// document, the server's date.
func TestDocumentLayout(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db, ledger.Collection("applied"))
	id := eventID("e1")
	if err := s.Record(t.Context(), "shop.orders", id, 5, 9); err != nil {
		t.Fatal(err)
	}
	if ledger.ID("shop.orders", id) != "shop.orders/"+id {
		t.Fatalf("ID = %q", ledger.ID("shop.orders", id))
	}
	var doc bson.D
	if err := db.Collection("applied").FindOne(t.Context(), bson.D{{Key: "_id", Value: "shop.orders/" + id}}).Decode(&doc); err != nil {
		t.Fatalf("entry not found under _id stream/event in collection applied: %v", err)
	}
	raw, _ := bson.Marshal(doc)
	want := map[string]bson.Type{
		"_id": bson.TypeString, "stream": bson.TypeString, "event": bson.TypeString,
		"partition": bson.TypeInt64, "epoch": bson.TypeInt64, "appliedAt": bson.TypeDateTime,
	}
	if len(doc) != len(want) {
		t.Errorf("entry has fields %v, want exactly %v", doc, want)
	}
	for field, typ := range want {
		if got := bson.Raw(raw).Lookup(field).Type; got != typ {
			t.Errorf("field %s has type %v, want %v", field, got, typ)
		}
	}
	if got, _ := bson.Raw(raw).Lookup("event").StringValueOK(); got != id {
		t.Errorf("event = %q, want %q", got, id)
	}
}

func TestCountAndForget(t *testing.T) {
	client, _ := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	ctx := t.Context()
	// "a/b" shares the _id prefix "a/" with stream "a"; "a0" lies just past
	// the range.
	for stream, n := range map[string]int{"a": 3, "a/b": 2, "a0": 1, "b": 1} {
		for i := range n {
			if err := s.Record(ctx, stream, eventID(stream+string(rune('0'+i))), 0, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for stream, want := range map[string]int64{"a": 3, "a/b": 2, "a0": 1, "b": 1, "c": 0} {
		if n, err := s.Count(ctx, stream); err != nil || n != want {
			t.Errorf("Count(%q) = %d, %v; want %d", stream, n, err, want)
		}
	}
	id := eventID("a0")
	if err := s.Forget(ctx, "a", id); err != nil {
		t.Fatal(err)
	}
	if seen, _ := s.Seen(ctx, "a", id); seen {
		t.Fatal("Seen after Forget")
	}
	if n, _ := s.Count(ctx, "a"); n != 2 {
		t.Fatalf("Count after Forget = %d, want 2", n)
	}
	if err := s.Forget(ctx, "a", id); err != nil {
		t.Fatalf("Forget of an absent entry: %v", err)
	}
	// A forgotten event is new again.
	if inserted, err := s.RecordNew(ctx, "a", id, 0, 2); err != nil || !inserted {
		t.Fatalf("RecordNew after Forget = %v, %v; want true", inserted, err)
	}
}

// ttlIndex returns the expireAfterSeconds of the ledger's TTL index, -1 if
// there is none.
func ttlIndex(t *testing.T, coll *mongo.Collection) int64 {
	t.Helper()
	specs, err := coll.Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if sp.Name == ledger.IndexName {
			var keys bson.D
			if err := bson.Unmarshal(sp.KeysDocument, &keys); err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || keys[0].Key != "appliedAt" {
				t.Fatalf("index %s has keys %v", sp.Name, keys)
			}
			if sp.ExpireAfterSeconds == nil {
				return -1
			}
			return int64(*sp.ExpireAfterSeconds)
		}
	}
	return -1
}

func TestTTLIndex(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db)
	if got, want := ttlIndex(t, s.Collection()), int64(7*24*3600); got != want {
		t.Fatalf("default TTL index expireAfterSeconds = %d, want %d", got, want)
	}
	if s.Retention() != ledger.DefaultRetention || s.Collection().Name() != ledger.DefaultCollection {
		t.Fatalf("defaults: retention %v, collection %q", s.Retention(), s.Collection().Name())
	}
	// Another retention changes the index (collMod); the same one is a no-op.
	for _, r := range []time.Duration{90 * time.Minute, 90 * time.Minute, 1500 * time.Millisecond} {
		s = newStore(t, db, ledger.Retention(r))
		want := int64((r + time.Second - 1) / time.Second)
		if got := ttlIndex(t, s.Collection()); got != want {
			t.Fatalf("after New with Retention(%v): expireAfterSeconds = %d, want %d", r, got, want)
		}
	}
}

// TestTTLPruning: entries expire by age through the server's TTL monitor.
func TestTTLPruning(t *testing.T) {
	client, srv := emutest.Client(t, emutest.TTLMonitorInterval(10*time.Millisecond))
	if srv == nil {
		t.Skip("needs the emulator's clock: a real server's TTL monitor runs every 60 s on its own clock")
	}
	s := newStore(t, freshDB(t, client), ledger.Retention(time.Hour))
	ctx := t.Context()
	old, young := eventID("old"), eventID("young")
	if err := s.Record(ctx, "orders", old, 0, 1); err != nil {
		t.Fatal(err)
	}
	srv.AdvanceClock(50 * time.Minute)
	if err := s.Record(ctx, "orders", young, 0, 1); err != nil {
		t.Fatal(err)
	}
	// The old entry is now 70 minutes old, the young one 20.
	srv.AdvanceClock(20 * time.Minute)
	// The TTL monitor is the server's background work: a test cannot join it.
	poll.Until(t, 10*time.Second, func() error {
		if seen, err := s.Seen(ctx, "orders", old); err != nil || seen {
			return fmt.Errorf("the TTL monitor did not delete the expired entry: Seen = %v, %v", seen, err)
		}
		return nil
	})
	// The pass that deleted the old entry left the young one.
	if seen, err := s.Seen(ctx, "orders", young); err != nil || !seen {
		t.Fatalf("entry younger than the retention was pruned: Seen = %v, %v", seen, err)
	}
	srv.AdvanceClock(41 * time.Minute)
	poll.Until(t, 10*time.Second, func() error {
		if n, err := s.Count(ctx, "orders"); err != nil || n != 0 {
			return fmt.Errorf("the TTL monitor did not delete the second entry: Count = %d, %v", n, err)
		}
		return nil
	})
}

func TestInvalidArguments(t *testing.T) {
	if _, err := ledger.New(t.Context(), nil); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("New(nil): err = %v, want ErrInvalid", err)
	}
	// Bad options fail before anything is sent: an unconnected client will do.
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database("x")
	for name, opt := range map[string]ledger.Option{
		"empty collection":  ledger.Collection(""),
		"dollar collection": ledger.Collection("a$b"),
		"system collection": ledger.Collection("system.views"),
		"zero retention":    ledger.Retention(0),
		"sub-second":        ledger.Retention(time.Millisecond),
		"huge retention":    ledger.Retention(1 << 62),
		"nil option":        nil,
	} {
		if _, err := ledger.New(t.Context(), db, opt); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}

	// Validated once, every problem named; a later option overrides an
	// earlier one.
	_, err = ledger.New(t.Context(), db, ledger.Retention(0), ledger.Collection(""), ledger.Retention(time.Hour), ledger.Collection("$x"))
	if want := `ledger: invalid argument: Collection: a collection name cannot contain '$' or NUL, got "$x"`; err == nil || err.Error() != want {
		t.Errorf("New = %v, want %q", err, want)
	}

	mc, _ := emutest.Client(t)
	s := newStore(t, freshDB(t, mc))
	ctx := t.Context()
	id := eventID("e")
	bad := []struct {
		name          string
		stream, event string
		partition     int
		epoch         int64
	}{
		{"empty stream", "", id, 0, 0},
		{"NUL stream", "a\x00b", id, 0, 0},
		{"bad UTF-8 stream", "a\xff", id, 0, 0},
		{"empty event", "s", "", 0, 0},
		{"slash event", "s", "a/b", 0, 0},
		{"negative partition", "s", id, -1, 0},
		{"negative epoch", "s", id, 0, -1},
	}
	for _, b := range bad {
		if _, err := s.RecordNew(ctx, b.stream, b.event, b.partition, b.epoch); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("RecordNew %s: err = %v, want ErrInvalid", b.name, err)
		}
		if b.partition < 0 || b.epoch < 0 {
			continue
		}
		if _, err := s.Seen(ctx, b.stream, b.event); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Seen %s: err = %v, want ErrInvalid", b.name, err)
		}
		if err := s.Forget(ctx, b.stream, b.event); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Forget %s: err = %v, want ErrInvalid", b.name, err)
		}
		if _, err := s.Get(ctx, b.stream, b.event); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Get %s: err = %v, want ErrInvalid", b.name, err)
		}
	}
	if _, err := s.Count(ctx, ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Count(\"\"): err = %v, want ErrInvalid", err)
	}
	if n, _ := s.Count(ctx, "s"); n != 0 {
		t.Errorf("invalid calls wrote %d entries", n)
	}
}

// TestErrorsNameTheEntry: a server error says which stream and event.
func TestErrorsNameTheEntry(t *testing.T) {
	client, _ := emutest.Client(t)
	s := newStore(t, freshDB(t, client))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.RecordNew(ctx, "orders", eventID("e"), 0, 0)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `"orders"`) {
		t.Fatalf("RecordNew with a cancelled context: err = %v", err)
	}
}

// TestCountApplied: CountApplied counts a stream's entries by appliedAt,
// from inclusive to exclusive, and no other stream's.
func TestCountApplied(t *testing.T) {
	client, srv := emutest.Client(t)
	if srv == nil {
		t.Skip("needs the emulator's clock (AdvanceClock)")
	}
	s := newStore(t, freshDB(t, client))
	ctx := t.Context()
	// appliedAt has milliseconds.
	t0 := srv.Now().Truncate(time.Millisecond)
	for i := range 3 {
		if err := s.Record(ctx, "a", eventID(fmt.Sprint("early", i)), 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(ctx, "b", eventID("other stream"), 0, 1); err != nil {
		t.Fatal(err)
	}
	srv.AdvanceClock(time.Minute)
	t1 := srv.Now().Truncate(time.Millisecond)
	for i := range 2 {
		if err := s.Record(ctx, "a", eventID(fmt.Sprint("late", i)), 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		stream   string
		from, to time.Time
		want     int64
	}{
		{"a", t0, t1, 3},
		{"a", t0, t1.Add(time.Second), 5},
		{"a", t1, t1.Add(time.Second), 2},
		{"a", t1.Add(time.Second), t1.Add(time.Hour), 0},
		{"a", t1, t0, 0},
		{"b", t0, t1, 1},
		{"c", t0, t1.Add(time.Hour), 0},
	} {
		if n, err := s.CountApplied(ctx, c.stream, c.from, c.to); err != nil || n != c.want {
			t.Errorf("CountApplied(%q, t0%+v, t0%+v) = %d, %v; want %d", c.stream, c.from.Sub(t0), c.to.Sub(t0), n, err, c.want)
		}
	}
	if _, err := s.CountApplied(ctx, "", t0, t1); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("CountApplied of an empty stream name: %v, want ErrInvalid", err)
	}
}
