package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// writer is the seeded source workload: inserts, updates, replaces and
// deletes of a few hundred documents, about rate writes a second, each
// giving its document the next version in field v; some documents carry an
// expireAt a few seconds ahead, so the TTL monitor deletes them (and the
// server's clock is moved forward now and then, as srv.AdvanceClock
// does). Document ids are never reused, so a (document, version,
// operation) names one change. It records every acknowledged write.
type writer struct {
	coll *mongo.Collection
	srv  clock
	rng  *rand.Rand
	rate int
	// target is the number of live documents the mix steers towards.
	target int

	// ranged: chaos.docs is sharded on {k: 1}, so every document carries
	// k (a number in [0, 1000), never changed) and every write's filter
	// has it, as an application's targeted writes do.
	ranged bool
	// avoid, when set, names the documents the writer leaves alone (the
	// idle fault: those on the idle shard); new ones are drawn elsewhere.
	avoid atomic.Pointer[func(id string, k int) bool]

	mu      sync.Mutex
	history []write
	docs    map[string]*docState
	live    []string // ids of the documents believed live (TTL may have taken some)
	next    int      // the next document number
	err     error    // the first failed write: the run is void
}

type docState struct {
	k       int // the shard key (ranged runs)
	v       int
	ttl     bool // has an expireAt
	deleted bool // by the writer
	expired bool // a write found it gone: the TTL monitor deleted it
}

// clock is the emulator's clock, which the writer reads (expireAt) and
// moves forward.
type clock interface {
	Now() time.Time
	AdvanceClock(d time.Duration)
}

func newWriter(coll *mongo.Collection, srv clock, seed uint64, rate int, ranged bool) *writer {
	return &writer{coll: coll, srv: srv, rng: rand.New(rand.NewPCG(seed, 0x5eed)), rate: rate, target: 300, docs: map[string]*docState{}, ranged: ranged}
}

// setAvoid makes the writer leave alone the documents f names (nil: none).
func (w *writer) setAvoid(f func(id string, k int) bool) {
	if f == nil {
		w.avoid.Store(nil)
		return
	}
	w.avoid.Store(&f)
}

func (w *writer) avoided(id string, k int) bool {
	f := w.avoid.Load()
	return f != nil && (*f)(id, k)
}

// filter selects document id (with its shard key in a ranged run).
func (w *writer) filter(id string) bson.D {
	if w.ranged {
		return bson.D{{Key: "k", Value: w.docs[id].k}, {Key: "_id", Value: id}}
	}
	return bson.D{{Key: "_id", Value: id}}
}

// retry runs a write until it succeeds or fails for good: a state-change
// error or a closed connection (a shard's primary stepping down, in a
// sharded run) is tried again 50 ms later. The emulator fails such a
// command before running it, so a retried write is never applied twice.
// A replica-set run's writer meets no fault (its fail points are on the
// members' connections only), so it never retries.
func (w *writer) retry(ctx context.Context, at *time.Time, op func() error) error {
	for {
		*at = time.Now()
		err := op()
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// transient reports whether err is a primary stepping down or a
// connection closed: NotWritablePrimary, PrimarySteppedDown,
// InterruptedDueToReplStateChange, HostUnreachable and the like.
func transient(err error) bool {
	if mongo.IsNetworkError(err) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range []int{6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436} {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

// run writes until stop is closed; TTL documents are created only until
// ttlUntil, so that by the end of the run every one of them has expired.
// A write is never cancelled (a cancelled write may or may not have
// happened); one that fails ends the writes and voids the run.
func (w *writer) run(stop <-chan struct{}, ttlUntil time.Time) {
	tick := time.NewTicker(time.Second / time.Duration(w.rate))
	defer tick.Stop()
	lastAdvance := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := w.step(ctx, time.Now().Before(ttlUntil))
		cancel()
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		if time.Since(lastAdvance) > 2*time.Second && w.rng.IntN(2) == 0 {
			// The server's clock jumps a little: TTL expiries come sooner.
			// Leases (renewed every third of their 2 s TTL) survive it.
			w.srv.AdvanceClock(300 * time.Millisecond)
			lastAdvance = time.Now()
		}
	}
}

// step makes one write, chosen by the seeded mix.
func (w *writer) step(ctx context.Context, ttlAllowed bool) error {
	n := len(w.live)
	roll := w.rng.IntN(100)
	switch {
	case n < 20 || n < w.target && roll < 30 || roll < 15:
		return w.insert(ctx, ttlAllowed && w.rng.IntN(5) == 0)
	}
	id, ok := w.pick()
	switch {
	case !ok: // every document the writer picked is to be left alone
		return w.insert(ctx, ttlAllowed && w.rng.IntN(5) == 0)
	case roll < 70:
		return w.update(ctx, id)
	case roll < 88:
		return w.replace(ctx, id)
	default:
		return w.delete(ctx, id)
	}
}

// pick draws a live document, one not to be left alone (avoid); ok is
// false when 20 draws found none.
func (w *writer) pick() (string, bool) {
	for range 20 {
		id := w.live[w.rng.IntN(len(w.live))]
		if !w.avoided(id, w.docs[id].k) {
			return id, true
		}
	}
	return "", false
}

func (w *writer) record(doc string, v int, op string, at time.Time) {
	w.mu.Lock()
	w.history = append(w.history, write{Doc: doc, V: v, Op: op, At: at})
	w.mu.Unlock()
}

func (w *writer) insert(ctx context.Context, ttl bool) error {
	var id string
	var k int
	// A document to be left alone (avoid) is not written: its number is
	// skipped (ids are never reused, gaps are fine) or its k drawn again.
	for range 50 {
		id = fmt.Sprintf("d-%05d", w.next)
		w.next++
		if w.ranged {
			k = w.rng.IntN(1000)
		}
		if !w.avoided(id, k) {
			break
		}
	}
	doc := bson.D{{Key: "_id", Value: id}}
	if w.ranged {
		doc = append(doc, bson.E{Key: "k", Value: k})
	}
	doc = append(doc, bson.E{Key: "v", Value: 1}, bson.E{Key: "n", Value: w.rng.IntN(1000)})
	if ttl {
		doc = append(doc, bson.E{Key: "expireAt", Value: w.srv.Now().Add(time.Duration(1000+w.rng.IntN(4000)) * time.Millisecond)})
	}
	var at time.Time
	if err := w.retry(ctx, &at, func() error { _, err := w.coll.InsertOne(ctx, doc); return err }); err != nil {
		return fmt.Errorf("insert %s: %w", id, err)
	}
	w.record(id, 1, "insert", at)
	w.docs[id] = &docState{k: k, v: 1, ttl: ttl}
	w.live = append(w.live, id)
	return nil
}

func (w *writer) update(ctx context.Context, id string) error {
	st := w.docs[id]
	v := st.v + 1
	var at time.Time
	var res *mongo.UpdateResult
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}, {Key: "n", Value: w.rng.IntN(1000)}}}}
	err := w.retry(ctx, &at, func() (err error) { res, err = w.coll.UpdateOne(ctx, w.filter(id), set); return err })
	if err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	return w.applied(id, v, "update", at, res.MatchedCount)
}

func (w *writer) replace(ctx context.Context, id string) error {
	st := w.docs[id]
	v := st.v + 1
	var doc bson.D
	if w.ranged { // a replacement keeps the shard key
		doc = bson.D{{Key: "k", Value: st.k}}
	}
	doc = append(doc, bson.E{Key: "v", Value: v}, bson.E{Key: "r", Value: w.rng.IntN(1000)})
	if st.ttl { // a replacement keeps the document expiring
		doc = append(doc, bson.E{Key: "expireAt", Value: w.srv.Now().Add(time.Duration(500+w.rng.IntN(2000)) * time.Millisecond)})
	}
	var at time.Time
	var res *mongo.UpdateResult
	err := w.retry(ctx, &at, func() (err error) { res, err = w.coll.ReplaceOne(ctx, w.filter(id), doc); return err })
	if err != nil {
		return fmt.Errorf("replace %s: %w", id, err)
	}
	return w.applied(id, v, "replace", at, res.MatchedCount)
}

func (w *writer) delete(ctx context.Context, id string) error {
	st := w.docs[id]
	var at time.Time
	var res *mongo.DeleteResult
	err := w.retry(ctx, &at, func() (err error) { res, err = w.coll.DeleteOne(ctx, w.filter(id)); return err })
	if err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return w.applied(id, st.v+1, "delete", at, res.DeletedCount)
}

// applied records a write that matched its document; one that matched
// nothing found the document expired (the TTL monitor deleted it).
func (w *writer) applied(id string, v int, op string, at time.Time, n int64) error {
	st := w.docs[id]
	switch {
	case n == 1 && op != "delete":
		w.record(id, v, op, at)
		st.v = v
		return nil
	case n == 1:
		w.record(id, v, op, at)
		st.deleted = true
	case !st.ttl:
		return fmt.Errorf("%s of %s matched no document, and it has no expireAt", op, id)
	default:
		st.expired = true
	}
	for i, l := range w.live {
		if l == id {
			w.live[i] = w.live[len(w.live)-1]
			w.live = w.live[:len(w.live)-1]
			break
		}
	}
	return nil
}

// finish reads the source once the writes stopped: each document with an
// expireAt that the writer did not delete and that is gone was deleted by
// the TTL monitor, a change finish adds to the history (with the next
// version and no time). It returns the history and the live documents'
// versions, and fails if the source holds what the writer did not write.
func (w *writer) finish(ctx context.Context) ([]write, map[string]int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, nil, w.err
	}
	cur, err := w.coll.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "v", Value: 1}}))
	if err != nil {
		return nil, nil, err
	}
	var docs []struct {
		ID string `bson:"_id"`
		V  int    `bson:"v"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, nil, err
	}
	live := map[string]int{}
	for _, d := range docs {
		live[d.ID] = d.V
	}
	history := append([]write(nil), w.history...)
	for id, st := range w.docs {
		v, present := live[id]
		switch {
		case present && (st.deleted || st.expired):
			return nil, nil, fmt.Errorf("%s is in the source although it was deleted", id)
		case present && v != st.v:
			return nil, nil, fmt.Errorf("%s has v%d in the source, the writer gave it v%d", id, v, st.v)
		case !present && !st.deleted && !st.ttl:
			return nil, nil, fmt.Errorf("%s is gone from the source although nothing deleted it", id)
		case !present && !st.deleted:
			history = append(history, write{Doc: id, V: st.v + 1, Op: "delete", TTL: true})
		}
	}
	for id := range live {
		if w.docs[id] == nil {
			return nil, nil, fmt.Errorf("%s is in the source, the writer never wrote it", id)
		}
	}
	return history, live, nil
}

// pendingTTL counts the documents with an expireAt still in the source.
func pendingTTL(ctx context.Context, coll *mongo.Collection) (int64, error) {
	return coll.CountDocuments(ctx, bson.D{{Key: "expireAt", Value: bson.D{{Key: "$exists", Value: true}}}})
}
