package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
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
	srv  *mongotest.Server
	rng  *rand.Rand
	rate int
	// target is the number of live documents the mix steers towards.
	target int

	mu      sync.Mutex
	history []write
	docs    map[string]*docState
	live    []string // ids of the documents believed live (TTL may have taken some)
	next    int      // the next document number
	err     error    // the first failed write: the run is void
}

type docState struct {
	v       int
	ttl     bool // has an expireAt
	deleted bool // by the writer
	expired bool // a write found it gone: the TTL monitor deleted it
}

func newWriter(coll *mongo.Collection, srv *mongotest.Server, seed uint64, rate int) *writer {
	return &writer{coll: coll, srv: srv, rng: rand.New(rand.NewPCG(seed, 0x5eed)), rate: rate, target: 300, docs: map[string]*docState{}}
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
	case roll < 70:
		return w.update(ctx, w.pick())
	case roll < 88:
		return w.replace(ctx, w.pick())
	default:
		return w.delete(ctx, w.pick())
	}
}

func (w *writer) pick() string { return w.live[w.rng.IntN(len(w.live))] }

func (w *writer) record(doc string, v int, op string, at time.Time) {
	w.mu.Lock()
	w.history = append(w.history, write{Doc: doc, V: v, Op: op, At: at})
	w.mu.Unlock()
}

func (w *writer) insert(ctx context.Context, ttl bool) error {
	id := fmt.Sprintf("d-%05d", w.next)
	w.next++
	doc := bson.D{{Key: "_id", Value: id}, {Key: "v", Value: 1}, {Key: "n", Value: w.rng.IntN(1000)}}
	if ttl {
		doc = append(doc, bson.E{Key: "expireAt", Value: w.srv.Now().Add(time.Duration(1000+w.rng.IntN(4000)) * time.Millisecond)})
	}
	at := time.Now()
	if _, err := w.coll.InsertOne(ctx, doc); err != nil {
		return fmt.Errorf("insert %s: %w", id, err)
	}
	w.record(id, 1, "insert", at)
	w.docs[id] = &docState{v: 1, ttl: ttl}
	w.live = append(w.live, id)
	return nil
}

func (w *writer) update(ctx context.Context, id string) error {
	st := w.docs[id]
	v := st.v + 1
	at := time.Now()
	res, err := w.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}, {Key: "n", Value: w.rng.IntN(1000)}}}})
	if err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	return w.applied(id, v, "update", at, res.MatchedCount)
}

func (w *writer) replace(ctx context.Context, id string) error {
	st := w.docs[id]
	v := st.v + 1
	doc := bson.D{{Key: "v", Value: v}, {Key: "r", Value: w.rng.IntN(1000)}}
	if st.ttl { // a replacement keeps the document expiring
		doc = append(doc, bson.E{Key: "expireAt", Value: w.srv.Now().Add(time.Duration(500+w.rng.IntN(2000)) * time.Millisecond)})
	}
	at := time.Now()
	res, err := w.coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, doc)
	if err != nil {
		return fmt.Errorf("replace %s: %w", id, err)
	}
	return w.applied(id, v, "replace", at, res.MatchedCount)
}

func (w *writer) delete(ctx context.Context, id string) error {
	st := w.docs[id]
	at := time.Now()
	res, err := w.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
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
