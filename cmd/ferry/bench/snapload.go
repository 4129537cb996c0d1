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

	"github.com/ferry-io/ferry"
)

// writeStats counts what a writer did.
type writeStats struct {
	Inserts int64         `json:"inserts"`
	Updates int64         `json:"updates"` // updates that matched a document
	Deletes int64         `json:"deletes"` // deletes that removed one
	Misses  int64         `json:"misses"`  // updates and deletes of a document already deleted
	Took    time.Duration `json:"took_ns"`
}

func (s writeStats) total() int64 { return s.Inserts + s.Updates + s.Deletes + s.Misses }

func (s writeStats) rate() float64 {
	if s.Took <= 0 {
		return 0
	}
	return float64(s.total()) / s.Took.Seconds()
}

// writer changes the collection at a steady rate until stopped: a
// quarter inserts of new documents, half updates and a quarter deletes of
// documents drawn at random from every _id so far (the snapshot is
// reading them). writerWorkers goroutines share the rate, each on its own
// schedule, so that one slow round trip does not hold the others.
type writer struct {
	stopOnce sync.Once
	quit     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	stats    writeStats
	err      error
	start    time.Time
}

const writerWorkers = 4

func startWriter(ctx context.Context, coll *mongo.Collection, docs int, perSecond float64, size int) *writer {
	w := &writer{quit: make(chan struct{}), start: time.Now()}
	var next atomic.Int64 // the next insert's _id
	next.Store(int64(docs))
	every := time.Duration(float64(time.Second) * writerWorkers / perSecond)
	for k := range writerWorkers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(docs), uint64(k)))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-w.quit:
					return
				case <-ctx.Done():
					w.fail(ctx.Err())
					return
				case <-tick.C:
				}
				var s writeStats
				var err error
				switch op := rng.IntN(4); {
				case op == 0:
					_, err = coll.InsertOne(ctx, newDoc(next.Add(1)-1, size))
					s.Inserts++
				case op <= 2:
					var r *mongo.UpdateResult
					r, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: rng.Int64N(next.Load())}},
						bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: int32(1)}}}, {Key: "$set", Value: bson.D{{Key: "w", Value: rng.Int64()}}}})
					if err == nil && r.MatchedCount == 0 {
						s.Misses++
					} else {
						s.Updates++
					}
				default:
					var r *mongo.DeleteResult
					r, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: rng.Int64N(next.Load())}})
					if err == nil && r.DeletedCount == 0 {
						s.Misses++
					} else {
						s.Deletes++
					}
				}
				if err != nil {
					w.fail(fmt.Errorf("the writer: %w", err))
					return
				}
				w.mu.Lock()
				w.stats.Inserts += s.Inserts
				w.stats.Updates += s.Updates
				w.stats.Deletes += s.Deletes
				w.stats.Misses += s.Misses
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// stop ends the writer and returns what it did.
func (w *writer) stop() (writeStats, error) {
	w.stopOnce.Do(func() { close(w.quit) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Took = time.Since(w.start)
	return w.stats, w.err
}

// sampler calls f every interval until stopped, and keeps its first error.
type sampler struct {
	quit chan struct{}
	done chan struct{}
	err  error
}

func startSampler(ctx context.Context, every time.Duration, f func(ctx context.Context) error) *sampler {
	s := &sampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := f(ctx); err != nil && s.err == nil && ctx.Err() == nil {
				s.err = err
			}
			select {
			case <-s.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() error {
	close(s.quit)
	<-s.done
	return s.err
}

// lagWatch samples the members' lag (ferry_lag_seconds' definition)
// every 200 ms.
type lagWatch struct {
	s       *sampler
	start   time.Time
	max     float64
	maxAt   time.Duration // since start
	samples int
	over    int // samples of 5 s or more
}

func (e *snapEnv) watchLag(ctx context.Context) *lagWatch {
	l := &lagWatch{start: time.Now()}
	l.s = startSampler(ctx, 200*time.Millisecond, func(context.Context) error {
		sts, err := e.memberStatuses()
		if err != nil {
			return err
		}
		var worst float64
		for _, st := range sts {
			for _, lag := range st.Lag {
				worst = max(worst, lag)
			}
		}
		if worst > l.max {
			l.max, l.maxAt = worst, time.Since(l.start)
		}
		if worst >= 5 {
			l.over++
		}
		l.samples++
		return nil
	})
	return l
}

// stop ends the sampling and describes it.
func (l *lagWatch) stop() (maxLag float64, text string, err error) {
	err = l.s.stop()
	text = fmt.Sprintf("%.0f s, %s after the request (%d samples of every owned partition until caught up, %d of them ≥ 5 s)",
		l.max, l.maxAt.Round(100*time.Millisecond), l.samples, l.over)
	return l.max, text, err
}

// windowWatch samples the source's oplog window every 250 ms: the time
// from its oldest entry (ferry's OplogStart probe) to the newest write.
type windowWatch struct {
	s       *sampler
	max     time.Duration
	samples int
}

func (e *snapEnv) watchWindow(ctx context.Context) (*windowWatch, error) {
	probe, err := ferry.NewConsumer(e.srcClient, func(context.Context, *ferry.Event) error { return nil },
		ferry.Stream(snapStream+"-probe"), ferry.WatchCollection(snapDB, snapColl), ferry.Checkpoints(e.store), ferry.OnPoison(ferry.PoisonStall))
	if err != nil {
		return nil, err
	}
	w := &windowWatch{}
	var hint bson.Timestamp
	w.s = startSampler(ctx, 250*time.Millisecond, func(ctx context.Context) error {
		start, err := probe.OplogStart(ctx, hint)
		if err != nil {
			return err
		}
		hint = start
		now, err := operationTime(ctx, e.srcClient)
		if err != nil {
			return err
		}
		w.max = max(w.max, tsDiff(now, start))
		w.samples++
		return nil
	})
	return w, nil
}

func (w *windowWatch) stop() (time.Duration, int, error) {
	err := w.s.stop()
	return w.max, w.samples, err
}

// tsDiff is a - b in seconds; within one second, the increments tell
// nothing of time, so it is 0 there.
func tsDiff(a, b bson.Timestamp) time.Duration {
	if a.T <= b.T {
		return 0
	}
	return time.Duration(a.T-b.T) * time.Second
}

// rawFind reads the whole collection with one find, batchSize documents
// a batch, as a driver loop would, and returns how many it read and how
// long that took.
func rawFind(ctx context.Context, coll *mongo.Collection, batchSize int) (int64, time.Duration, error) {
	start := time.Now()
	cur, err := coll.Find(ctx, bson.D{}, findBatch(batchSize))
	if err != nil {
		return 0, 0, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var n int64
	for cur.Next(ctx) {
		n++
	}
	if err := errors.Join(cur.Err(), ctx.Err()); err != nil {
		return n, 0, err
	}
	return n, time.Since(start), nil
}
